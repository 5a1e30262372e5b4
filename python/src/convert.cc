#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common.h"
#include "pyflame/errors.h"

namespace pyflame::py {

namespace {
nb::object convert_module() { return nb::module_::import_("pyflame._convert"); }
}  // namespace

Dtype to_dtype(nb::handle obj, const char* fn) {
  if (nb::isinstance<Dtype>(obj)) return nb::cast<Dtype>(obj);
  if (nb::isinstance<nb::str>(obj)) return dtype_from_string(nb::cast<std::string>(obj), fn);
  if (obj.is(reinterpret_cast<PyObject*>(&PyFloat_Type))) return Dtype::Float32;
  if (obj.is(reinterpret_cast<PyObject*>(&PyLong_Type))) return Dtype::Int64;
  if (obj.is(reinterpret_cast<PyObject*>(&PyBool_Type))) return Dtype::Bool;
  // NumPy dtypes and scalar types: by name.
  nb::object name = convert_module().attr("dtype_name")(obj);
  if (name.is_none()) {
    throw ValueError(errmsg(fn, "unsupported dtype " + nb::cast<std::string>(nb::repr(obj))));
  }
  return dtype_from_string(nb::cast<std::string>(name), fn);
}

std::optional<Dtype> to_opt_dtype(nb::handle obj, const char* fn) {
  if (obj.is_none()) return std::nullopt;
  return to_dtype(obj, fn);
}

OptDevice to_opt_device(nb::handle obj, const char* fn) {
  if (obj.is_none()) return std::nullopt;
  if (nb::isinstance<nb::str>(obj)) return Device::parse(nb::cast<std::string>(obj), fn);
  throw ValueError(errmsg(fn, "device must be a string such as 'cpu' or 'rocm:0', got " +
                                  nb::cast<std::string>(nb::repr(obj))));
}

Tensor from_numpy(nb::handle array, const char* fn) {
  // Read-only views (np.frombuffer, memory maps) too: the data is copied.
  using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
  HostArray arr;
  if (!nb::try_cast<HostArray>(array, arr, /*convert=*/false)) {
    throw ValueError(errmsg(fn, "expected a C-contiguous NumPy array, got " +
                                    nb::cast<std::string>(nb::repr(array.type()))));
  }
  auto dt = arr.dtype();
  Dtype t;
  if (dt == nb::dtype<float>()) t = Dtype::Float32;
  else if (dt == nb::dtype<int64_t>()) t = Dtype::Int64;
  else if (dt == nb::dtype<int32_t>()) t = Dtype::Int32;
  else if (dt == nb::dtype<bool>()) t = Dtype::Bool;
  else if (dt == nb::dtype<double>()) t = Dtype::Float64;
  else if (dt == nb::dtype<int8_t>()) t = Dtype::Int8;
  else if (dt == nb::dtype<int16_t>()) t = Dtype::Int16;
  else if (dt == nb::dtype<uint8_t>()) t = Dtype::UInt8;
  else if (dt.code == (uint8_t)nb::dlpack::dtype_code::Float && dt.bits == 16) t = Dtype::Float16;
  else throw ValueError(errmsg(fn, "unsupported array dtype"));
  Shape shape(arr.ndim());
  for (size_t i = 0; i < arr.ndim(); ++i) shape[i] = static_cast<int64_t>(arr.shape(i));
  // A large copy runs without the GIL (arr keeps the array alive), so
  // threads feeding their own evaluations overlap here too.
  if (arr.nbytes() >= (size_t(1) << 16)) {
    nb::gil_scoped_release release;
    return Tensor::from_host(arr.data(), shape, t);
  }
  return Tensor::from_host(arr.data(), shape, t);
}

int int_out_of_range(nb::handle obj, Dtype t) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
  if (overflow != 0 || t == Dtype::Int64 || !is_integral(t) || t == Dtype::Bool) return overflow;
  const IntInfo r = iinfo(t);
  return v > r.max ? 1 : v < r.min ? -1 : 0;
}

