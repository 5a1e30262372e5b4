// Autograd bindings: grad mode, backward, functional grad and the Tensor
// attributes PyTorch users expect (requires_grad, grad, is_leaf, detach).
#include "common.h"
#include "pyflame/autograd.h"
#include "pyflame/errors.h"

namespace pyflame::py {

void replace_keeping_grad_state(Tensor& self, const Tensor& other) {
  if (!self.requires_grad() || !self.node()->grad_leaf) {
    self = other;
    return;
  }
  Tensor g = self.grad();
  self = detach(other);
  self.set_requires_grad(true);
  if (g.defined() && g.shape() == self.shape() && g.device() == self.device()) self.set_grad(g);
}

void def_autograd_methods(nb::class_<Tensor>& cls) {
  cls.def_prop_rw(
         "requires_grad", [](const Tensor& t) { return t.requires_grad(); },
         [](Tensor& t, bool on) { t.set_requires_grad(on); })
      .def("requires_grad_", [](Tensor& t, bool on) { t.set_requires_grad(on); return t; },
           nb::arg("requires_grad") = true)
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def_prop_rw(
          "grad",
          [](const Tensor& t) -> std::optional<Tensor> {
            Tensor g = t.grad();
            return g.defined() ? std::optional<Tensor>(g) : std::nullopt;
          },
          [](Tensor& t, std::optional<Tensor> g) { t.set_grad(g ? *g : Tensor()); },
          nb::for_setter(nb::arg("value").none()))
      .def("detach", &detach)
      .def(
          "backward",
          [](const Tensor& t, std::optional<Tensor> gradient, bool retain_graph) {
            nb::gil_scoped_release release;
            backward(t, gradient, retain_graph);
          },
          nb::arg("gradient").none() = nb::none(), nb::arg("retain_graph") = false,
          "Accumulates the gradient of this tensor into the .grad of every leaf it "
          "depends on.");
}

void init_autograd(nb::module_& m) {
  m.def("is_grad_enabled", &is_grad_enabled);
  m.def("set_grad_enabled", &set_grad_enabled, nb::arg("mode"));
  m.def("detach", &detach);
  m.def(
      "_autograd_grad",
      [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
         const std::vector<Tensor>& grad_outputs) {
        nb::gil_scoped_release release;
        return grad(outputs, inputs, grad_outputs);
      },
      nb::arg("outputs"), nb::arg("inputs"), nb::arg("grad_outputs"));
}

}  // namespace pyflame::py
