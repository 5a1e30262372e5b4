// Bindings of the 'scatter' op family.
#include "common.h"
#include "pyflame/ops_scatter.h"

namespace pyflame::py {

void init_ops_scatter(nb::module_& m) {
  m.def("_next_node_id", &next_node_id);
  m.def("clone", [](nb::handle x) { return clone(as_tensor(x, nullptr, "clone")); },
        nb::arg("x").none(), "A copy of x with its own storage (differentiable).");
  m.def("put", [](nb::handle x, nb::handle index, nb::handle source) {
    Tensor tx = as_tensor(x, nullptr, "put");
    return put(tx, as_tensor(index, &tx, "put"), as_tensor(source, &tx, "put"));
  }, nb::arg("x").none(), nb::arg("index").none(), nb::arg("source").none(),
     "torch.put: x with source written at flat (row-major) positions index; negative\n"
     "positions count from the end. Reuses x's buffer when nothing else holds x.");
  m.def("scatter", [](nb::handle x, int axis, nb::handle index, nb::handle src) {
    Tensor tx = as_tensor(x, nullptr, "scatter");
    return scatter(tx, axis, as_tensor(index, &tx, "scatter"), as_tensor(src, &tx, "scatter"));
  }, nb::arg("x").none(), nb::arg("axis"), nb::arg("index").none(), nb::arg("src").none(),
     "torch.scatter: x with out[index[i][j]][j] = src[i][j] along axis 0 (likewise per axis);\n"
     "src may be a scalar.");
  m.def("scatter_add", [](nb::handle x, int axis, nb::handle index, nb::handle src) {
    Tensor tx = as_tensor(x, nullptr, "scatter_add");
    return scatter_add(tx, axis, as_tensor(index, &tx, "scatter_add"),
                       as_tensor(src, &tx, "scatter_add"));
  }, nb::arg("x").none(), nb::arg("axis"), nb::arg("index").none(), nb::arg("src").none(),
     "torch.scatter_add: x with src[i][j] added at out[index[i][j]][j] along axis 0.");
}

}  // namespace pyflame::py
