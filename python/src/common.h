// Conversions between Python objects and core values, shared by the binding
// files.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "pyflame/ops.h"

namespace nb = nanobind;

namespace pyflame::py {

// dtype from a pf.Dtype, a string, a NumPy dtype or a Python type.
Dtype to_dtype(nb::handle obj, const char* fn);
std::optional<Dtype> to_opt_dtype(nb::handle obj, const char* fn);
OptDevice to_opt_device(nb::handle obj, const char* fn);

// Any tensor-like object as a tensor. Python scalars take a dtype from
// `like` (weak typing) and its device; arrays and lists go through NumPy.
Tensor as_tensor(nb::handle obj, const Tensor* like, const char* fn);

// For a Python int: +1 above the range of integer dtype t, -1 below, 0 within.
int int_out_of_range(nb::handle obj, Dtype t);
// a <fn> b (fn one of eq ne lt le gt ge) when one side is an integer tensor
// and the other a Python int outside its dtype's range: the exact answer, as
// NumPy 2 gives (every element compares the same way); nullopt otherwise.
std::optional<Tensor> compare_with_big_int(nb::handle a, nb::handle b, const char* fn);
// Two tensor-likes; a scalar adopts the other operand's dtype and device.
std::pair<Tensor, Tensor> tensor_pair(nb::handle a, nb::handle b, const char* fn);

// A C-contiguous NumPy array of a supported dtype -> an evaluated CPU tensor.
Tensor from_numpy(nb::handle array, const char* fn);
nb::object to_numpy(const Tensor& t);
// The raw element bits (bfloat16 as uint16) both ways, for file formats.
nb::object to_host_bits(const Tensor& t);
Tensor from_host_bits(nb::handle array, Dtype dtype, const char* fn);

// One axis: any Python integer; ValueError "[fn] axis ... is out of range"
// beyond int32 (no narrowing cast), "[fn] axis must be an integer" for others.
int to_axis(nb::handle obj, const char* fn);
// A count, size or position: any Python integer within int64, else a
// ValueError naming fn and `what` (not nanobind's overload error).
int64_t to_int64(nb::handle obj, const char* fn, const char* what);
// None, an int or a sequence of ints.
Axes to_axes(nb::handle obj, const char* fn);

void init_tensor(nb::module_& m);
void init_fusion(nb::module_& m);
void init_distributed(nb::module_& m);
void init_autograd(nb::module_& m);
// Tensor.requires_grad, .grad, .backward(), .detach() and friends.
void def_autograd_methods(nb::class_<Tensor>& cls);
// Tensor._replace: rebinds a handle (in-place updates), keeping a grad
// leaf's requires_grad flag and, where it still fits, its gradient.
void replace_keeping_grad_state(Tensor& self, const Tensor& other);
// Compiled functions (pf.compile): the trace bindings, and the note a
// handle rebound by Tensor._replace leaves in this thread's trace.
void init_compile(nb::module_& m);
void note_rebind(nb::handle tensor);
// Tensor.__dlpack__ and __dlpack_device__; the import side's functions.
void def_dlpack_methods(nb::class_<Tensor>& cls);
// A NumPy array sharing t's memory (CPU tensors of NumPy's dtypes), for
// __array__(copy=False); ValueError where only a copy would do.
nb::object numpy_view(const Tensor& t, nb::handle dtype);
void init_dlpack(nb::module_& m);
void init_ops(nb::module_& m);
void init_device(nb::module_& m);
void init_backend(nb::module_& m);
void init_ops_conv(nb::module_& m);
void init_ops_index(nb::module_& m);
void init_ops_llm(nb::module_& m);
void init_ops_linalg(nb::module_& m);
void init_ops_loss(nb::module_& m);
void init_ops_math(nb::module_& m);
void init_ops_norm(nb::module_& m);
void init_ops_scatter(nb::module_& m);
void init_ops_sort(nb::module_& m);

}  // namespace pyflame::py
