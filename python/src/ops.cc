// Module-level op functions. Arguments may be tensors, Python scalars,
// lists or NumPy arrays; shapes and defaults are normalized in pyflame/ops.py.
#include <nanobind/stl/tuple.h>

#include "common.h"
#include "pyflame/checked.h"
#include "pyflame/errors.h"

namespace pyflame::py {

std::pair<Tensor, Tensor> tensor_pair(nb::handle a, nb::handle b, const char* fn) {
  if (nb::isinstance<Tensor>(a)) {
    Tensor ta = nb::cast<Tensor>(a);
    return {ta, as_tensor(b, &ta, fn)};
  }
  if (nb::isinstance<Tensor>(b)) {
    Tensor tb = nb::cast<Tensor>(b);
    return {as_tensor(a, &tb, fn), tb};
  }
  Tensor ta = as_tensor(a, nullptr, fn);
  return {ta, as_tensor(b, &ta, fn)};
}

namespace {

template <Tensor (*F)(const Tensor&, const Tensor&)>
void def_binary(nb::module_& m, const char* name) {
  m.def(name, [name](nb::handle a, nb::handle b) {
    auto [x, y] = tensor_pair(a, b, name);
    return F(x, y);
  }, nb::arg("a").none(), nb::arg("b").none());
}

// Comparisons with an int beyond the tensor's dtype answer instead of raising.
template <Tensor (*F)(const Tensor&, const Tensor&)>
void def_compare(nb::module_& m, const char* name) {
  m.def(name, [name](nb::handle a, nb::handle b) {
    if (auto r = compare_with_big_int(a, b, name)) return *r;
    auto [x, y] = tensor_pair(a, b, name);
    return F(x, y);
  }, nb::arg("a").none(), nb::arg("b").none());
}

template <Tensor (*F)(const Tensor&)>
void def_unary(nb::module_& m, const char* name) {
  m.def(name, [name](nb::handle x) { return F(as_tensor(x, nullptr, name)); }, nb::arg("x").none());
}

Dtype dtype_or(nb::handle d, Dtype def, const char* fn) {
  auto t = to_opt_dtype(d, fn);
  return t ? *t : def;
}

}  // namespace

void init_ops(nb::module_& m) {
  auto none = nb::none();
  // ---- creation (shape already a list of ints) ----
  // `fn` names the Python function in errors (zeros, ones, full, ...).
  m.def("full", [](const Shape& s, double v, nb::handle dt, nb::handle dev, const std::string& fn) {
    Dtype t = dtype_or(dt, Dtype::Float32, fn.c_str());
    checked_nbytes(s, itemsize(t), fn.c_str());  // errors under the caller's name
    check_value_fits(v, t, fn.c_str());
    return full(s, v, t, to_opt_device(dev, fn.c_str()));
  }, nb::arg("shape"), nb::arg("value"), nb::arg("dtype") = none, nb::arg("device") = none,
     nb::arg("fn") = "full");
  // The size check every op runs, for Python code that computes a shape
  // before building it (host-side index tables).
  m.def("_check_shape", [](const Shape& s, nb::handle dt, const std::string& fn) {
    checked_nbytes(s, itemsize(dtype_or(dt, Dtype::Float32, fn.c_str())), fn.c_str());
  }, nb::arg("shape"), nb::arg("dtype") = none, nb::arg("fn") = "shape");
  m.def("_dtype", [](nb::handle d, const std::string& fn) { return to_dtype(d, fn.c_str()); },
        nb::arg("dtype"), nb::arg("fn") = "dtype");
  m.def("arange", [](double start, double stop, double step, nb::handle dt, nb::handle dev) {
    return arange(start, stop, step, dtype_or(dt, Dtype::Float32, "arange"), to_opt_device(dev, "arange"));
  }, nb::arg("start"), nb::arg("stop"), nb::arg("step"), nb::arg("dtype") = none, nb::arg("device") = none);
  m.def("eye", [](int64_t n, std::optional<int64_t> mm, int64_t k, nb::handle dt, nb::handle dev) {
    if (mm && *mm < 0) throw ValueError(errmsg("eye", "m must be non-negative, got " + std::to_string(*mm)));
    return eye(n, mm.value_or(n), k, dtype_or(dt, Dtype::Float32, "eye"), to_opt_device(dev, "eye"));
  }, nb::arg("n"), nb::arg("m") = none, nb::arg("k") = 0, nb::arg("dtype") = none, nb::arg("device") = none);
  m.def("manual_seed", [](nb::handle seed) {
    // PyTorch's range: [-2**63, 2**64), negative seeds taken modulo 2**64.
    nb::object i = nb::borrow(seed);
    if (!PyBool_Check(seed.ptr()) && PyIndex_Check(seed.ptr())) i = nb::steal(PyNumber_Index(seed.ptr()));
    if (!i.is_valid()) throw nb::python_error();
    if (!PyLong_Check(i.ptr()) || PyBool_Check(seed.ptr())) {
      throw ValueError(errmsg("manual_seed", "seed must be an integer, got " +
                                                 nb::cast<std::string>(nb::str(seed.type().attr("__name__")))));
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow == 0) return manual_seed(static_cast<uint64_t>(v));
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
      if (!PyErr_Occurred()) return manual_seed(u);
      PyErr_Clear();
    }
    throw ValueError(errmsg("manual_seed", "seed " + nb::cast<std::string>(nb::str(i)) +
                                               " is out of the range [-2**63, 2**64)"));
  }, nb::arg("seed").none());
  m.def("get_rng_state", []() {
    RngState s = get_rng_state();
    return nb::make_tuple(s.seed, s.counter);
  }, "The random generator's state, an opaque tuple for set_rng_state.");
  m.def("set_rng_state", [](std::tuple<uint64_t, uint64_t> s) {
    set_rng_state({std::get<0>(s), std::get<1>(s)});
  }, nb::arg("state"), "Restores a state from get_rng_state (the draws that followed repeat).");
  m.def("rand", [](const Shape& s, nb::handle dt, nb::handle dev) {
    return rand(s, dtype_or(dt, Dtype::Float32, "rand"), to_opt_device(dev, "rand"));
  }, nb::arg("shape"), nb::arg("dtype") = none, nb::arg("device") = none);
  m.def("randn", [](const Shape& s, nb::handle dt, nb::handle dev) {
    return randn(s, dtype_or(dt, Dtype::Float32, "randn"), to_opt_device(dev, "randn"));
  }, nb::arg("shape"), nb::arg("dtype") = none, nb::arg("device") = none);
  m.def("randint", [](int64_t lo, int64_t hi, const Shape& s, nb::handle dt, nb::handle dev) {
    return randint(lo, hi, s, dtype_or(dt, Dtype::Int64, "randint"), to_opt_device(dev, "randint"));
  }, nb::arg("low"), nb::arg("high"), nb::arg("shape"), nb::arg("dtype") = none, nb::arg("device") = none);
  m.def("from_numpy", [](nb::handle arr, nb::handle dev) {
    Tensor t = from_numpy(arr, "tensor");
    OptDevice d = to_opt_device(dev, "tensor");
    return to_device(t, d ? *d : default_device());
  }, nb::arg("array"), nb::arg("device") = none);

