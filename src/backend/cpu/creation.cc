// Creation kernels: full, arange, eye and the counter-based random draws.
#include "backend/cpu/kernel_utils.h"
#include "core/random_bits.h"
#include "ir/primitives.h"

namespace pyflame {

namespace {
template <typename T, typename F>
void fill_indexed(Tensor& out, F&& value_at) {
  T* o = out.data<T>();
  cpu::parallel_for(out.size(), cpu::kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = value_at(i);
  });
}

int mantissa_bits(Dtype t) {
  return t == Dtype::Float16 ? 11 : t == Dtype::BFloat16 ? 8 : 24;
}
}  // namespace

void Full::eval_cpu(const std::vector<Tensor>&, Tensor& out) {
  cpu::dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = T(static_cast<cpu::acc_t<T>>(value));
    fill_indexed<T>(out, [&](int64_t) { return v; });
  });
}

void Arange::eval_cpu(const std::vector<Tensor>&, Tensor& out) {
  cpu::dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_indexed<T>(out, [&](int64_t i) {
      return T(static_cast<cpu::acc_t<T>>(start + static_cast<double>(i) * step));
    });
  });
}

void Eye::eval_cpu(const std::vector<Tensor>&, Tensor& out) {
  const int64_t m = out.shape()[1];
  cpu::dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_indexed<T>(out, [&](int64_t i) {
      return T(static_cast<cpu::acc_t<T>>(i % m - i / m == k ? 1 : 0));
    });
  });
}

void Random::eval_cpu(const std::vector<Tensor>&, Tensor& out) {
  const int mbits = mantissa_bits(out.dtype());
  cpu::dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw ValueError(errmsg(name(), "bool is not a supported dtype"));
    } else if constexpr (std::is_integral_v<T>) {
      const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
      fill_indexed<T>(out, [&](int64_t i) {
        // Unsigned: low + draw may pass through values beyond int64 (a full range).
        return static_cast<T>(static_cast<uint64_t>(low) + random_bits(key, i) % range);
      });
    } else if constexpr (std::is_same_v<T, double>) {
      fill_indexed<T>(out, [&](int64_t i) {
        uint64_t b = random_bits(key, i);
        return kind == Normal ? normal_f64_from_bits(b) : uniform_f64_from_bits(b);
      });
    } else {
      fill_indexed<T>(out, [&](int64_t i) {
        uint64_t b = random_bits(key, i);
        return T(kind == Normal ? normal_from_bits(b) : uniform_from_bits(b, mbits));
      });
    }
  });
}

}  // namespace pyflame
