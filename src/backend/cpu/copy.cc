// Layout copies and device transfers on the host side.
#include "backend/cpu/copy.h"

#include <cstring>

#include "backend/cpu/kernel_utils.h"
#include "ir/primitives.h"
#include "pyflame/backend/rocm.h"
#include "runtime/backend.h"

namespace pyflame::cpu {

namespace {
template <typename T>
void copy_typed(const Tensor& src, T* dst) {
  const T* s = src.data<T>();
  Strides dst_strides = row_major_strides(src.shape());
  Layout<2> L = collapse<2>(src.shape(), {&dst_strides, &src.strides()});
  parallel_for(src.size(), kGrain, [&](int64_t b, int64_t e) {
    for_each_run<2>(L, b, e, [&](auto off, int64_t n, auto ls) {
      T* d = dst + off[0];
      const T* p = s + off[1];
      if (ls[1] == 1) {
        std::memcpy(d, p, n * sizeof(T));
      } else {
        for (int64_t i = 0; i < n; ++i) d[i] = p[i * ls[1]];
      }
    });
  });
}
}  // namespace

namespace {
// Up to this size a row-major copy is one memcpy on the calling thread:
// starting an OpenMP team costs more than it saves, and threads copying at
// once would each start one. Larger copies are split over the cores.
constexpr size_t kSerialCopyBytes = 1u << 20;
}  // namespace

void copy_strided_to_contiguous(const Tensor& src, void* dst) {
  if (src.size() == 0) return;
  if (src.is_row_contiguous() && src.nbytes() <= kSerialCopyBytes) {
    std::memcpy(dst, src.raw_data(), src.nbytes());
    return;
  }
  switch (src.itemsize()) {
    case 1: copy_typed(src, static_cast<uint8_t*>(dst)); break;
    case 2: copy_typed(src, static_cast<uint16_t*>(dst)); break;
    case 4: copy_typed(src, static_cast<uint32_t*>(dst)); break;
    default: copy_typed(src, static_cast<uint64_t*>(dst)); break;
  }
}

}  // namespace pyflame::cpu

namespace pyflame {

void runtime::copy_host_contiguous(const Tensor& src, void* dst) { cpu::copy_strided_to_contiguous(src, dst); }

// Destination is the host: a same-device copy or a download from a GPU.
void ToDevice::eval_cpu(const std::vector<Tensor>& in, Tensor& out) {
  const Tensor& x = in[0];
  if (x.device().is_cpu()) {
    cpu::copy_strided_to_contiguous(x, out.raw_data());
  } else {
    backend::rocm::copy_to_host(x, out.raw_data());
  }
}

// Only GPU tensors take this node (a host tensor is copied directly).
void DownloadTo::eval_cpu(const std::vector<Tensor>& in, Tensor&) { runtime::download_gpu(in[0], dst); }

}  // namespace pyflame
