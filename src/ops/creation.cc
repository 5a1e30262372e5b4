#include <algorithm>
#include <atomic>
#include <cmath>
#include <iomanip>
#include <mutex>
#include <sstream>

#include "core/random_bits.h"
#include "ops/op_utils.h"
#include "runtime/trace.h"

namespace pyflame {

Tensor full(const Shape& shape, double value, Dtype dtype, OptDevice device) {
  check_shape(shape, "full");
  check_value_fits(value, dtype, "full");
  return Tensor::make(shape, dtype, resolve_device(device), std::make_shared<Full>(value), {});
}

Tensor zeros(const Shape& shape, Dtype dtype, OptDevice device) {
  return full(shape, 0.0, dtype, device);
}

Tensor ones(const Shape& shape, Dtype dtype, OptDevice device) {
  return full(shape, 1.0, dtype, device);
}

Tensor scalar(double value, Dtype dtype, OptDevice device) { return full({}, value, dtype, device); }

Tensor arange(double start, double stop, double step, Dtype dtype, OptDevice device) {
  if (step == 0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(stop)) {
    throw ValueError(errmsg("arange", "start, stop and step must be finite and step non-zero"));
  }
  if (dtype == Dtype::Bool) throw ValueError(errmsg("arange", "bool is not a supported dtype"));
  // The count as NumPy computes it, checked before it becomes an integer: a
  // step too small for the range is an error, not an empty or wrapped result.
  const double count = std::ceil((stop - start) / step);
  if (!(count < 0x1p63)) {
    std::ostringstream os;
    os << std::setprecision(17) << "the range [" << start << ", " << stop << ") with step " << step
       << " has too many elements";
    throw ValueError(errmsg("arange", os.str()));
  }
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  if (n > 0) {
    check_value_fits(start, dtype, "arange");
    check_value_fits(start + static_cast<double>(n - 1) * step, dtype, "arange");
  }
  return Tensor::make({n}, dtype, resolve_device(device), std::make_shared<Arange>(start, step), {});
}

Tensor eye(int64_t n, int64_t m, int64_t k, Dtype dtype, OptDevice device) {
  if (m == -1) m = n;  // the default; any other negative m is an error below
  check_shape({n, m}, "eye");
  return Tensor::make({n, m}, dtype, resolve_device(device), std::make_shared<Eye>(k), {});
}

// ---- random: a global seed and a counter give each draw its own key ----
namespace {
std::atomic<uint64_t> g_seed{0};
std::atomic<uint64_t> g_counter{0};

uint64_t key_at(uint64_t c) { return mix64(g_seed.load(std::memory_order_relaxed) ^ mix64(c + 0x5eed)); }

// A traced draw notes its counter, so a replay draws at the same offset.
uint64_t next_key() {
  const uint64_t c = g_counter.fetch_add(1, std::memory_order_relaxed);
  const uint64_t key = key_at(c);
  if (runtime::Trace* t = runtime::active_trace()) t->keys[key] = c - t->rng_start;
  return key;
}

Tensor random_tensor(const Shape& shape, Dtype dtype, OptDevice device, Random::Kind kind,
                     const char* fn, int64_t lo = 0, int64_t hi = 0) {
  check_shape(shape, fn);
  return Tensor::make(shape, dtype, resolve_device(device),
                      std::make_shared<Random>(kind, next_key(), lo, hi), {});
}
}  // namespace

void manual_seed(uint64_t seed) {
  g_seed = seed;
  g_counter = 0;
}

namespace runtime {
uint64_t rng_reserve(uint64_t n) { return g_counter.fetch_add(n, std::memory_order_relaxed); }
uint64_t rng_counter() { return g_counter.load(std::memory_order_relaxed); }
uint64_t rng_key(uint64_t counter) { return key_at(counter); }
}  // namespace runtime

RngState get_rng_state() { return {g_seed.load(), g_counter.load()}; }

void set_rng_state(const RngState& state) {
  g_seed = state.seed;
  g_counter = state.counter;
}

Tensor rand(const Shape& shape, Dtype dtype, OptDevice device) {
  if (!is_floating(dtype)) throw ValueError(errmsg("rand", "needs a floating-point dtype"));
  return random_tensor(shape, dtype, device, Random::Uniform, "rand");
}

Tensor randn(const Shape& shape, Dtype dtype, OptDevice device) {
  if (!is_floating(dtype)) throw ValueError(errmsg("randn", "needs a floating-point dtype"));
  return random_tensor(shape, dtype, device, Random::Normal, "randn");
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Dtype dtype, OptDevice device) {
  if (!is_integral(dtype)) throw ValueError(errmsg("randint", "needs an integer dtype"));
  if (high <= low) {
    throw ValueError(errmsg("randint", "high (" + std::to_string(high) +
                                           ") must be greater than low (" + std::to_string(low) + ")"));
  }
  if (const IntInfo r = iinfo(dtype); low < r.min || high - 1 > r.max) {
    throw ValueError(errmsg("randint", std::string("range does not fit ") + dtype_name(dtype)));
  }
  return random_tensor(shape, dtype, device, Random::Integer, "randint", low, high);
}

}  // namespace pyflame
