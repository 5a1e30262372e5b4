// The 'linalg' family's bindings: pf._core._linalg_* (wrapped by pyflame.linalg).
#include <nanobind/stl/tuple.h>

#include "common.h"

namespace pyflame::py {

void init_ops_linalg(nb::module_& m) {
  namespace la = pyflame::linalg;
  m.def("_linalg_cholesky", &la::cholesky, nb::arg("x"), nb::arg("upper") = false);
  m.def("_linalg_inv", &la::inv, nb::arg("x"));
  m.def("_linalg_det", &la::det, nb::arg("x"));
  m.def("_linalg_slogdet", &la::slogdet, nb::arg("x"));
  m.def("_linalg_solve", &la::solve, nb::arg("x1"), nb::arg("x2"));
  m.def("_linalg_qr", &la::qr, nb::arg("x"), nb::arg("complete") = false);
  m.def("_linalg_eigh", &la::eigh, nb::arg("x"));
  m.def("_linalg_eigvalsh", &la::eigvalsh, nb::arg("x"));
  m.def("_linalg_svd", &la::svd, nb::arg("x"), nb::arg("full_matrices") = true);
  m.def("_linalg_svdvals", &la::svdvals, nb::arg("x"));
}

}  // namespace pyflame::py
