// DLPack in both directions (the data-apis.org array API protocol).
// Tensor.__dlpack__ / __dlpack_device__ hand out a tensor's buffer without a
// copy; _core._dlpack_import wraps the memory of a capsule as an evaluated
// tensor. nanobind's ndarray makes and reads the capsules (DLPack 1.x
// "dltensor_versioned" and legacy "dltensor"). The consumer side's
// negotiation with a producer (device, stream, older producers) is in
// pyflame/_dlpack.py.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "common.h"
#include "ir/primitives.h"
#include "pyflame/backend/rocm.h"
#include "pyflame/errors.h"
#include "runtime/trace.h"

namespace pyflame::py {

namespace {

namespace dl = nb::dlpack;
constexpr int kDLCPU = 1, kDLCUDAHost = 3, kDLROCMHost = 11;

[[noreturn]] void buffer_error(const char* fn, const std::string& msg) {
  PyErr_SetString(PyExc_BufferError, errmsg(fn, msg).c_str());
  throw nb::python_error();
}

dl::dtype to_dl(Dtype t) {
  switch (t) {
    case Dtype::Bool:
      return {(uint8_t)dl::dtype_code::Bool, 8, 1};
    case Dtype::Int32:
      return nb::dtype<int32_t>();
    case Dtype::Int64:
      return nb::dtype<int64_t>();
    case Dtype::Float16:
      return {(uint8_t)dl::dtype_code::Float, 16, 1};
    case Dtype::BFloat16:
      return {(uint8_t)dl::dtype_code::Bfloat, 16, 1};
    case Dtype::Float32:
      return nb::dtype<float>();
    case Dtype::Float64:
      return nb::dtype<double>();
    case Dtype::Int8:
      return nb::dtype<int8_t>();
    case Dtype::Int16:
      return nb::dtype<int16_t>();
    case Dtype::UInt8:
      return nb::dtype<uint8_t>();
  }
  return {};
}

std::optional<Dtype> from_dl(dl::dtype d) {
  if (d.lanes != 1) return std::nullopt;
  for (int i = 0; i < kNumDtypes; ++i) {
    if (to_dl(Dtype(i)) == d) return Dtype(i);
  }
  return std::nullopt;
}

std::string dl_dtype_name(dl::dtype d) {
  static const char* names[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string s = d.code < 7 ? names[d.code] : "code" + std::to_string(d.code) + "_";
  s += std::to_string(d.bits);
  if (d.lanes != 1) s += "x" + std::to_string(d.lanes);
  return s;
}

// Memory borrowed from another framework: the Buffer holds the imported
// ndarray (and through it the producer's DLManagedTensor, whose deleter runs
// when the last reference goes) and whether the producer marked it read-only.
struct Borrowed {
  nb::ndarray<> array;
  Device device;
  bool read_only;
};

void release_borrowed(void*, void* ctx) {
  auto* b = static_cast<Borrowed*>(ctx);
  if (b->device.is_gpu()) {
    // Our queued kernels may still read it: finish them before the owner
    // can reuse the memory.
    try {
      backend::rocm::synchronize_streams(b->device.index);
    } catch (...) {
    }
  }
  delete b;  // nanobind takes the GIL to run the producer's deleter
}

bool is_read_only(const Tensor& t) {
  const auto& buf = t.buffer();
  return buf && buf->deleter == &release_borrowed && static_cast<Borrowed*>(buf->ctx)->read_only;
}

// A copy into a fresh row-major buffer (contiguous() returns contiguous
// tensors as they are).
Tensor copy_of(const Tensor& t) {
  return Tensor::make(t.shape(), t.dtype(), t.device(), std::make_shared<AsType>(), {t});
}

void evaluate(const Tensor& t) {
  nb::gil_scoped_release release;
  t.eval();
}

int dl_device_type(const Device& d) {
  return d.is_cpu() ? kDLCPU : backend::rocm::dlpack_device_type();
}

nb::tuple dlpack_device(const Tensor& t) {
  return nb::make_tuple(dl_device_type(t.device()), t.device().is_cpu() ? 0 : t.device().index);
}

// Optional bool argument (None, True, False).
std::optional<bool> opt_bool(nb::handle h, const char* name) {
  if (h.is_none()) return std::nullopt;
  if (!PyBool_Check(h.ptr())) {
    throw ValueError(errmsg("__dlpack__", std::string(name) + " must be None, True or False"));
  }
  return h.ptr() == Py_True;
}

std::pair<int64_t, int64_t> int_pair(nb::handle h, const char* name) {
  try {
    return nb::cast<std::pair<int64_t, int64_t>>(h);
  } catch (const nb::cast_error&) {
    throw ValueError(errmsg("__dlpack__", std::string(name) +
                                              " must be None or a pair of ints, got " +
                                              nb::cast<std::string>(nb::repr(h))));
  }
}

bool is_minus_one(nb::handle h) {
  if (!PyLong_Check(h.ptr()) || PyBool_Check(h.ptr())) return false;
  int overflow = 0;
  return PyLong_AsLongLongAndOverflow(h.ptr(), &overflow) == -1 && !overflow;
}

// The consumer's stream for a GPU export, as the protocol defines it: None
// is the default stream (CUDA's legacy stream 1, HIP's null stream 0), -1
// asks for no synchronization.
std::optional<uintptr_t> consumer_stream(nb::handle stream) {
  const char* fn = "__dlpack__";
  const bool amd = backend::rocm::dlpack_device_type() == 10;
  if (stream.is_none()) return amd ? 0 : 1;
  if (is_minus_one(stream)) return std::nullopt;
  uintptr_t s = 0;
  if (PyLong_Check(stream.ptr()) && !PyBool_Check(stream.ptr())) {
    s = static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(stream.ptr()));
  }
  if (PyErr_Occurred() || !PyLong_Check(stream.ptr()) || PyBool_Check(stream.ptr())) {
    PyErr_Clear();
    throw ValueError(errmsg(fn, "stream must be None, -1 or a stream handle (an int), got " +
                                    nb::cast<std::string>(nb::repr(stream))));
  }
  if (!amd && s == 0) {
    throw ValueError(errmsg(fn,
                            "stream 0 is ambiguous on CUDA: pass 1 (legacy default stream), "
                            "2 (per-thread default stream) or a stream handle"));
  }
  if (amd && (s == 1 || s == 2)) {
    throw ValueError(errmsg(fn,
                            "streams 1 and 2 are not valid on ROCm: pass 0 (default stream) "
                            "or a stream handle"));
  }
  return s;
}

// The tensor to export after the consumer's device and copy requests,
// evaluated.
Tensor prepare_export(const Tensor& self, nb::handle dl_device, std::optional<bool> copy,
                      bool versioned) {
  const char* fn = "__dlpack__";
  Tensor t = self;
  bool copied = false;
  if (!dl_device.is_none()) {
    auto [type, id] = int_pair(dl_device, "dl_device");
    auto [own_type, own_id] = nb::cast<std::pair<int64_t, int64_t>>(dlpack_device(t));
    if (type != own_type || id != own_id) {
      if (type != kDLCPU) {
        buffer_error(fn, "cannot export a tensor on " + t.device().str() + " to DLPack device (" +
                             std::to_string(type) + ", " + std::to_string(id) + ")");
      }
      if (copy == false)
        buffer_error(fn, "exporting to the CPU needs a copy, which copy=False forbids");
      t = to_device(t, Device::cpu());  // complete when evaluated: no stream to order
      copied = true;
    }
  }
  if (copy == true && !copied) t = copy_of(t);
  evaluate(t);
  if (!versioned && is_read_only(t)) {
    // A legacy capsule cannot say read-only: hand out a writable copy.
    if (copy == false) {
      buffer_error(fn,
                   "read-only memory needs a versioned capsule (max_version >= (1, 0)) "
                   "or a copy, which copy=False forbids");
    }
    t = copy_of(t);
    evaluate(t);
  }
  return t;
}

// A capsule over t's memory that holds a reference to its buffer.
nb::object make_capsule(const Tensor& t, bool versioned) {
  runtime::trace_host_read("a host view of a tensor (DLPack, NumPy)");
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  auto* keep = new std::shared_ptr<Buffer>(t.buffer());
  nb::capsule owner(keep,
                    [](void* p) noexcept { delete static_cast<std::shared_ptr<Buffer>*>(p); });
  void* data = t.size() ? t.raw_data() : nullptr;
  const int type = dl_device_type(t.device()), id = t.device().is_cpu() ? 0 : t.device().index;
  nb::object array;
  if (is_read_only(t)) {
    array = nb::cast(nb::ndarray<nb::array_api, nb::ro>(
        data, shape.size(), shape.data(), owner, t.strides().data(), to_dl(t.dtype()), type, id));
  } else {
    array = nb::cast(nb::ndarray<nb::array_api>(data, shape.size(), shape.data(), owner,
                                                t.strides().data(), to_dl(t.dtype()), type, id));
  }
  // nanobind's ndarray makes the capsule: versioned for max_version >= (1, 0).
  nb::object mv = versioned ? nb::object(nb::make_tuple(1, 1)) : nb::none();
  return array.attr("__dlpack__")(nb::arg("max_version") = mv);
}

nb::object export_dlpack(const Tensor& self, nb::handle stream, nb::handle max_version,
                         nb::handle dl_device, nb::handle copy_arg) {
  std::optional<bool> copy = opt_bool(copy_arg, "copy");
  const bool versioned = !max_version.is_none() && int_pair(max_version, "max_version").first >= 1;
  if (self.device().is_cpu() && !stream.is_none() && !is_minus_one(stream)) {
    throw ValueError(errmsg("__dlpack__", "a CPU tensor takes stream=None, got " +
                                              nb::cast<std::string>(nb::repr(stream))));
  }
  const auto consumer = self.device().is_gpu() ? consumer_stream(stream) : std::nullopt;
  Tensor t = prepare_export(self, dl_device, copy, versioned);
  if (t.device().is_gpu() && consumer) backend::rocm::make_stream_wait(t.device().index, *consumer);
  return make_capsule(t, versioned);
}

// Copy with dtype conversion through NumPy, as pf.tensor converts (uint16
// to int32, uint32 to int64, ...): CPU memory only.
Tensor import_converted(const nb::ndarray<>& array, const char* fn) {
  nb::object view = nb::cast(nb::ndarray<nb::numpy>(array));
  nb::object arr = nb::module_::import_("pyflame._convert").attr("to_array")(view, fn);
  // to_array may return the same memory (already a supported dtype): copy.
  return from_numpy(arr, fn);
}

Tensor import_dlpack(nb::handle capsule, nb::handle copy_arg) {
  const char* fn = "from_dlpack";
  std::optional<bool> copy;
  if (!copy_arg.is_none()) copy = nb::cast<bool>(copy_arg);
  if (!PyCapsule_CheckExact(capsule.ptr())) {
    throw ValueError(errmsg(
        fn, "expected a DLPack capsule, got " + nb::cast<std::string>(nb::repr(capsule.type()))));
  }
  nb::ndarray<> array;
  bool read_only = false;
  try {
    array = nb::cast<nb::ndarray<>>(capsule);
  } catch (const nb::cast_error&) {
    try {  // read-only memory (a versioned capsule's flag) only converts as such
      array = nb::ndarray<>(nb::cast<nb::ndarray<nb::ro>>(capsule));
      read_only = true;
    } catch (const nb::cast_error&) {
      buffer_error(fn,
                   "not a usable DLPack capsule (already consumed, or more than 128 dimensions)");
    }
  }

  Device device = Device::cpu();
  const int type = array.device_type();
  if (type == kDLCPU || type == kDLCUDAHost || type == kDLROCMHost) {
    device = Device::cpu();
  } else if (type != 0 && type == backend::rocm::dlpack_device_type()) {
    if (array.device_id() < 0 || array.device_id() >= backend::rocm::get_device_count()) {
      buffer_error(fn, "GPU " + std::to_string(array.device_id()) + " is not visible to PyFlame");
    }
    device = Device::rocm(array.device_id());
  } else {
    buffer_error(fn, "cannot use memory of DLPack device type " + std::to_string(type) +
                         " in this build (GPU backend: " + backend::rocm::platform() + ")");
  }

  std::optional<Dtype> dtype = from_dl(array.dtype());
  const size_t item = std::max<size_t>(1, array.itemsize());
  const bool aligned = reinterpret_cast<uintptr_t>(array.data()) % item == 0;
  if (!dtype || !aligned) {
    const std::string what = !dtype
                                 ? "dtype " + dl_dtype_name(array.dtype()) + " needs a conversion"
                                 : "misaligned memory needs a copy";
    static const dl::dtype convertible[] = {
        nb::dtype<double>(),   nb::dtype<int8_t>(),   nb::dtype<int16_t>(), nb::dtype<uint8_t>(),
        nb::dtype<uint16_t>(), nb::dtype<uint32_t>(), nb::dtype<uint64_t>()};
    const bool can_convert = dtype || std::find(std::begin(convertible), std::end(convertible),
                                                array.dtype()) != std::end(convertible);
    if (!can_convert) buffer_error(fn, "unsupported dtype " + dl_dtype_name(array.dtype()));
    if (copy == false) {
      throw ValueError(errmsg(fn, what + ", which copy=False forbids"));
    }
    if (!device.is_cpu()) {
      buffer_error(fn, what +
                           " that PyFlame does only for CPU memory; convert on the producer's "
                           "side (e.g. to float32)");
    }
    return import_converted(array, fn);
  }

  // Layout: the buffer spans the lowest to the highest element addressed
  // (strides may be negative); the tensor's offset locates element 0 in it.
  const int nd = static_cast<int>(array.ndim());
  Shape shape(nd);
  Strides strides(nd);
  int64_t lo = 0, hi = 0, size = 1;
  for (int i = 0; i < nd; ++i) {
    shape[i] = static_cast<int64_t>(array.shape(i));
    strides[i] = array.stride_ptr() ? array.stride(i) : 0;
    size *= shape[i];
  }
  if (!array.stride_ptr()) strides = row_major_strides(shape);
  if (size == 0) {  // nothing to share
    auto n = std::make_shared<Node>();
    n->shape = shape;
    n->strides = row_major_strides(shape);
    n->dtype = *dtype;
    n->device = device;
    n->buffer = std::make_shared<Buffer>(nullptr, 0, device, nullptr);
    return Tensor(std::move(n));
  }
  for (int i = 0; i < nd; ++i) {
    (strides[i] < 0 ? lo : hi) += strides[i] * (shape[i] - 1);
  }
  char* first = static_cast<char*>(array.data());
  char* base = first + lo * static_cast<int64_t>(item);
  const size_t bytes = static_cast<size_t>(hi - lo + 1) * item;

  auto n = std::make_shared<Node>();
  n->shape = std::move(shape);
  n->strides = std::move(strides);
  n->offset = -lo;
  n->dtype = *dtype;
  n->device = device;
  n->buffer = std::make_shared<Buffer>(base, bytes, device, &release_borrowed,
                                       new Borrowed{array, device, read_only});
  Tensor t(std::move(n));
  if (copy == true) {
    // Copied now, so later writes by the producer are not seen.
    t = copy_of(t);
    evaluate(t);
  }
  return t;
}

}  // namespace

nb::object numpy_view(const Tensor& t, nb::handle dtype) {
  const char* fn = "__array__";
  if (!t.device().is_cpu() || t.dtype() == Dtype::BFloat16) {
    throw ValueError(errmsg(fn, "a " + std::string(dtype_name(t.dtype())) + " tensor on " +
                                    t.device().str() + " has no NumPy view: copy=False "
                                    "cannot be honored"));
  }
  nb::module_ np = nb::module_::import_("numpy");
  if (!dtype.is_none() && !np.attr("dtype")(dtype).equal(np.attr("dtype")(dtype_name(t.dtype())))) {
    throw ValueError(errmsg(fn, "converting to " + nb::cast<std::string>(nb::str(dtype)) +
                                    " needs a copy, which copy=False forbids"));
  }
  return np.attr("from_dlpack")(nb::cast(t));
}

void def_dlpack_methods(nb::class_<Tensor>& cls) {
  cls.def("__dlpack__", &export_dlpack, nb::kw_only(), nb::arg("stream").none() = nb::none(),
          nb::arg("max_version").none() = nb::none(), nb::arg("dl_device").none() = nb::none(),
          nb::arg("copy").none() = nb::none(),
          "A DLPack capsule sharing this tensor's memory (the array API protocol). Evaluates "
          "the tensor first. On a GPU, the consumer's `stream` waits for the work that "
          "produces the tensor.");
  cls.def("__dlpack_device__", &dlpack_device,
          "(DLPack device type, device index): (1, 0) on the CPU; (2, N) for an NVIDIA GPU, "
          "(10, N) for an AMD GPU.");
}

void init_dlpack(nb::module_& m) {
  m.def("_dlpack_import", &import_dlpack, nb::arg("capsule"), nb::arg("copy").none() = nb::none());
  m.def("_dlpack_device_type", &backend::rocm::dlpack_device_type);
  m.def("_dlpack_stream", &backend::rocm::stream_handle, nb::arg("device"));
  m.def("_to_host_bits", &to_host_bits, nb::arg("tensor"));
  m.def(
      "_from_host_bits",
      [](nb::handle arr, nb::handle dtype) {
        return from_host_bits(arr, to_dtype(dtype, "load"), "load");
      },
      nb::arg("array"), nb::arg("dtype"));
}

}  // namespace pyflame::py