std::optional<Tensor> compare_with_big_int(nb::handle a, nb::handle b, const char* fn) {
  const bool tensor_first = nb::isinstance<Tensor>(a);
  nb::handle th = tensor_first ? a : b, ih = tensor_first ? b : a;
  if (!nb::isinstance<Tensor>(th) || !PyLong_Check(ih.ptr()) || PyBool_Check(ih.ptr())) return std::nullopt;
  Tensor x = nb::cast<Tensor>(th);
  Dtype t = promote_with_scalar(x.dtype(), ScalarKind::Int);
  if (!is_integral(t)) return std::nullopt;
  int side = int_out_of_range(ih, t);  // +1: the int exceeds every element
  if (side == 0) return std::nullopt;
  if (!tensor_first) side = -side;     // read as: element <op> int
  const std::string op = fn;
  bool value = op == "ne" || (side > 0 ? op == "lt" || op == "le" : op == "gt" || op == "ge");
  return full(x.shape(), value ? 1.0 : 0.0, Dtype::Bool, x.device());
}

Tensor as_tensor(nb::handle obj, const Tensor* like, const char* fn) {
  if (nb::isinstance<Tensor>(obj)) return nb::cast<Tensor>(obj);
  OptDevice dev = like ? OptDevice(like->device()) : std::nullopt;
  if (PyBool_Check(obj.ptr())) {
    Dtype t = like ? promote_with_scalar(like->dtype(), ScalarKind::Bool) : Dtype::Bool;
    return scalar(obj.ptr() == Py_True ? 1.0 : 0.0, t, dev);
  }
  if (PyLong_Check(obj.ptr())) {
    Dtype t = like ? promote_with_scalar(like->dtype(), ScalarKind::Int) : Dtype::Int64;
    if (is_floating(t)) return scalar(PyLong_AsDouble(obj.ptr()), t, dev);
    if (int_out_of_range(obj, t) != 0) {
      // NumPy 2 raises too (torch wraps int32 silently).
      throw OverflowError(errmsg(fn, "Python integer " + nb::cast<std::string>(nb::str(obj)) +
                                         " out of bounds for " + dtype_name(t)));
    }
    const int64_t v = PyLong_AsLongLong(obj.ptr());
    constexpr int64_t kExact = int64_t{1} << 53;  // beyond: a double would round it
    if (v > kExact || v < -kExact) {
      Tensor h = astype(Tensor::from_host(&v, {}, Dtype::Int64), t);
      return to_device(h, dev ? *dev : default_device());
    }
    return scalar(static_cast<double>(v), t, dev);
  }
  if (PyFloat_Check(obj.ptr())) {
    Dtype t = like ? promote_with_scalar(like->dtype(), ScalarKind::Float) : Dtype::Float32;
    return scalar(nb::cast<double>(obj), t, dev);
  }
  // Lists, tuples, NumPy arrays and NumPy scalars.
  nb::object arr = convert_module().attr("to_array")(obj, fn);
  Tensor t = from_numpy(arr, fn);
  Device d = dev ? *dev : default_device();
  return to_device(t, d);
}

namespace {
// A NumPy array holding a row-major host copy of t's elements, in the NumPy
// dtype of the same width (bfloat16 as its raw uint16 bits).
nb::object host_copy(const Tensor& t) {
  size_t bytes = t.nbytes();
  // malloc, not new[]: an unsatisfiable size must come back as null (and so as
  // OutOfMemoryError) under every allocator, sanitizers' included.
  std::unique_ptr<char, decltype(&std::free)> buf(
      static_cast<char*>(std::malloc(std::max<size_t>(bytes, 1))), &std::free);
  if (!buf) {
    throw OutOfMemoryError(errmsg("allocate", "out of host memory allocating " +
                                                  std::to_string(bytes) + " bytes"));
  }
  {
    nb::gil_scoped_release release;
    t.copy_to_host(buf.get());
  }
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  nb::dlpack::dtype dt;
  switch (t.dtype()) {
    case Dtype::Bool: dt = nb::dtype<bool>(); break;
    case Dtype::Int32: dt = nb::dtype<int32_t>(); break;
    case Dtype::Int64: dt = nb::dtype<int64_t>(); break;
    case Dtype::Float16: dt = {(uint8_t)nb::dlpack::dtype_code::Float, 16, 1}; break;
    case Dtype::BFloat16: dt = nb::dtype<uint16_t>(); break;
    case Dtype::Float32: dt = nb::dtype<float>(); break;
    case Dtype::Float64: dt = nb::dtype<double>(); break;
    case Dtype::Int8: dt = nb::dtype<int8_t>(); break;
    case Dtype::Int16: dt = nb::dtype<int16_t>(); break;
    case Dtype::UInt8: dt = nb::dtype<uint8_t>(); break;
  }
  char* raw = buf.release();
  nb::capsule owner(raw, [](void* p) noexcept { std::free(p); });
  return nb::cast(nb::ndarray<nb::numpy>(raw, shape.size(), shape.data(), owner, nullptr, dt));
}
}  // namespace

