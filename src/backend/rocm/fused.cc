// Fused regions on the GPU: the region's generated source (ir/passes/
// fuse_source.cc), compiled at run time for the device's exact architecture
// and cached in memory (per device) and on disk (settings::cache_dir()).
// A disk entry is keyed by a hash of the source, the options, the full
// architecture name and the compiler version; it holds that whole key and a
// checksum, so a corrupt, truncated or foreign file is detected and rebuilt.
// Files are written to a temporary name and renamed into place, so readers
// never see half a file. If compilation fails the caller runs the region's
// nodes unfused, and one warning says why.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <unordered_map>

#include "backend/reduce_shape.h"
#include "backend/rocm/context.h"
#include "backend/rocm/gpu/rtc.h"
#include "ir/passes/fuse.h"
#include "ir/passes/fuse_source.h"
#include "runtime/settings.h"

namespace pyflame {

namespace {

using backend::rocm::DeviceContext;

constexpr char kMagic[8] = {'P', 'F', 'K', 'C', 'O', 'D', 'E', '1'};

struct Entry {
  void* kernel = nullptr;  // null: compilation failed (error says why)
  void* parts = nullptr;   // a reduction's second pass
  std::string error;
  std::string name;
};

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, Entry> entries;  // device + signature -> kernel
  bool warned = false;
};

Cache& cache() {
  static Cache* c = new Cache;  // leaked: kernels outlive static destruction
  return *c;
}

std::string full_key(const fuse::KernelSource& ks, const std::vector<std::string>& opts, const std::string& arch,
                     const std::string& version) {
  std::string k = ks.source + "\n--\n";
  for (const auto& o : opts) k += o + " ";
  return k + "\n--\n" + arch + "\n--\n" + version;
}

std::string cache_file(const std::string& key) {
  const std::string& dir = settings::cache_dir();
  if (dir.empty()) return {};
  char name[64];
  std::snprintf(name, sizeof(name), "/kernels/%016llx.bin", static_cast<unsigned long long>(fuse::fnv1a(key)));
  return dir + name;
}

void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
bool get_u64(const std::string& s, size_t& at, uint64_t& v) {
  if (at + 8 > s.size()) return false;
  std::memcpy(&v, s.data() + at, 8);
  at += 8;
  return true;
}

// The code object stored for `key`, or false when the file is missing,
// damaged or belongs to another key.
bool read_cached(const std::string& path, const std::string& key, std::string* code) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t at = sizeof(kMagic);
  uint64_t klen = 0, clen = 0, sum = 0;
  if (s.size() < at || std::memcmp(s.data(), kMagic, sizeof(kMagic)) != 0) return false;
  if (!get_u64(s, at, klen) || at + klen > s.size() || s.compare(at, klen, key) != 0) return false;
  at += klen;
  if (!get_u64(s, at, clen) || at + clen + 8 != s.size()) return false;
  code->assign(s, at, clen);
  at += clen;
  return get_u64(s, at, sum) && sum == fuse::fnv1a(*code);
}

void mkdirs(const std::string& dir) {
  for (size_t p = 1; p != std::string::npos; p = dir.find('/', p + 1)) {
    ::mkdir(dir.substr(0, p).c_str(), 0755);
  }
  ::mkdir(dir.c_str(), 0755);
}

