// pf.compile's core (docs/design/replay.md): a trace of one call of a
// Python function, the program built from it, and the replay that records
// that program over new arguments. The cache and the Python side effects
// are in pyflame/_compile.py.
#include <memory>
#include <optional>

#include "common.h"
#include "pyflame/compile.h"
#include "pyflame/errors.h"
#include "runtime/program.h"
#include "runtime/trace.h"

namespace pyflame::py {

namespace {

// One trace of a Python function on this thread, plus the tensor handles
// the function rebound (Tensor._replace: parameters, optimizer state).
struct PyTrace {
  runtime::Trace trace;
  std::optional<runtime::TraceScope> scope;
  std::vector<nb::object> rebound;  // held while tracing only
};

thread_local PyTrace* t_trace = nullptr;

// A program and the handles whose rebinding it replays (weakly: a dropped
// handle needs no update).
struct PyProgram {
  std::shared_ptr<const runtime::Program> program;
  std::vector<nb::weakref> holders;
};

void begin(PyTrace& t) {
  if (t_trace || runtime::active_trace()) {
    throw RuntimeError("[compile] a trace is already active on this thread");
  }
  t.scope.emplace(t.trace);
  t_trace = &t;
}

void end(PyTrace& t) {
  if (t_trace != &t) return;
  t.scope.reset();
  t_trace = nullptr;
}

PyProgram* build(PyTrace& t, const std::vector<Tensor>& args, const std::vector<Tensor>& outputs) {
  if (t.scope) throw RuntimeError("[compile] the trace has not ended");
  auto p = std::make_unique<PyProgram>();
  std::vector<Tensor> finals;
  for (const nb::object& h : t.rebound) {
    finals.push_back(nb::cast<Tensor&>(h));
    p->holders.emplace_back(h);
  }
  p->program = std::make_shared<const runtime::Program>(t.trace, args, outputs, finals);
  t.rebound.clear();
  return p.release();
}

// The outputs, or None when the program no longer fits (trace again).
nb::object replay(PyProgram& p, const std::vector<Tensor>& args) {
  std::optional<runtime::Program::Result> r;
  // What the live handles hold now: the versions they let go of below.
  std::vector<const Node*> held;
  for (const nb::weakref& w : p.holders) {
    nb::object h = w();
    if (!h.is_none()) held.push_back(nb::cast<Tensor&>(h).node());
  }
  {
    nb::gil_scoped_release release;
    r = p.program->replay(args, held);
  }
  if (!r) return nb::none();
  for (size_t i = 0; i < p.holders.size(); ++i) {
    nb::object h = p.holders[i]();
    if (!h.is_none()) nb::cast<Tensor&>(h).rebind(r->rebound[i]);
  }
  return nb::cast(std::move(r->outputs));
}

}  // namespace

void note_rebind(nb::handle tensor) {
  PyTrace* t = t_trace;
  if (!t) return;
  for (const nb::object& h : t->rebound) {
    if (h.is(tensor)) return;
  }
  t->rebound.push_back(nb::borrow(tensor));
}

void init_compile(nb::module_& m) {
  nb::class_<PyTrace>(m, "_Trace")
      .def(nb::init<>())
      .def("begin", &begin)
      .def("end", &end)
      // The first host read the traced call made ("" if none).
      .def_prop_ro("host_read", [](const PyTrace& t) { return t.trace.host_read; });
  nb::class_<PyProgram>(m, "_Program")
      .def_static("build", &build, nb::arg("trace"), nb::arg("args"), nb::arg("outputs"),
                  nb::rv_policy::take_ownership)
      .def("replay", &replay)
      .def_prop_ro("steps", [](const PyProgram& p) { return p.program->steps(); })
      .def_prop_ro("step_names", [](const PyProgram& p) { return p.program->step_names(); })
      .def_prop_ro("captured", [](const PyProgram& p) { return p.program->captured(); });
  m.def("_tracing", []() { return runtime::active_trace() != nullptr; });
  // The cache key of a call's tensors: their layouts and the switches a
  // trace bakes in.
  m.def("_compile_signature", [](const std::vector<Tensor>& tensors) {
    return runtime::layout_signature(tensors) * 31 + compile_settings_key();
  });
  // The same for a call whose arguments are all tensors (the common case),
  // or None when one is not: one call instead of a Python loop per call.
  m.def("_tensor_args_signature", [](nb::tuple args) -> nb::object {
    std::vector<Tensor> tensors;
    tensors.reserve(args.size());
    for (nb::handle h : args) {
      if (!nb::isinstance<Tensor>(h)) return nb::none();
      tensors.push_back(nb::cast<const Tensor&>(h));
    }
    return nb::int_(runtime::layout_signature(tensors) * 31 + compile_settings_key());
  });
}

}  // namespace pyflame::py