nb::object to_numpy(const Tensor& t) {
  // NumPy has no bfloat16: such tensors come back as float32.
  return host_copy(t.dtype() == Dtype::BFloat16 ? astype(t, Dtype::Float32) : t);
}

nb::object to_host_bits(const Tensor& t) { return host_copy(t); }

Tensor from_host_bits(nb::handle array, Dtype dtype, const char* fn) {
  using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
  HostArray arr;
  const bool ok = nb::try_cast<HostArray>(array, arr, /*convert=*/false);
  if (!ok || arr.itemsize() != itemsize(dtype)) {
    throw ValueError(errmsg(fn, std::string("expected a C-contiguous NumPy array of ") +
                                    std::to_string(itemsize(dtype)) + "-byte items for " +
                                    dtype_name(dtype)));
  }
  Shape shape(arr.ndim());
  for (size_t i = 0; i < arr.ndim(); ++i) shape[i] = static_cast<int64_t>(arr.shape(i));
  return Tensor::from_host(arr.data(), shape, dtype);
}

int to_axis(nb::handle obj, const char* fn) {
  // Any integer (NumPy's too), not bool or float: as NumPy's operator.index.
  if (PyBool_Check(obj.ptr()) || !PyIndex_Check(obj.ptr())) {
    throw ValueError(errmsg(fn, "axis must be an integer, got " +
                                    nb::cast<std::string>(nb::str(obj.type().attr("__name__")))));
  }
  nb::object i = nb::steal(PyNumber_Index(obj.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0 || v > INT32_MAX || v < INT32_MIN) {
    // No tensor has that many axes; say so before a narrowing cast could.
    throw ValueError(errmsg(fn, "axis " + nb::cast<std::string>(nb::str(i)) + " is out of range"));
  }
  return static_cast<int>(v);
}

int64_t to_int64(nb::handle obj, const char* fn, const char* what) {
  if (PyBool_Check(obj.ptr()) || !PyIndex_Check(obj.ptr())) {
    throw ValueError(errmsg(fn, std::string(what) + " must be an integer, got " +
                                    nb::cast<std::string>(nb::str(obj.type().attr("__name__")))));
  }
  nb::object i = nb::steal(PyNumber_Index(obj.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0) {
    throw ValueError(errmsg(fn, std::string(what) + " " + nb::cast<std::string>(nb::str(i)) +
                                    " is out of the int64 range"));
  }
  return v;
}

Axes to_axes(nb::handle obj, const char* fn) {
  if (obj.is_none()) return {};
  // An int-like that is not a sequence (a 1-element NumPy array is both).
  if (PyIndex_Check(obj.ptr()) && !PySequence_Check(obj.ptr())) return {to_axis(obj, fn)};
  if (!PySequence_Check(obj.ptr()) || PyUnicode_Check(obj.ptr())) {
    throw ValueError(errmsg(fn, "axis must be None, an integer or a sequence of integers"));
  }
  Axes out;
  for (nb::handle h : nb::iter(obj)) out.push_back(to_axis(h, fn));
  return out;
}

}  // namespace pyflame::py