  // ---- elementwise ----
  def_binary<add>(m, "add");
  def_binary<sub>(m, "sub");
  def_binary<mul>(m, "mul");
  def_binary<div>(m, "div");
  def_binary<pow>(m, "pow");
  def_binary<maximum>(m, "maximum");
  def_binary<minimum>(m, "minimum");
  def_compare<eq>(m, "eq");
  def_compare<ne>(m, "ne");
  def_compare<lt>(m, "lt");
  def_compare<le>(m, "le");
  def_compare<gt>(m, "gt");
  def_compare<ge>(m, "ge");
  def_binary<matmul>(m, "matmul");
  m.def("linear", [](const Tensor& x, const Tensor& w, std::optional<Tensor> b) {
    return linear(x, w, b ? *b : Tensor());
  }, nb::arg("input"), nb::arg("weight"), nb::arg("bias").none());
  def_unary<neg>(m, "neg");
  def_unary<abs>(m, "abs");
  def_unary<sqrt>(m, "sqrt");
  def_unary<exp>(m, "exp");
  def_unary<log>(m, "log");
  def_unary<sin>(m, "sin");
  def_unary<cos>(m, "cos");
  def_unary<tanh>(m, "tanh");
  def_unary<relu>(m, "relu");
  def_unary<sigmoid>(m, "sigmoid");
  def_unary<silu>(m, "silu");
  def_unary<erf>(m, "erf");
  m.def("gelu", [](nb::handle x, const std::string& approximate) {
    if (approximate != "none" && approximate != "tanh") {
      throw ValueError(errmsg("gelu", "approximate must be 'none' or 'tanh', got '" + approximate + "'"));
    }
    return gelu(as_tensor(x, nullptr, "gelu"), approximate == "tanh");
  }, nb::arg("x").none(), nb::arg("approximate") = "none");
  m.def("where", [](nb::handle c, nb::handle a, nb::handle b) {
    Tensor tc = as_tensor(c, nullptr, "where");
    auto [ta, tb] = tensor_pair(a, b, "where");
    return where(tc, ta, tb);
  }, nb::arg("condition").none(), nb::arg("a").none(), nb::arg("b").none());
  m.def("clamp", [](nb::handle x, nb::handle lo, nb::handle hi) {
    Tensor t = as_tensor(x, nullptr, "clamp");
    // A Python int bound is exact: beyond int64 it cannot clamp an integer
    // tensor (PyTorch raises), where as a double it would turn it to float.
    auto bound = [&](nb::handle b) -> std::optional<double> {
      if (b.is_none()) return std::nullopt;
      if (is_integral(t.dtype()) && PyLong_Check(b.ptr()) && int_out_of_range(b, Dtype::Int64) != 0) {
        throw ValueError(errmsg("clamp", "value " + nb::cast<std::string>(nb::str(b)) +
                                             " cannot be converted to int64 without overflow"));
      }
      try {
        return nb::cast<double>(b);
      } catch (const nb::cast_error&) {
        throw ValueError(errmsg("clamp", "min and max must be numbers or None, got " +
                                             nb::cast<std::string>(nb::str(b.type().attr("__name__")))));
      }
    };
    return clamp(t, bound(lo), bound(hi));
  }, nb::arg("x").none(), nb::arg("min").none() = none, nb::arg("max").none() = none);
  m.def("astype", [](nb::handle x, nb::handle dt) {
    return astype(as_tensor(x, nullptr, "astype"), to_dtype(dt, "astype"));
  }, nb::arg("x").none(), nb::arg("dtype"));
  m.def("contiguous", &contiguous);

