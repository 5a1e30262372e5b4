// The Tensor class: properties, host transfer, indexing and operators.
#include <algorithm>

#include "common.h"
#include "pyflame/errors.h"

namespace pyflame::py {

namespace {

nb::object item(const Tensor& t) {
  if (t.size() != 1) {
    throw ValueError(errmsg("item", "only tensors with one element can be converted to a "
                                    "Python scalar, got shape " + shape_str(t.shape())));
  }
  // Floats read as float64 (exact for every float dtype), integers as int64.
  Tensor h = astype(t, is_floating(t.dtype()) ? Dtype::Float64 : t.dtype() == Dtype::Bool ? Dtype::Bool : Dtype::Int64);
  union {
    double f;
    int64_t i64;
    bool b;
  } v;
  {
    nb::gil_scoped_release release;
    h.copy_to_host(&v);
  }
  switch (h.dtype()) {
    case Dtype::Bool: return nb::bool_(v.b);
    case Dtype::Int64: return nb::int_(v.i64);
    default: return nb::float_(v.f);
  }
}

// True, False and NumPy's bool scalars: NumPy reads them as a new axis of
// size 1 or 0, not as the integers 1 and 0.
bool is_bool_scalar(nb::handle h) {
  if (PyBool_Check(h.ptr())) return true;
  // A reference kept for the process (never released at interpreter exit).
  static PyObject* np_bool = nb::object(nb::module_::import_("numpy").attr("bool_")).release().ptr();
  return PyObject_IsInstance(h.ptr(), np_bool) == 1;
}

// An integer index; one beyond int64 is out of bounds, not a cast failure.
int64_t index_value(nb::handle h, const Tensor& x, int axis) {
  nb::int_ i(h);
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow) {
    throw IndexError(errmsg("getitem", "index " + nb::cast<std::string>(nb::str(i)) +
                                           " is out of bounds for axis " + std::to_string(axis) +
                                           " with size " + std::to_string(x.shape()[axis])));
  }
  return v;
}

// Basic indexing: ints, slices, None and one Ellipsis, as in NumPy.
Tensor getitem(const Tensor& x, nb::handle key) {
  std::vector<nb::handle> items;
  if (nb::isinstance<nb::tuple>(key)) {
    for (nb::handle h : nb::borrow<nb::tuple>(key)) items.push_back(h);
  } else {
    items.push_back(key);
  }
  int consumed = 0, ellipses = 0;
  // None and bool scalars add an axis; neither consumes one.
  auto adds_axis = [](nb::handle h) { return h.is_none() || is_bool_scalar(h); };
  for (auto h : items) {
    if (h.is(Py_Ellipsis)) ++ellipses;
    else if (!adds_axis(h)) ++consumed;
  }
  if (ellipses > 1) throw IndexError(errmsg("getitem", "an index can only have one ellipsis"));
  if (consumed > x.ndim()) {
    throw IndexError(errmsg("getitem", "too many indices for a " + std::to_string(x.ndim()) +
                                           "-d tensor"));
  }
  Tensor out = x;
  int axis = 0;
  // Consecutive slices make one slice view (x[:, :, :n] is one step of a
  // compiled function, not three); whole-axis slices before another index
  // make none (the result is a new view anyway).
  std::vector<int64_t> b, e, s;
  auto flush = [&](bool last) {
    if (b.empty()) return;
    bool whole = true;
    for (size_t i = 0; i < b.size(); ++i) whole = whole && b[i] == 0 && s[i] == 1 && e[i] >= out.shape()[i];
    if (!whole || last) out = slice(out, b, e, s);
    b.clear();
  };
  for (auto h : items) {
    if (PySlice_Check(h.ptr())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(h.ptr(), &start, &stop, &step) < 0) {
        // A zero step or a non-integer bound: Python's message under getitem.
        nb::python_error err;
        const std::string msg = errmsg("getitem", nb::cast<std::string>(nb::str(err.value())));
        if (err.matches(PyExc_ValueError)) throw ValueError(msg);
        throw nb::type_error(msg.c_str());
      }
      if (b.empty()) {
        b.assign(out.ndim(), 0);
        e.assign(out.shape().begin(), out.shape().end());
        s.assign(out.ndim(), 1);
      }
      b[axis] = start;
      e[axis] = stop;
      s[axis] = step;
      ++axis;
      continue;
    }
    if (h.is(Py_Ellipsis)) {
      axis += x.ndim() - consumed;
      continue;
    }
    flush(false);
    if (h.is_none()) {
      out = unsqueeze(out, axis++);
    } else if (is_bool_scalar(h)) {
      // As in NumPy: x[True] adds an axis of size 1, x[False] one of size 0.
      out = unsqueeze(out, axis);
      if (!PyObject_IsTrue(h.ptr())) {
        std::vector<int64_t> b0(out.ndim(), 0), e0(out.shape()), s0(out.ndim(), 1);
        e0[axis] = 0;
        out = slice(out, b0, e0, s0);
      }
      ++axis;
    } else if (PyLong_Check(h.ptr()) || PyIndex_Check(h.ptr())) {
      out = select(out, axis, index_value(h, out, axis));
    } else {
      throw IndexError(errmsg("getitem", "only integers, slices, None and ... are valid "
                                         "indices, got " + nb::cast<std::string>(nb::repr(h.type()))));
    }
  }
  flush(true);
  return out;
}

