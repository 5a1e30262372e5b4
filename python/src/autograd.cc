// Autograd bindings: grad mode, backward, functional grad and the Tensor
// attributes PyTorch users expect (requires_grad, grad, is_leaf, detach).
#include <memory>
#include <unordered_set>

#include "common.h"
#include "pyflame/amp.h"
#include "pyflame/autograd.h"
#include "pyflame/errors.h"

namespace pyflame::py {

namespace {
// A Python callable the engine holds, calls and drops with the GIL released:
// each takes the GIL.
std::shared_ptr<nb::object> held_callable(nb::callable fn) {
  return std::shared_ptr<nb::object>(new nb::object(std::move(fn)), [](nb::object* o) {
    if (!Py_IsInitialized()) {  // interpreter gone: leak the reference
      o->release();
      delete o;
      return;
    }
    nb::gil_scoped_acquire gil;
    delete o;
  });
}

// A Python callable as a custom vjp.
CustomVjpFn python_vjp(nb::callable fn) {
  std::shared_ptr<nb::object> held = held_callable(std::move(fn));
  return [held](const Tensor& cotan, const std::vector<int>& argnums) {
    nb::gil_scoped_acquire gil;
    nb::object out = (*held)(cotan, argnums);
    try {
      return nb::cast<std::vector<Tensor>>(out);
    } catch (const nb::cast_error&) {
      throw ValueError(errmsg("backward", "a custom backward must return a list of tensors, got " +
                                              std::string(nb::type_name(out.type()).c_str())));
    }
  };
}

std::vector<Tensor> grad_leaves(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> leaves, stack;
  std::unordered_set<Node*> seen;
  for (const Tensor& t : outputs) stack.push_back(t);
  while (!stack.empty()) {
    Tensor t = std::move(stack.back());
    stack.pop_back();
    if (!t.defined() || !t.requires_grad() || !seen.insert(t.node()).second) continue;
    if (t.node()->grad_leaf) {
      leaves.push_back(t);
      continue;
    }
    for (const Tensor& in : t.inputs()) stack.push_back(in);
  }
  return leaves;
}
}  // namespace

void replace_keeping_grad_state(Tensor& self, const Tensor& other) {
  if (!self.requires_grad() || !self.node()->grad_leaf) {
    self.rebind(other);
    return;
  }
  Tensor g = self.grad();
  Tensor leaf = detach(other);
  leaf.set_requires_grad(true);
  if (g.defined() && g.shape() == leaf.shape() && g.device() == leaf.device()) leaf.set_grad(g);
  self.rebind(leaf);
}

void def_autograd_methods(nb::class_<Tensor>& cls) {
  cls.def_prop_rw(
         "requires_grad", [](const Tensor& t) { return t.requires_grad(); },
         [](Tensor& t, nb::handle on) {
           // A property setter has no name in nanobind's own message.
           if (!PyBool_Check(on.ptr())) {  // as torch: a bool, not 1 or None
             const std::string got = nb::type_name(on.type()).c_str();
             throw nb::type_error(errmsg("requires_grad", "must be a bool, got " + got).c_str());
           }
           t.set_requires_grad(on.ptr() == Py_True);
         },
         nb::for_setter(nb::arg("value").none()))
      .def("requires_grad_", [](Tensor& t, bool on) { t.set_requires_grad(on); return t; },
           nb::arg("requires_grad") = true)
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def_prop_rw(
          "grad",
          [](const Tensor& t) -> std::optional<Tensor> {
            Tensor g = t.grad();
            return g.defined() ? std::optional<Tensor>(g) : std::nullopt;
          },
          [](Tensor& t, nb::handle g) {
            if (!g.is_none() && !nb::isinstance<Tensor>(g)) {
              const std::string got = nb::type_name(g.type()).c_str();
              throw nb::type_error(errmsg("grad", "must be a Tensor or None, got " + got).c_str());
            }
            t.set_grad(g.is_none() ? Tensor() : nb::cast<Tensor>(g));
          },
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
  m.def("_custom_vjp", [](const Tensor& value, const std::vector<Tensor>& inputs, nb::callable fn,
                          bool always) {
    return custom_vjp(value, inputs, python_vjp(std::move(fn)), always);
  }, nb::arg("value"), nb::arg("inputs"), nb::arg("backward"), nb::arg("always") = false,
     "value, linked to inputs so that backward calls backward(cotangent, argnums) for their "
     "gradients (see pf.autograd.Function)");
  m.def("_register_post_accumulate_grad_hook",
        [](const Tensor& leaf, nb::callable fn) {
          std::shared_ptr<nb::object> held = held_callable(std::move(fn));
          return register_post_accumulate_grad_hook(leaf, [held](const Tensor& t) {
            nb::gil_scoped_acquire gil;
            (*held)(t);
          });
        },
        nb::arg("leaf"), nb::arg("hook"));
  m.def("_remove_post_accumulate_grad_hook", &remove_post_accumulate_grad_hook, nb::arg("leaf"), nb::arg("id"));
  m.def("_grad_leaves", &grad_leaves, nb::arg("outputs"),
        "The grad leaves (requires_grad tensors set by the user) the outputs depend on.");
  m.def("_autocast_dtype", []() { return autocast_dtype(); });
  m.def("_set_autocast_dtype", [](nb::handle dt) {
    set_autocast_dtype(dt.is_none() ? std::nullopt : std::optional<Dtype>(to_dtype(dt, "autocast")));
  }, nb::arg("dtype").none());
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