  // ---- shape ----
  m.def("reshape", [](const Tensor& x, const Shape& s) { return reshape(x, s); });
  m.def("flatten", [](const Tensor& x, nb::handle a, nb::handle b) {
    return flatten(x, to_axis(a, "flatten"), to_axis(b, "flatten"));
  }, nb::arg("x"), nb::arg("start_axis").none() = 0, nb::arg("end_axis").none() = -1);
  m.def("transpose", [](const Tensor& x, nb::handle axes) {
    return transpose(x, axes.is_none() ? std::vector<int>{} : to_axes(axes, "transpose"));
  }, nb::arg("x"), nb::arg("axes") = none);
  m.def("swapaxes", [](const Tensor& x, nb::handle a, nb::handle b) {
    return swapaxes(x, to_axis(a, "swapaxes"), to_axis(b, "swapaxes"));
  }, nb::arg("x"), nb::arg("axis1").none(), nb::arg("axis2").none());
  m.def("squeeze", [](const Tensor& x, nb::handle axis) {
    return axis.is_none() ? squeeze(x) : squeeze(x, to_axes(axis, "squeeze"));
  }, nb::arg("x"), nb::arg("axis") = none);
  m.def("unsqueeze", [](const Tensor& x, nb::handle a) { return unsqueeze(x, to_axis(a, "unsqueeze")); },
        nb::arg("x"), nb::arg("axis").none());
  m.def("broadcast_to", [](const Tensor& x, const Shape& s) { return broadcast_to(x, s); });

  // ---- reductions and softmax ----
#define PF_REDUCE(name)                                                        \
  m.def(#name, [](nb::handle x, nb::handle axis, bool keepdim) {               \
    return name(as_tensor(x, nullptr, #name), to_axes(axis, #name), keepdim); \
  }, nb::arg("x").none(), nb::arg("axis") = none, nb::arg("keepdim") = false);
  PF_REDUCE(sum)
  PF_REDUCE(mean)
  PF_REDUCE(max)
  PF_REDUCE(min)
  PF_REDUCE(prod)
#undef PF_REDUCE
  m.def("softmax", [](nb::handle x, nb::handle axis) {
    return softmax(as_tensor(x, nullptr, "softmax"), to_axis(axis, "softmax"));
  },
        nb::arg("x").none(), nb::arg("axis").none() = -1);
  m.def("log_softmax", [](nb::handle x, nb::handle axis) {
    return log_softmax(as_tensor(x, nullptr, "log_softmax"), to_axis(axis, "log_softmax"));
  }, nb::arg("x").none(), nb::arg("axis").none() = -1);

  m.def("eval", [](const std::vector<Tensor>& ts) {
    nb::gil_scoped_release release;
    eval(ts);
  });
}

}  // namespace pyflame::py
