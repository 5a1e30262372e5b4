#include "common.h"
#include "pyflame/errors.h"

NB_MODULE(_core, m) {
  m.doc() = "PyFlame core: lazy tensors, ops and devices";
  // Tensors still referenced when the interpreter exits (by tracebacks, test
  // runners, module globals) are reclaimed by the OS; no per-object report.
  nb::set_leak_warnings(false);
  // Subclass of RuntimeError, as the spec's users catch RuntimeError.
  nb::exception<pyflame::OutOfMemoryError>(m, "OutOfMemoryError", PyExc_RuntimeError);
  pyflame::py::init_tensor(m);
  pyflame::py::init_autograd(m);
  pyflame::py::init_dlpack(m);
  pyflame::py::init_ops(m);
  pyflame::py::init_device(m);
  pyflame::py::init_backend(m);
  pyflame::py::init_ops_conv(m);
  pyflame::py::init_ops_index(m);
  pyflame::py::init_ops_llm(m);
  pyflame::py::init_ops_loss(m);
  pyflame::py::init_ops_norm(m);
  pyflame::py::init_ops_sort(m);
}
