#include "common.h"
#include "pyflame/errors.h"

#include <new>
#include <stdexcept>

NB_MODULE(_core, m) {
  m.doc() = "PyFlame core: lazy tensors, ops and devices";
  // Tensors still referenced when the interpreter exits (by tracebacks, test
  // runners, module globals) are reclaimed by the OS; no per-object report.
  nb::set_leak_warnings(false);
  // Subclass of RuntimeError, as the spec's users catch RuntimeError.
  static nb::exception<pyflame::OutOfMemoryError> oom(m, "OutOfMemoryError", PyExc_RuntimeError);
  // Catchable as OverflowError (NumPy 2) and as ValueError (like every other
  // value that does not fit a dtype here).
  static const std::string overflow_name = nb::cast<std::string>(m.attr("__name__")) + ".IntegerOverflowError";
  static nb::object overflow = nb::steal(PyErr_NewException(
      overflow_name.c_str(), nb::make_tuple(nb::handle(PyExc_OverflowError),
                                                     nb::handle(PyExc_ValueError)).ptr(), nullptr));
  m.attr("IntegerOverflowError") = overflow;
  // C++ library failures never reach Python under their C++ names: a failed
  // host allocation (std::bad_alloc, or a container asked for more than it
  // can hold) is pf.OutOfMemoryError; a failed argument conversion inside a
  // binding is a TypeError.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const pyflame::OverflowError& e) {
      PyErr_SetString(overflow.ptr(), e.what());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(oom.ptr(), "[allocate] out of host memory");
    } catch (const std::length_error&) {
      PyErr_SetString(oom.ptr(), "[allocate] out of host memory: the requested size is too large");
    } catch (const nb::cast_error&) {
      PyErr_SetString(PyExc_TypeError, "[pyflame] an argument has an unsupported type or a value out of range");
    }
  });
  pyflame::py::init_tensor(m);
  pyflame::py::init_autograd(m);
  pyflame::py::init_dlpack(m);
  pyflame::py::init_ops(m);
  pyflame::py::init_device(m);
  pyflame::py::init_backend(m);
  pyflame::py::init_ops_conv(m);
  pyflame::py::init_ops_index(m);
  pyflame::py::init_ops_llm(m);
  pyflame::py::init_ops_linalg(m);
  pyflame::py::init_ops_loss(m);
  pyflame::py::init_ops_math(m);
  pyflame::py::init_ops_norm(m);
  pyflame::py::init_ops_scatter(m);
  pyflame::py::init_ops_sort(m);
  pyflame::py::init_fusion(m);
  pyflame::py::init_compile(m);
  pyflame::py::init_distributed(m);
}