using BinFn = Tensor (*)(const Tensor&, const Tensor&);

// Operators report errors under the op's name: t + "x" -> "[add] ...".
template <size_t N>
struct OpName {
  constexpr OpName(const char (&s)[N]) { std::copy_n(s, N, str); }  // NOLINT
  char str[N];
};

template <BinFn F, OpName Name>
Tensor forward(const Tensor& a, nb::handle b) {
  return F(a, as_tensor(b, &a, Name.str));
}
// Comparisons with an int beyond the tensor's dtype answer instead of raising.
template <BinFn F, OpName Name>
Tensor compare(const Tensor& a, nb::handle b) {
  if (auto r = compare_with_big_int(nb::cast(a), b, Name.str)) return *r;
  return F(a, as_tensor(b, &a, Name.str));
}
template <BinFn F, OpName Name>
Tensor reflected(const Tensor& a, nb::handle b) {
  return F(as_tensor(b, &a, Name.str), a);
}

using UnaryFn = Tensor (*)(const Tensor&);

// x.relu(), x.exp(), ...: one method per function, in the order given.
template <UnaryFn... Fs>
void def_unary_methods(nb::class_<Tensor>& cls, std::initializer_list<const char*> names) {
  const char* const* name = names.begin();
  ((cls.def(*name++, [](const Tensor& t) { return Fs(t); })), ...);
}

}  // namespace

