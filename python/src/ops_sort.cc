// Bindings of the 'sort' op family.
#include <nanobind/stl/tuple.h>

#include "common.h"
#include "pyflame/errors.h"
#include "pyflame/ops_sort.h"

namespace pyflame::py {

void init_ops_sort(nb::module_& m) {
  auto none = nb::none();
  auto arg_fn = [](const char* fn, bool is_max) {
    return [fn, is_max](nb::handle x, nb::handle ax, bool keepdim) {
      Tensor t = as_tensor(x, nullptr, fn);
      std::optional<int> axis;
      if (!ax.is_none()) axis = to_axis(ax, fn);
      return is_max ? argmax(t, axis, keepdim) : argmin(t, axis, keepdim);
    };
  };
  m.def("argmax", arg_fn("argmax", true), nb::arg("x").none(), nb::arg("axis") = none,
        nb::arg("keepdim") = false,
        "Index (int64) of the largest entry along axis (None: of the flattened tensor).\n"
        "First index on ties; NaN counts as the maximum.");
  m.def("argmin", arg_fn("argmin", false), nb::arg("x").none(), nb::arg("axis") = none,
        nb::arg("keepdim") = false,
        "Index (int64) of the smallest entry along axis (None: of the flattened tensor).\n"
        "First index on ties; a NaN is returned first, as NumPy does.");
  m.def("argsort", [](nb::handle x, nb::handle axis, bool descending, bool stable) {
    return argsort(as_tensor(x, nullptr, "argsort"), to_axis(axis, "argsort"), descending, stable);
  }, nb::arg("x").none(), nb::arg("axis").none() = -1, nb::arg("descending") = false, nb::arg("stable") = true,
     "Indices (int64) that sort x along axis. Always stable; NaN sorts as the largest value.");
  m.def("sort", [](nb::handle x, nb::handle axis, bool descending, bool stable) {
    ValuesIndices r = sort(as_tensor(x, nullptr, "sort"), to_axis(axis, "sort"), descending, stable);
    return nb::make_tuple(r.values, r.indices);
  }, nb::arg("x").none(), nb::arg("axis").none() = -1, nb::arg("descending") = false, nb::arg("stable") = true,
     "torch.sort: (values, indices) along axis. Always stable; NaN sorts as the largest value.");
  m.def("topk", [](nb::handle x, nb::handle k, nb::handle axis, bool largest, bool sorted) {
    ValuesIndices r = topk(as_tensor(x, nullptr, "topk"), to_int64(k, "topk", "k"), to_axis(axis, "topk"), largest, sorted);
    return nb::make_tuple(r.values, r.indices);
  }, nb::arg("x").none(), nb::arg("k").none(), nb::arg("axis").none() = -1, nb::arg("largest") = true,
     nb::arg("sorted") = true,
     "torch.topk: (values, indices) of the k largest (largest=False: smallest) entries along\n"
     "axis, in sorted order; ties keep the lower index first.");
  m.def("cumsum", [](nb::handle x, nb::handle axis, nb::handle dtype) {
    return cumsum(as_tensor(x, nullptr, "cumsum"), to_axis(axis, "cumsum"), to_opt_dtype(dtype, "cumsum"));
  }, nb::arg("x").none(), nb::arg("axis").none(), nb::arg("dtype") = none,
     "Inclusive running sum along axis. dtype: of the accumulation and the result (default:\n"
     "int64 for integers and bool, else x's dtype).");
  m.def("multinomial", [](nb::handle probs, nb::handle num_samples, bool replacement) {
    return multinomial(as_tensor(probs, nullptr, "multinomial"),
                       to_int64(num_samples, "multinomial", "num_samples"), replacement);
  }, nb::arg("probs").none(), nb::arg("num_samples").none() = 1, nb::arg("replacement") = false,
     "torch.multinomial: num_samples category indices (int64) per row of non-negative weights\n"
     "(V,) or (R, V). Drawn from the seeded generator (pf.manual_seed): the same on every device.");
}

}  // namespace pyflame::py
