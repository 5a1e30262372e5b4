// Bindings of the 'loss' op family.
#include "common.h"
#include "pyflame/errors.h"
#include "pyflame/ops_loss.h"

namespace pyflame::py {

namespace {

// A tensor-like on `like`'s device (integers stay integers: no weak typing).
Tensor on_device_of(nb::handle obj, const Tensor& like, const char* fn) {
  if (nb::isinstance<Tensor>(obj)) return nb::cast<Tensor>(obj);
  return to_device(as_tensor(obj, nullptr, fn), like.device());
}

std::optional<Tensor> opt_tensor(nb::handle obj, const Tensor& like, const char* fn) {
  if (obj.is_none()) return std::nullopt;
  return on_device_of(obj, like, fn);
}

LossReduction to_reduction(nb::handle obj, const char* fn) {
  if (!PyUnicode_Check(obj.ptr())) {
    throw ValueError(errmsg(fn, "reduction must be 'none', 'mean' or 'sum', got " +
                                    nb::cast<std::string>(nb::repr(obj))));
  }
  return loss_reduction(nb::cast<std::string>(obj), fn);
}

}  // namespace

void init_ops_loss(nb::module_& m) {
  auto none = nb::none();
  m.def("mse_loss", [](nb::handle input, nb::handle target, nb::handle reduction) {
    const char* fn = "mse_loss";
    LossReduction r = to_reduction(reduction, fn);
    Tensor x = as_tensor(input, nullptr, fn);
    return mse_loss(x, on_device_of(target, x, fn), r);
  }, nb::arg("input").none(), nb::arg("target").none(), nb::arg("reduction").none() = "mean",
     "Mean squared error: (input - target)^2, reduced by 'none', 'mean' or 'sum'.");
  m.def("cross_entropy", [](nb::handle logits, nb::handle target, nb::handle weight,
                            int64_t ignore_index, nb::handle reduction,
                            double label_smoothing) {
    const char* fn = "cross_entropy";
    LossReduction r = to_reduction(reduction, fn);
    Tensor x = as_tensor(logits, nullptr, fn);
    return cross_entropy(x, on_device_of(target, x, fn), opt_tensor(weight, x, fn), ignore_index, r,
                         label_smoothing);
  }, nb::arg("logits").none(), nb::arg("target").none(), nb::arg("weight").none() = none,
     nb::arg("ignore_index") = -100, nb::arg("reduction").none() = "mean",
     nb::arg("label_smoothing") = 0.0,
     "Cross entropy of logits (N, C[, d1, ...]) against integer class targets (N[, d1, ...]).");
  m.def("nll_loss", [](nb::handle log_probs, nb::handle target, nb::handle weight,
                       int64_t ignore_index, nb::handle reduction) {
    const char* fn = "nll_loss";
    LossReduction r = to_reduction(reduction, fn);
    Tensor x = as_tensor(log_probs, nullptr, fn);
    return nll_loss(x, on_device_of(target, x, fn), opt_tensor(weight, x, fn), ignore_index, r);
  }, nb::arg("log_probs").none(), nb::arg("target").none(), nb::arg("weight").none() = none,
     nb::arg("ignore_index") = -100, nb::arg("reduction").none() = "mean",
     "Negative log likelihood of log-probabilities against integer class targets.");
  m.def("bce_loss", [](nb::handle input, nb::handle target, nb::handle weight,
                       nb::handle reduction) {
    const char* fn = "bce_loss";
    LossReduction r = to_reduction(reduction, fn);
    Tensor x = as_tensor(input, nullptr, fn);
    return bce_loss(x, on_device_of(target, x, fn), opt_tensor(weight, x, fn), r);
  }, nb::arg("input").none(), nb::arg("target").none(), nb::arg("weight").none() = none,
     nb::arg("reduction").none() = "mean",
     "Binary cross entropy of probabilities; logs clamped at -100 like PyTorch.");
}

}  // namespace pyflame::py