// Best effort: a cache that cannot be written only costs a later compile.
void write_cached(const std::string& path, const std::string& key, const std::string& code) {
  std::string s(kMagic, sizeof(kMagic));
  put_u64(s, key.size());
  s += key;
  put_u64(s, code.size());
  s += code;
  put_u64(s, fuse::fnv1a(code));
  mkdirs(path.substr(0, path.rfind('/')));
  std::random_device rd;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f.write(s.data(), std::streamsize(s.size()))) {
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

// Compiles (or reads from disk) and loads the kernel of `ks` on `device`.
Entry build(int device, const fuse::KernelSource& ks, bool reduce) {
  Entry e;
  e.name = ks.name;
  const std::string arch = gpu::rtc_arch(device);
  const std::vector<std::string> opts = gpu::rtc_options(arch);
  const std::string key = full_key(ks, opts, arch, gpu::rtc_compiler_version());
  const std::string path = cache_file(key);
  std::string code;
  if (!path.empty() && read_cached(path, key, &code)) {
    fuse::counters().disk_hits++;
  } else {
    if (!gpu::rtc_compile(ks.source, opts, &code, &e.error)) return e;
    fuse::counters().compiles++;
    if (!path.empty()) write_cached(path, key, code);
  }
  e.kernel = gpu::rtc_load(code, ks.name, &e.error);
  if (e.kernel && reduce) {
    e.parts = gpu::rtc_load(code, ks.name + "_parts", &e.error);
    if (!e.parts) e.kernel = nullptr;
  }
  return e;
}

std::string memo_key(int device, const FusedRegion& r, const fuse::KernelLayout& L) {
  std::string k = r.signature();
  k += char(device);
  k += char(L.shape.size());
  k += L.narrow ? 'n' : 'w';
  for (auto a : L.access) k += char('0' + int(a));
  return k;
}

// The kernel for a region on `device`, compiled on first use. Entries are
// never changed or removed once made (an unordered_map keeps their
// addresses), so each thread remembers the ones it used and finds them
// again without the cache's lock (multi_stream: threads evaluating at once
// do not meet here).
const Entry& kernel_for(DeviceContext& ctx, const FusedRegion& r, const fuse::KernelLayout& L) {
  thread_local std::unordered_map<std::string, const Entry*> seen;
  std::string mk = memo_key(ctx.device, r, L);
  if (auto it = seen.find(mk); it != seen.end()) {
    fuse::counters().memory_hits++;
    return *it->second;
  }
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (auto it = c.entries.find(mk); it != c.entries.end()) {
    fuse::counters().memory_hits++;
    seen.emplace(std::move(mk), &it->second);
    return it->second;
  }
  Entry e;
  try {
    e = build(ctx.device, fuse::kernel_source(r, L, ctx.wave_size), r.reduce);
  } catch (const std::exception& ex) {
    e.error = ex.what();
  }
  if (!e.kernel && !c.warned) {
    c.warned = true;
    std::cerr << "pyflame: warning: run-time compilation of a fused kernel failed; running the unfused "
                 "kernels instead. Reason: "
              << e.error << std::endl;
  }
  const Entry& made = c.entries.emplace(mk, std::move(e)).first->second;
  seen.emplace(std::move(mk), &made);
  return made;
}

// The prebuilt reduce kernel's geometry for rows of `cols` values
// (kernels/reduce.hip, reduce_typed; backend/reduce_shape.h), so the fused
// reduction combines in its order: kReduce.threads threads for long rows
// (else kShortRowThreads), a row split into chunks when there are too few
// rows to fill the device, 16-byte-wide reads when every row allows them (a
// fresh intermediate is aligned).
fuse::ReduceGeometry reduce_geometry(const DeviceContext& ctx, const FusedRegion& r, int* threads) {
  fuse::ReduceGeometry g;
  g.cols = 1;
  for (int a : r.reduce_axes) g.cols *= r.shape[a];
  g.rows = shape_size(r.shape) / g.cols;
  *threads = backend::reduce_threads(g.cols);
  g.chunks = backend::reduce_chunks(g.rows, g.cols, ctx.multiprocessors);
  const int64_t size = int64_t(itemsize(r.steps.back().dtype));
  const int64_t vec = 16 / size > 8 ? 8 : 16 / size;
  g.vec = g.cols % vec == 0;
  return g;
}

}  // namespace

namespace backend::rocm {
std::shared_ptr<Buffer> temp_buffer(DeviceContext& ctx, size_t bytes);  // kernels/common.h
}

namespace {

bool eval_reduce_gpu(DeviceContext& ctx, const Entry& e, const FusedRegion& r, const fuse::KernelLayout& L,
                     const std::vector<const void*>& in, Tensor& out) {
  int threads = 64;
  fuse::ReduceGeometry g = reduce_geometry(ctx, r, &threads);
  std::shared_ptr<Buffer> part;
  if (g.chunks > 1) {
    part = backend::rocm::temp_buffer(ctx, size_t(g.rows * g.chunks) * sizeof(float));
    g.partial = part->ptr;
  }
  std::vector<int64_t> args = fuse::kernel_args(r, L, in, {out.raw_data()}, g);
  auto grid = [&](int64_t blocks) {
    return static_cast<unsigned>(std::min<int64_t>(blocks, int64_t(ctx.multiprocessors) * 32));
  };
  gpu::rtc_launch(e.kernel, grid(g.rows * g.chunks), threads, args.data(), args.size() * sizeof(int64_t),
                  ctx.stream);
  if (g.chunks > 1) {  // as many threads as the prebuilt kernel's last block combines the chunks with
    gpu::rtc_launch(e.parts, grid(g.rows), backend::kReduce.threads, args.data(), args.size() * sizeof(int64_t),
                    ctx.stream);
  }
  return true;
}

}  // namespace

bool eval_fused_gpu(const FusedRegion& r, const std::vector<Tensor>& loads, std::vector<Tensor>& outs) {
  DeviceContext& ctx = backend::rocm::context(r.device.index);
  backend::rocm::DeviceGuard g(ctx.device);
  const fuse::KernelLayout L = fuse::kernel_layout(r);
  if (int(L.shape.size()) > fuse::kMaxKernelAxes) return false;
  const Entry& e = kernel_for(ctx, r, L);
  if (!e.kernel) return false;
  std::vector<const void*> in;
  for (const Tensor& t : loads) in.push_back(t.raw_data());
  if (r.reduce) return eval_reduce_gpu(ctx, e, r, L, in, outs.back());
  std::vector<void*> out;
  for (Tensor& t : outs) out.push_back(t.raw_data());
  std::vector<int64_t> args = fuse::kernel_args(r, L, in, out);
  constexpr int kBlock = 256;
  gpu::rtc_launch(e.kernel, backend::rocm::grid_for(ctx, outs.back().size(), kBlock), kBlock, args.data(),
                  args.size() * sizeof(int64_t), ctx.stream);
  return true;
}

std::string fused_kernel_gpu(const FusedRegion& r) {
  const fuse::KernelLayout L = fuse::kernel_layout(r);
  if (int(L.shape.size()) > fuse::kMaxKernelAxes) return "unfused (too many axes)";
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.entries.find(memo_key(r.device.index, r, L));
  if (it == c.entries.end()) return "run-time compiled kernel (not loaded yet)";
  if (!it->second.kernel) return "unfused (compilation failed: " + it->second.error.substr(0, 200) + ")";
  return "run-time compiled kernel " + it->second.name + " (loaded)";
}

}  // namespace pyflame
