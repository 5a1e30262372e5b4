// The 'math' family's bindings (pf.acos, pf.floor_divide, pf.logical_and, ...).
// Python scalars adopt the other operand's dtype and device (weak typing).
#include "common.h"

namespace pyflame::py {

namespace {

template <Tensor (*F)(const Tensor&)>
void def_math_unary(nb::module_& m, const char* name) {
  m.def(name, [name](nb::handle x) { return F(as_tensor(x, nullptr, name)); }, nb::arg("x").none());
}

template <Tensor (*F)(const Tensor&, const Tensor&)>
void def_math_binary(nb::module_& m, const char* name) {
  m.def(name, [name](nb::handle a, nb::handle b) {
    auto [x, y] = tensor_pair(a, b, name);
    return F(x, y);
  }, nb::arg("x1").none(), nb::arg("x2").none());
}

}  // namespace

void init_ops_math(nb::module_& m) {
#define PF_U(fn) def_math_unary<fn>(m, #fn);
  PF_U(acos) PF_U(acosh) PF_U(asin) PF_U(asinh) PF_U(atan) PF_U(atanh) PF_U(cosh) PF_U(sinh)
  PF_U(tan) PF_U(expm1) PF_U(log1p) PF_U(log2) PF_U(log10) PF_U(floor) PF_U(ceil) PF_U(round)
  PF_U(trunc) PF_U(sign) PF_U(signbit) PF_U(isnan) PF_U(isinf) PF_U(isfinite) PF_U(logical_not)
  PF_U(bitwise_invert)
#undef PF_U
#define PF_B(fn) def_math_binary<fn>(m, #fn);
  PF_B(atan2) PF_B(hypot) PF_B(copysign) PF_B(nextafter) PF_B(logaddexp) PF_B(floor_divide)
  PF_B(remainder) PF_B(bitwise_and) PF_B(bitwise_or) PF_B(bitwise_xor) PF_B(bitwise_left_shift)
  PF_B(bitwise_right_shift) PF_B(logical_and) PF_B(logical_or) PF_B(logical_xor)
#undef PF_B
}

}  // namespace pyflame::py
