// The checked size helpers, and the ops that must use them: a shape whose
// size or byte count does not fit 64 bits is a ValueError naming the
// function, never a wrapped-around size.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <string>

#include "pyflame/checked.h"
#include "pyflame/errors.h"
#include "pyflame/ops.h"

using namespace pyflame;

namespace {
// Runs f, expecting ValueError whose message starts with "[fn] ".
template <typename F>
void expect_value_error(F&& f, const std::string& fn) {
  try {
    f();
    ADD_FAILURE() << "no ValueError from " << fn;
  } catch (const ValueError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[" + fn + "] ", 0), 0u) << e.what();
  }
}
constexpr int64_t k62 = int64_t{1} << 62;
}  // namespace

TEST(Checked, AddMul) {
  EXPECT_EQ(checked_add(INT64_MAX - 1, 1, "f"), INT64_MAX);
  EXPECT_EQ(checked_add(INT64_MIN, 0, "f"), INT64_MIN);
  EXPECT_EQ(checked_mul(int64_t{3037000499}, int64_t{3037000499}, "f"), int64_t{3037000499} * 3037000499);
  EXPECT_EQ(checked_mul(-k62, 2, "f"), INT64_MIN);
  expect_value_error([] { checked_add(INT64_MAX, 1, "f"); }, "f");
  expect_value_error([] { checked_add(INT64_MIN, -1, "f"); }, "f");
  expect_value_error([] { checked_mul(k62, 2, "g"); }, "g");
  expect_value_error([] { checked_mul(int64_t{3037000500}, int64_t{3037000500}, "g"); }, "g");
  expect_value_error([] { checked_mul(INT64_MIN, -1, "g"); }, "g");
}

TEST(Checked, ShapeSize) {
  EXPECT_EQ(checked_shape_size({}, "f"), 1);
  EXPECT_EQ(checked_shape_size({2, 3, 4}, "f"), 24);
  EXPECT_EQ(checked_shape_size({0, 5}, "f"), 0);
  EXPECT_EQ(checked_shape_size({k62, 1}, "f"), k62);
  // Zeros count as ones for the overflow check (as NumPy), so the strides of
  // a zero-size shape fit too.
  expect_value_error([] { checked_shape_size({0, k62, 4}, "zeros"); }, "zeros");
  expect_value_error([] { checked_shape_size({k62, 2}, "f"); }, "f");
  expect_value_error([] { checked_shape_size({int64_t{1} << 40, int64_t{1} << 40}, "f"); }, "f");
  expect_value_error([] { checked_shape_size({2, -1}, "f"); }, "f");
}

TEST(Checked, NBytes) {
  EXPECT_EQ(checked_nbytes({2, 3}, 4, "f"), 24);
  EXPECT_EQ(checked_nbytes({0, 3}, 8, "f"), 0);
  EXPECT_EQ(checked_nbytes({int64_t{1} << 60}, 4, "f"), int64_t{1} << 62);
  expect_value_error([] { checked_nbytes({k62}, 4, "f"); }, "f");
  expect_value_error([] { checked_nbytes({int64_t{1} << 61}, 4, "f"); }, "f");
  expect_value_error([] { checked_nbytes({0, k62}, 2, "f"); }, "f");
}

TEST(Checked, OffsetRange) {
  auto r = checked_offset_range({2, 3}, {3, 1}, 5, "f");
  EXPECT_EQ(r.lo, 5);
  EXPECT_EQ(r.hi, 10);
  r = checked_offset_range({4}, {-2}, 6, "f");
  EXPECT_EQ(r.lo, 0);
  EXPECT_EQ(r.hi, 6);
  r = checked_offset_range({0, k62}, {k62, 4}, 0, "f");  // empty: reaches nothing
  EXPECT_EQ(r.lo, 0);
  EXPECT_EQ(r.hi, 0);
  expect_value_error([] { checked_offset_range({3}, {k62}, 0, "f"); }, "f");
}

TEST(Checked, ValueFits) {
  check_value_fits(2147483647.0, Dtype::Int32, "f");
  check_value_fits(-2147483648.0, Dtype::Int32, "f");
  check_value_fits(-2147483648.5, Dtype::Int32, "f");  // truncates to INT32_MIN
  check_value_fits(-9223372036854775808.0, Dtype::Int64, "f");
  check_value_fits(NAN, Dtype::Float32, "f");
  check_value_fits(1e300, Dtype::Float16, "f");
  check_value_fits(NAN, Dtype::Bool, "f");
  expect_value_error([] { check_value_fits(2147483648.0, Dtype::Int32, "full"); }, "full");
  expect_value_error([] { check_value_fits(NAN, Dtype::Int32, "full"); }, "full");
  expect_value_error([] { check_value_fits(INFINITY, Dtype::Int64, "full"); }, "full");
  expect_value_error([] { check_value_fits(9223372036854775808.0, Dtype::Int64, "full"); }, "full");
}

TEST(Checked, OpsRejectOverflowingShapes) {
  expect_value_error([] { zeros({k62}); }, "full");
  expect_value_error([] { ones({int64_t{1} << 40, int64_t{1} << 40}); }, "full");
  expect_value_error([] { eye(int64_t{1} << 31); }, "eye");
  expect_value_error([] { arange(0, static_cast<double>(k62), 1); }, "arange");
  expect_value_error([] { arange(0., 1., 1e-19); }, "arange");
  expect_value_error([] { rand({k62, 4}); }, "rand");
  expect_value_error([] { randint(0, 5, {k62, 4}); }, "randint");
  expect_value_error([] { reshape(zeros({0}), {k62, 4}); }, "reshape");
  expect_value_error([] { broadcast_to(ones({1}), {k62}); }, "broadcast_to");
  Tensor big = broadcast_to(ones({1}, Dtype::Bool), {k62});  // 1-byte elements fit
  expect_value_error([&] { concat({big, big}, 0); }, "concat");
  expect_value_error([] { pad(ones({2}), {INT64_MAX, 1}); }, "pad");
  expect_value_error([] { full({2}, NAN, Dtype::Int32); }, "full");
  expect_value_error([] { eye(2, -2); }, "eye");
}

TEST(Checked, LargeValidShapesStayLazy) {
  // Sizes that fit are recorded (nothing is allocated until evaluation).
  Tensor t = zeros({int64_t{1} << 40});
  EXPECT_EQ(t.size(), int64_t{1} << 40);
  EXPECT_EQ(t.nbytes(), size_t{1} << 42);
  Tensor b = broadcast_to(ones({1}, Dtype::Bool), {k62});
  EXPECT_EQ(b.size(), k62);
}

TEST(Checked, HostAllocationFailureIsOutOfMemory) {
  // 2^62 bytes: no host has that much; the allocator reports it as such.
  Tensor t = zeros({int64_t{1} << 60}, Dtype::Float32);
  EXPECT_THROW(t.eval(), OutOfMemoryError);
  Tensor ok = ones({3});
  float v[3];
  ok.copy_to_host(v);
  EXPECT_EQ(v[2], 1.0f);
}
