// Bindings of the 'norm' op family.
#include "common.h"
#include "pyflame/errors.h"
#include "pyflame/ops_norm.h"

namespace pyflame::py {

namespace {

// None -> nullopt; a tensor-like -> a tensor on x's device.
std::optional<Tensor> opt_param(nb::handle obj, const Tensor& x, const char* fn) {
  if (obj.is_none()) return std::nullopt;
  if (nb::isinstance<Tensor>(obj)) return nb::cast<Tensor>(obj);
  return to_device(as_tensor(obj, nullptr, fn), x.device());
}

// An int or a sequence of ints.
Shape to_normalized_shape(nb::handle obj, const char* fn) {
  auto bad = [&]() {
    return ValueError(errmsg(fn, "normalized_shape must be an int or a sequence of ints, got " +
                                     nb::cast<std::string>(nb::repr(obj))));
  };
  if (PyBool_Check(obj.ptr())) throw bad();
  if (PyIndex_Check(obj.ptr())) return {nb::cast<int64_t>(nb::int_(obj))};  // int, NumPy int
  if (!PySequence_Check(obj.ptr()) || PyUnicode_Check(obj.ptr())) throw bad();
  Shape s;
  for (nb::handle item : nb::borrow<nb::sequence>(obj)) {
    if (PyBool_Check(item.ptr()) || !PyIndex_Check(item.ptr())) throw bad();
    s.push_back(nb::cast<int64_t>(nb::int_(item)));
  }
  return s;
}

}  // namespace

void init_ops_norm(nb::module_& m) {
  auto none = nb::none();
  m.def("layer_norm", [](nb::handle x, nb::handle normalized_shape, nb::handle weight,
                         nb::handle bias, double eps) {
    const char* fn = "layer_norm";
    Tensor t = as_tensor(x, nullptr, fn);
    return layer_norm(t, to_normalized_shape(normalized_shape, fn), opt_param(weight, t, fn),
                      opt_param(bias, t, fn), eps);
  }, nb::arg("x").none(), nb::arg("normalized_shape"), nb::arg("weight").none() = none,
     nb::arg("bias").none() = none, nb::arg("eps") = 1e-5,
     "Layer normalization over the trailing dims given by normalized_shape.");
  m.def("group_norm", [](nb::handle x, int64_t num_groups, nb::handle weight, nb::handle bias,
                         double eps) {
    const char* fn = "group_norm";
    Tensor t = as_tensor(x, nullptr, fn);
    return group_norm(t, num_groups, opt_param(weight, t, fn), opt_param(bias, t, fn), eps);
  }, nb::arg("x").none(), nb::arg("num_groups"), nb::arg("weight").none() = none,
     nb::arg("bias").none() = none, nb::arg("eps") = 1e-5,
     "Group normalization of an (N, C, *) input; weight and bias of shape (C,).");
  m.def("rms_norm", [](nb::handle x, nb::handle weight, double eps) {
    const char* fn = "rms_norm";
    Tensor t = as_tensor(x, nullptr, fn);
    return rms_norm(t, opt_param(weight, t, fn), eps);
  }, nb::arg("x").none(), nb::arg("weight").none() = none, nb::arg("eps") = 1e-6,
     "RMS normalization over the last dim: x / sqrt(mean(x^2) + eps) * weight.");
}

}  // namespace pyflame::py