void init_tensor(nb::module_& m) {
  nb::enum_<Dtype>(m, "Dtype")
      .value("bool", Dtype::Bool)
      .value("int32", Dtype::Int32)
      .value("int64", Dtype::Int64)
      .value("float16", Dtype::Float16)
      .value("bfloat16", Dtype::BFloat16)
      .value("float32", Dtype::Float32)
      .value("float64", Dtype::Float64)
      .value("int8", Dtype::Int8)
      .value("int16", Dtype::Int16)
      .value("uint8", Dtype::UInt8)
      .def_prop_ro("is_signed", [](Dtype t) { return is_signed(t); })
      .def_prop_ro("itemsize", [](Dtype t) { return itemsize(t); })
      .def_prop_ro("is_floating_point", [](Dtype t) { return is_floating(t); })
      .def("__repr__", [](Dtype t) { return std::string("pyflame.") + dtype_name(t); })
      .def("__str__", [](Dtype t) { return std::string(dtype_name(t)); });
  m.def("promote_types", [](nb::handle a, nb::handle b) {
    return promote_types(to_dtype(a, "promote_types"), to_dtype(b, "promote_types"));
  }, nb::arg("a"), nb::arg("b"), "The dtype two tensors of these dtypes promote to in arithmetic.");
  m.def("_finfo", [](nb::handle d) {
    const FloatInfo f = finfo(to_dtype(d, "finfo"));
    return nb::make_tuple(f.bits, f.eps, f.max, f.min, f.smallest_normal, f.resolution);
  });
  m.def("_iinfo", [](nb::handle d) {
    const IntInfo i = iinfo(to_dtype(d, "iinfo"));
    return nb::make_tuple(i.bits, i.min, i.max);
  });

  // dynamic attributes and weak references: the Python layer tracks views of
  // written tensors (pyflame/_inplace.py).
  auto cls = nb::class_<Tensor>(m, "Tensor", nb::dynamic_attr(), nb::is_weak_referenceable());
  cls
      .def_prop_ro("shape", [](const Tensor& t) { return nb::tuple(nb::cast(t.shape())); })
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("device", [](const Tensor& t) { return t.device().str(); })
      .def_prop_ro("ndim", &Tensor::ndim)
      .def_prop_ro("size", &Tensor::size)
      .def_prop_ro("nbytes", &Tensor::nbytes)
      .def_prop_ro("itemsize", &Tensor::itemsize)
      .def_prop_ro("T", [](const Tensor& t) { return transpose(t, {}); })
      .def_prop_ro("is_evaluated", &Tensor::is_evaluated)
      .def("eval", [](const Tensor& t) { nb::gil_scoped_release r; t.eval(); return t; })
      .def("numpy", &to_numpy)
      .def("__array__", [](const Tensor& t, nb::handle dtype, nb::handle copy) {
            // NumPy 2's copy=False: a view (through DLPack) or an error.
            if (copy.is(Py_False)) return numpy_view(t, dtype);
            nb::object a = to_numpy(t);
            return dtype.is_none() ? a : a.attr("astype")(dtype);
          }, nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none())
      .def("item", &item)
      .def("to", [](const Tensor& t, nb::handle d) {
            if (!nb::isinstance<nb::str>(d)) {
              return astype(t, to_dtype(d, "to"));  // .to(dtype), as in PyTorch
            }
            return to_device(t, Device::parse(nb::cast<std::string>(d), "to"));
          })
      .def("cpu", [](const Tensor& t) { return to_device(t, Device::cpu()); })
      .def("astype", [](const Tensor& t, nb::handle d) { return astype(t, to_dtype(d, "astype")); })
      .def("contiguous", &contiguous)
      // Rebinds this handle to another tensor's node: how in-place updates
      // (running statistics, optimizer steps) look to Python holders.
      .def("_replace", [](nb::handle self, const Tensor& other) {
            replace_keeping_grad_state(nb::cast<Tensor&>(self), other);
            note_rebind(self);  // a compiled function replays it
          })
      // In-place writes: the storage's write count (torch's _version).
      .def_prop_ro("_version", &Tensor::version)
      .def("_bump_version", &Tensor::bump_version)
      .def("_share_version", &Tensor::share_version)
      .def_prop_ro("_node_id", &Tensor::id)
      // (strides, offset) in elements of the buffer: where a view's
      // elements sit, for writes through it.
      .def_prop_ro("_layout", [](const Tensor& t) {
            return nb::make_tuple(nb::tuple(nb::cast(t.strides())), t.offset());
          })
      .def_prop_ro("_is_contiguous", &Tensor::is_row_contiguous)
      // Whether this tensor is a view sharing base's storage.
      .def("_is_view_of", &Tensor::is_view_of)
      .def("__len__", [](const Tensor& t) {
            if (t.ndim() == 0) throw ValueError("[len] len() of a 0-d tensor");
            return t.shape()[0];
          })
      .def("__bool__", [](const Tensor& t) {
            if (t.size() != 1) {
              throw ValueError("[bool] the truth value of a tensor with more than one element "
                               "is ambiguous");
            }
            return nb::cast<bool>(nb::bool_(item(t)));
          })
      .def("__float__", [](const Tensor& t) { return nb::cast<double>(nb::float_(item(t))); })
      // Python's int() of the value: exact for int64, and any size for a
      // float (int(pf.tensor(1e30)), as torch); NaN and inf raise as int() does.
      .def("__int__", [](const Tensor& t) { return nb::int_(item(t)); })
      .def("__hash__", [](const Tensor& t) { return t.id(); })
      .def("__getitem__", &getitem, nb::arg("key").none())
      .def("__add__", &forward<add, "add">, nb::arg("other").none())
      .def("__radd__", &reflected<add, "add">, nb::arg("other").none())
      .def("__sub__", &forward<sub, "sub">, nb::arg("other").none())
      .def("__rsub__", &reflected<sub, "sub">, nb::arg("other").none())
      .def("__mul__", &forward<mul, "mul">, nb::arg("other").none())
      .def("__rmul__", &reflected<mul, "mul">, nb::arg("other").none())
      .def("__truediv__", &forward<div, "div">, nb::arg("other").none())
      .def("__rtruediv__", &reflected<div, "div">, nb::arg("other").none())
      .def("__pow__", &forward<pow, "pow">, nb::arg("other").none())
      .def("__rpow__", &reflected<pow, "pow">, nb::arg("other").none())
      .def("__matmul__", &forward<matmul, "matmul">, nb::arg("other").none())
      .def("__rmatmul__", &reflected<matmul, "matmul">, nb::arg("other").none())
      .def("__eq__", &compare<eq, "eq">)
      .def("__ne__", &compare<ne, "ne">)
      .def("__lt__", &compare<lt, "lt">, nb::arg("other").none())
      .def("__le__", &compare<le, "le">, nb::arg("other").none())
      .def("__gt__", &compare<gt, "gt">, nb::arg("other").none())
      .def("__ge__", &compare<ge, "ge">, nb::arg("other").none())
      .def("__neg__", [](const Tensor& t) { return neg(t); })
      .def("__abs__", [](const Tensor& t) { return abs(t); })
      // Methods bound here rather than as Python wrappers of the module
      // functions (pyflame/_tensor_methods.py): no Python frame per call.
      .def("matmul", &forward<matmul, "matmul">, nb::arg("other").none())
      .def("maximum", &forward<maximum, "maximum">, nb::arg("other").none())
      .def("minimum", &forward<minimum, "minimum">, nb::arg("other").none());
  def_unary_methods<abs, sqrt, exp, log, sin, cos, tanh, relu, sigmoid, silu>(
      cls, {"abs", "sqrt", "exp", "log", "sin", "cos", "tanh", "relu", "sigmoid", "silu"});
  def_autograd_methods(cls);
  def_dlpack_methods(cls);
}

}  // namespace pyflame::py
