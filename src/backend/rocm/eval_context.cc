// The evaluation context (docs/design/eval_context.md): what one evaluation
// on this thread uses on each GPU, resolved the first time it touches the
// device and then read without a lock; the multi_stream bundles it takes;
// the range checks its kernels defer to its end.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/rocm/context.h"
#include "backend/rocm/memory.h"
#include "pyflame/errors.h"
#include "runtime/backend.h"

namespace pyflame::backend::rocm {

namespace {

// Check words are sub-allocated from slabs zeroed when made: an evaluation
// (or a graph) makes one allocation and one memset per slab, and reads each
// slab with one copy, however many checks its kernels defer.
constexpr int kSlabWords = 512;

struct Slab {
  DeviceContext* ctx;
  std::shared_ptr<Buffer> words;  // device memory, zeroed on ctx's stream
  int used, capacity;
};

// `count` words for a check on ctx from the last of `slabs` on ctx with room,
// or from a new slab: (slab index, offset in words).
std::pair<size_t, int> take_words(std::vector<Slab>& slabs, DeviceContext& ctx, int count) {
  for (size_t i = slabs.size(); i-- > 0;) {
    if (slabs[i].ctx != &ctx) continue;
    if (slabs[i].capacity - slabs[i].used >= count) {
      const int at = slabs[i].used;
      slabs[i].used += count;
      return {i, at};
    }
    break;
  }
  const int capacity = std::max(kSlabWords, count);
  Slab s{&ctx, allocate_on(ctx, capacity * sizeof(int64_t)), count, capacity};
  PF_HIP_CHECK(hipMemsetAsync(s.words->ptr, 0, capacity * sizeof(int64_t), ctx.stream));
  slabs.push_back(std::move(s));
  return {slabs.size() - 1, 0};
}

int64_t* word_ptr(const Slab& s, int at) { return static_cast<int64_t*>(s.words->ptr) + at; }

struct Check {
  size_t slab;  // in EvalContext::slabs
  int at, count;
  CheckRaise raise;
};

struct EvalContext {
  bool bundles = false;                       // multi_stream: take this evaluation's own contexts
  DeviceContext* devices[kMaxDevices] = {};   // resolved per device on first use
  std::vector<int> touched;                   // the devices resolved, to clear at the end
  std::vector<DeviceContext*> taken;          // bundles to give back at the end
  std::vector<Slab> slabs;                    // the words of this evaluation's checks
  std::vector<Check> checks;                  // in the order the kernels made them
  size_t checks_made = 0;                     // by this evaluation, read or not
  // Pinned staging blocks released once the bundles are drained; a
  // download's (dst set) first copies its bytes out.
  struct Staged {
    void* block;
    void* dst;
    size_t bytes;
  };
  std::vector<Staged> staged;
  int depth = 0;  // GpuEvaluations open on this thread (nested ones share this)
};

// The one evaluation context of this thread (reused: no allocation per
// evaluation), and whether an evaluation holds it.
thread_local EvalContext t_storage;
thread_local EvalContext* t_eval = nullptr;

// ---- multi_stream bundles: whole contexts, reused so their streams,
// handles and cached memory stay warm across evaluations. A thread keeps
// the bundle it last used on each device and takes it again without a
// lock; the shared pool (one mutex) serves a thread's first evaluation on a
// device and takes a thread's bundles back when the thread ends.
std::atomic<bool> g_multi_stream{false};
std::mutex g_pool_mu;
std::vector<DeviceContext*> g_free_bundles[kMaxDevices];  // leaked like the contexts

struct OwnBundles {
  DeviceContext* kept[kMaxDevices] = {};
  ~OwnBundles() {
    std::lock_guard lk(g_pool_mu);
    for (DeviceContext* b : kept) {
      if (b) g_free_bundles[b->device].push_back(b);
    }
  }
};
thread_local OwnBundles t_bundles;

DeviceContext* take_bundle(int device) {
  DeviceContext& shared = shared_context(device);
  DeviceContext* b = std::exchange(t_bundles.kept[device], nullptr);
  if (!b) {
    std::lock_guard lk(g_pool_mu);
    auto& pool = g_free_bundles[device];
    if (!pool.empty()) {
      b = pool.back();
      pool.pop_back();
    }
  }
  if (!b) {
    b = create_context(device);
    b->bundle = true;
  }
  // Work queued on the shared stream (uploads, earlier evaluations with
  // multi_stream off) comes first. An idle shared stream has finished all
  // of it: then there is nothing to order (one query instead of an event
  // recorded and waited on). Here, not in order_streams: the shared stream
  // never captures, while order_streams' `before` may, and a query would
  // break that capture.
  DeviceGuard g(device);
  const hipError_t idle = hipStreamQuery(shared.stream);
  if (idle != hipSuccess) {
    (void)gpu::still_running(idle);
    order_streams(shared.stream, b->stream);  // raises a query's real error, if any
  }
  return b;
}

void give_back(DeviceContext* b) {
  DeviceContext*& kept = t_bundles.kept[b->device];
  if (!kept) {
    kept = b;
    return;
  }
  std::lock_guard lk(g_pool_mu);
  g_free_bundles[b->device].push_back(b);
}

// Graph capture (graph.cc): this thread's evaluations on the capture's
// device run on its private context (stream, handles, memory pool).
thread_local DeviceContext* t_capture = nullptr;
thread_local std::vector<CapturedCheck> t_captured_checks;  // made while capturing
thread_local std::vector<Slab> t_captured_slabs;            // their words
std::vector<DeviceContext*> g_free_capture[kMaxDevices];  // guarded by g_pool_mu

DeviceContext& resolve(EvalContext* ev, int device) {
  check_device(device);
  if (!ev) return shared_context(device);
  DeviceContext* c = t_capture && t_capture->device == device ? t_capture
                     : ev->bundles                           ? take_bundle(device)
                                                             : &shared_context(device);
  if (ev->bundles && c != t_capture) ev->taken.push_back(c);
  ev->devices[device] = c;
  ev->touched.push_back(device);
  return *c;
}

// Waits for a stream without throwing (destructors, error paths).
void drain(DeviceContext* c) {
  int prev = -1;
  (void)hipGetDevice(&prev);
  (void)hipSetDevice(c->device);
  (void)hipStreamSynchronize(c->stream);
  if (prev >= 0) (void)hipSetDevice(prev);
}

// Reads every pending check with one copy per slab into pinned memory and
// one wait per stream, then raises the first that failed.
void read_checks(EvalContext& ev) {
  std::vector<Check> checks = std::move(ev.checks);
  std::vector<Slab> slabs = std::move(ev.slabs);
  ev.checks.clear();
  ev.slabs.clear();
  size_t total = 0;
  std::vector<size_t> base;  // each slab's first word in host memory
  for (const Slab& s : slabs) {
    base.push_back(total);
    total += s.used;
  }
  PinnedMemoryPool& pinned = get_pinned_pool();
  auto* host = static_cast<int64_t*>(pinned.acquire(total * sizeof(int64_t)));
  hipError_t err = hipSuccess;
  std::vector<DeviceContext*> streams;
  for (size_t i = 0; i < slabs.size(); ++i) {
    const Slab& s = slabs[i];
    DeviceGuard g(s.ctx->device);
    if (err == hipSuccess) {
      err = hipMemcpyAsync(host + base[i], s.words->ptr, s.used * sizeof(int64_t), hipMemcpyDeviceToHost,
                           s.ctx->stream);
    }
    if (std::find(streams.begin(), streams.end(), s.ctx) == streams.end()) streams.push_back(s.ctx);
  }
  for (DeviceContext* s : streams) {
    DeviceGuard g(s->device);
    hipError_t e = hipStreamSynchronize(s->stream);
    if (err == hipSuccess) err = e;
  }
  std::vector<int64_t> words(host, host + total);
  pinned.release(host);
  PF_HIP_CHECK(err);
  for (const Check& c : checks) {
    const int64_t* w = words.data() + base[c.slab] + c.at;
    if (w[0] != 0) c.raise(w);
  }
}

}  // namespace

DeviceContext& context(int device) {
  EvalContext* ev = t_eval;
  if (ev && static_cast<unsigned>(device) < static_cast<unsigned>(kMaxDevices)) {
    if (DeviceContext* c = ev->devices[device]) return *c;
  }
  return resolve(ev, device);
}

bool using_bundles() { return t_eval && t_eval->bundles; }

namespace {
// Whether finish() of this thread's evaluation will wait for ctx's stream.
bool drained_at_finish(const EvalContext* ev, const DeviceContext& ctx) {
  return ev && std::find(ev->taken.begin(), ev->taken.end(), &ctx) != ev->taken.end();
}

// An evaluation's bundles are drained: the downloads' bytes go to their
// destinations (`copy`: finish() reached its wait), then every staging
// block goes back.
void release_staging(EvalContext& ev, bool copy) noexcept {
  PinnedMemoryPool& pool = get_pinned_pool();
  for (const EvalContext::Staged& s : ev.staged) {
    if (copy && s.dst) std::memcpy(s.dst, s.block, s.bytes);
    try {
      pool.release(s.block);
    } catch (...) {
      // Not this pool's: nothing to give back.
    }
  }
  ev.staged.clear();
}
}  // namespace

bool release_at_finish(DeviceContext& ctx, void* pinned) {
  if (!drained_at_finish(t_eval, ctx)) return false;
  t_eval->staged.push_back({pinned, nullptr, 0});
  return true;
}

bool download_at_finish(DeviceContext& ctx, void* pinned, void* dst, size_t bytes) {
  if (!drained_at_finish(t_eval, ctx) || t_eval->depth != 1) return false;
  t_eval->staged.push_back({pinned, dst, bytes});
  return true;
}

hipStream_t current_stream(int device) {
  const EvalContext* ev = t_eval;
  if (ev && static_cast<unsigned>(device) < static_cast<unsigned>(kMaxDevices) && ev->devices[device]) {
    return ev->devices[device]->stream;
  }
  return shared_context(device).stream;
}

bool multi_stream() { return g_multi_stream.load(); }
void set_multi_stream(bool on) { g_multi_stream = on; }

DeviceContext* take_capture_context(int device) {
  {
    std::lock_guard lk(g_pool_mu);
    auto& pool = g_free_capture[device];
    if (!pool.empty()) {
      DeviceContext* c = pool.back();
      pool.pop_back();
      return c;
    }
  }
  DeviceContext* c = create_context(device);
  c->bundle = true;  // a buffer freed from another stream is ordered first
  return c;
}

void give_back_capture_context(DeviceContext* c) {
  std::lock_guard lk(g_pool_mu);
  g_free_capture[c->device].push_back(c);
}

void set_capture_context(DeviceContext* c) { t_capture = c; }

std::vector<CapturedCheck> take_captured_checks() {
  t_captured_slabs.clear();  // the checks keep their slabs' memory
  return std::exchange(t_captured_checks, {});
}

void read_captured_checks(hipStream_t stream, const std::vector<CapturedCheck>& checks) {
  if (checks.empty()) return;
  // One copy per slab: the words up to the last check's end.
  std::vector<const Buffer*> slabs;
  std::vector<size_t> ends, base;
  for (const CapturedCheck& c : checks) {
    auto it = std::find(slabs.begin(), slabs.end(), c.words.get());
    const size_t end = c.at + c.count;
    if (it == slabs.end()) {
      slabs.push_back(c.words.get());
      ends.push_back(end);
    } else {
      size_t& e = ends[it - slabs.begin()];
      e = std::max(e, end);
    }
  }
  size_t total = 0;
  for (size_t e : ends) {
    base.push_back(total);
    total += e;
  }
  PinnedMemoryPool& pinned = get_pinned_pool();
  auto* host = static_cast<int64_t*>(pinned.acquire(total * sizeof(int64_t)));
  hipError_t err = hipSuccess;
  for (size_t i = 0; i < slabs.size() && err == hipSuccess; ++i) {
    err = hipMemcpyAsync(host + base[i], slabs[i]->ptr, ends[i] * sizeof(int64_t), hipMemcpyDeviceToHost,
                         stream);
  }
  const hipError_t e = hipStreamSynchronize(stream);
  if (err == hipSuccess) err = e;
  std::vector<int64_t> words(host, host + total);
  pinned.release(host);
  PF_HIP_CHECK(err);
  for (const CapturedCheck& c : checks) {
    const size_t slab = std::find(slabs.begin(), slabs.end(), c.words.get()) - slabs.begin();
    const int64_t* w = words.data() + base[slab] + c.at;
    if (w[0] != 0) c.raise(w);
  }
}

int64_t* deferred_check(DeviceContext& ctx, int words, CheckRaise raise) {
  EvalContext* ev = t_eval;
  if (!ev) throw RuntimeError(errmsg("eval", "internal error: a device check outside an evaluation"));
  ++ev->checks_made;
  if (t_capture && &ctx == t_capture) {  // the graph's: read after each launch
    auto [slab, at] = take_words(t_captured_slabs, ctx, words);
    const Slab& s = t_captured_slabs[slab];
    t_captured_checks.push_back({s.words, static_cast<size_t>(at), words, std::move(raise)});
    return word_ptr(s, at);
  }
  auto [slab, at] = take_words(ev->slabs, ctx, words);
  ev->checks.push_back({slab, at, words, std::move(raise)});
  return word_ptr(ev->slabs[slab], at);
}

}  // namespace pyflame::backend::rocm

