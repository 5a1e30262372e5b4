// Bindings of the 'index' op family.
#include "common.h"
#include "pyflame/errors.h"
#include "pyflame/ops_index.h"

namespace pyflame::py {

namespace {

// A list or tuple of tensor-likes; non-tensors go to the first tensor's device.
std::vector<Tensor> tensor_list(nb::handle seq, const char* fn) {
  if (nb::isinstance<Tensor>(seq) || !(PyList_Check(seq.ptr()) || PyTuple_Check(seq.ptr()))) {
    throw ValueError(errmsg(fn, "expected a list or tuple of tensors, got " +
                                    std::string(Py_TYPE(seq.ptr())->tp_name)));
  }
  nb::sequence s = nb::borrow<nb::sequence>(seq);
  std::optional<Tensor> like;
  for (nb::handle h : s) {
    if (nb::isinstance<Tensor>(h)) {
      like = nb::cast<Tensor>(h);
      break;
    }
  }
  std::vector<Tensor> out;
  for (nb::handle h : s) out.push_back(as_tensor(h, like ? &*like : nullptr, fn));
  return out;
}

std::vector<int64_t> int_list(nb::handle seq, const char* fn, const char* what) {
  try {
    return nb::cast<std::vector<int64_t>>(seq);
  } catch (const nb::cast_error&) {
    throw ValueError(errmsg(fn, std::string(what) + " must be a sequence of ints"));
  }
}

}  // namespace

void init_ops_index(nb::module_& m) {
  auto none = nb::none();
  auto concat_fn = [](const char* fn) {
    return [fn](nb::handle tensors, nb::handle axis) { return concat(tensor_list(tensors, fn), to_axis(axis, fn)); };
  };
  m.def("concat", concat_fn("concat"), nb::arg("tensors"), nb::arg("axis").none() = 0,
        "Joins tensors along an existing axis (torch.cat).");
  m.def("cat", concat_fn("cat"), nb::arg("tensors"), nb::arg("axis").none() = 0, "Alias of concat.");
  m.def("stack", [](nb::handle tensors, nb::handle axis) {
    return stack(tensor_list(tensors, "stack"), to_axis(axis, "stack"));
  },
        nb::arg("tensors"), nb::arg("axis").none() = 0, "Joins equal-shaped tensors along a new axis.");
  m.def("split", [](nb::handle x, nb::handle size_or_sections, nb::handle ax) {
    Tensor t = as_tensor(x, nullptr, "split");
    const int axis = to_axis(ax, "split");
    if (PyIndex_Check(size_or_sections.ptr()) && !PySequence_Check(size_or_sections.ptr())) {
      return split(t, to_int64(size_or_sections, "split", "split_size"), axis);
    }
    return split(t, int_list(size_or_sections, "split", "split_size_or_sections"), axis);
  }, nb::arg("x").none(), nb::arg("split_size_or_sections").none(), nb::arg("axis").none() = 0,
     "Splits x into views: chunks of an int size, or pieces of the listed sizes (a list).");
  m.def("gather", [](nb::handle x, nb::handle axis, nb::handle index) {
    Tensor tx = as_tensor(x, nullptr, "gather");
    return gather(tx, to_axis(axis, "gather"), as_tensor(index, &tx, "gather"));
  }, nb::arg("x").none(), nb::arg("axis").none(), nb::arg("index").none(),
     "torch.gather: out[i][j] = x[index[i][j]][j] along axis 0 (and likewise per axis).");
  m.def("index_select", [](nb::handle x, nb::handle axis, nb::handle index) {
    Tensor tx = as_tensor(x, nullptr, "index_select");
    return index_select(tx, to_axis(axis, "index_select"), as_tensor(index, &tx, "index_select"));
  }, nb::arg("x").none(), nb::arg("axis").none(), nb::arg("index").none(),
     "Entries of x at a 1-d list of indices along axis.");
  m.def("embedding", [](nb::handle indices, nb::handle weight, std::optional<int64_t> padding_idx) {
    Tensor tw = as_tensor(weight, nullptr, "embedding");
    return embedding(as_tensor(indices, &tw, "embedding"), tw, padding_idx);
  }, nb::arg("indices").none(), nb::arg("weight").none(), nb::arg("padding_idx") = none,
     "Rows of weight (V, D) for integer indices: shape indices.shape + (D,).");
  m.def("pad", [](nb::handle x, nb::handle pads, const std::string& mode, std::optional<double> value) {
    return pad(as_tensor(x, nullptr, "pad"), int_list(pads, "pad", "pad"), pad_mode_from_string(mode),
               value.value_or(0.0));
  }, nb::arg("x").none(), nb::arg("pad"), nb::arg("mode") = "constant", nb::arg("value") = none,
     "torch.nn.functional.pad: pad = (last_lo, last_hi, prev_lo, prev_hi, ...); negative pads crop.");
  m.def("dropout", [](nb::handle x, double p, bool training) {
    return dropout(as_tensor(x, nullptr, "dropout"), p, training);
  }, nb::arg("x").none(), nb::arg("p") = 0.5, nb::arg("training") = true,
     "Zeroes elements with probability p (seeded by pf.manual_seed), scales the rest by 1/(1-p).");
  m.def("slice_update", [](nb::handle cache, nb::handle update, nb::handle start, nb::handle axis) {
    Tensor tc = as_tensor(cache, nullptr, "slice_update");
    return slice_update(tc, as_tensor(update, &tc, "slice_update"), to_int64(start, "slice_update", "start"), to_axis(axis, "slice_update"));
  }, nb::arg("cache").none(), nb::arg("update").none(), nb::arg("start").none(), nb::arg("axis").none() = 0,
     "A new version of cache with update written at [start, start + update.shape[axis]) along\n"
     "axis. When nothing else holds the old version (rebind it: cache = pf.slice_update(cache,\n"
     "...)), evaluation reuses its buffer and writes only the update (no copy of the cache).");
  m.def("batch_matmul", [](nb::handle a, nb::handle b) {
    Tensor ta = as_tensor(a, nullptr, "batch_matmul");
    return batch_matmul(ta, as_tensor(b, &ta, "batch_matmul"));
  }, nb::arg("a").none(), nb::arg("b").none(), "(B, M, K) x (B, K, N) -> (B, M, N).");
}

}  // namespace pyflame::py