namespace pyflame::runtime {

using namespace backend::rocm;

GpuEvaluation::GpuEvaluation() {
  if (t_eval) {  // nested: the outer evaluation's context
    ++t_eval->depth;
    return;
  }
  t_storage.bundles = g_multi_stream.load();
  t_storage.depth = 1;
  t_eval = &t_storage;
  owner_ = true;
}

size_t GpuEvaluation::checks_made() const { return t_eval ? t_eval->checks_made : 0; }

void GpuEvaluation::finish() {
  EvalContext* ev = t_eval;
  if (!ev) return;
  // A nested evaluation's results are read by its caller: its checks (and
  // any the outer one made before) are read now.
  if (!ev->checks.empty()) read_checks(*ev);
  if (owner_) {
    for (DeviceContext* b : ev->taken) {
      DeviceGuard g(b->device);
      PF_HIP_CHECK(hipStreamSynchronize(b->stream));
    }
    release_staging(*ev, true);
  }
  finished_ = true;
}

GpuEvaluation::~GpuEvaluation() {
  if (!owner_) {
    --t_eval->depth;
    return;
  }
  EvalContext& ev = *t_eval;
  // After an error (finish() not reached or raising) the streams are still
  // drained before the bundles go back, so the next evaluation starts
  // clean; unread checks are dropped (their memory returns in stream order).
  ev.checks.clear();
  ev.slabs.clear();
  ev.checks_made = 0;
  for (DeviceContext* b : ev.taken) {
    if (!finished_) drain(b);
    give_back(b);
  }
  release_staging(ev, false);  // every bundle drained; after an error no download is written
  ev.taken.clear();
  for (int d : ev.touched) ev.devices[d] = nullptr;
  ev.touched.clear();
  ev.depth = 0;
  t_eval = nullptr;
}

std::shared_ptr<Buffer> allocate_gpu(int device, size_t bytes) { return allocate_on(context(device), bytes); }

}  // namespace pyflame::runtime
