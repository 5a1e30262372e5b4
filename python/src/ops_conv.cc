// Bindings of the 'conv' op family (torch.nn.functional signatures) and of
// the DNN tuning cache behind pyflame.backend.tuning.
#include <Python.h>

#include "common.h"
#include "pyflame/backend/tuning.h"
#include "pyflame/errors.h"
#include "pyflame/ops_conv.h"

namespace pyflame::py {

namespace {

int64_t as_index(nb::handle h, const std::string& fn, const char* what) {
  if (PyBool_Check(h.ptr()) || !PyIndex_Check(h.ptr())) {
    throw ValueError(errmsg(fn.c_str(), std::string(what) + " must be an int or a tuple of ints, got " +
                                            nb::cast<std::string>(nb::repr(h))));
  }
  int overflow = 0;
  nb::object idx = nb::steal(PyNumber_Index(h.ptr()));
  if (!idx.is_valid()) throw nb::python_error();
  long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
  if (overflow) throw ValueError(errmsg(fn.c_str(), std::string(what) + " is out of range"));
  return v;
}

// An int, or a tuple / list of ints.
IntList int_list(nb::handle h, const std::string& fn, const char* what) {
  if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) {
    IntList v;
    for (nb::handle e : h) v.push_back(as_index(e, fn, what));
    if (v.empty()) throw ValueError(errmsg(fn.c_str(), std::string(what) + " must not be empty"));
    return v;
  }
  return {as_index(h, fn, what)};
}

// None or an empty sequence: the kernel size.
IntList pool_stride(nb::handle h, const std::string& fn) {
  if (h.is_none()) return {};
  if ((PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) && nb::len(h) == 0) return {};
  return int_list(h, fn, "stride");
}

std::optional<Tensor> opt_tensor(nb::handle h, const Tensor& like, const char* fn) {
  if (h.is_none()) return std::nullopt;
  return as_tensor(h, &like, fn);
}

void def_conv(nb::module_& m, int nsp) {
  const std::string fn = "conv" + std::to_string(nsp) + "d";
  m.def(fn.c_str(), [nsp, fn](nb::handle x, nb::handle weight, nb::handle bias, nb::handle stride,
                              nb::handle padding, nb::handle dilation, int64_t groups) {
    Tensor tx = as_tensor(x, nullptr, fn.c_str());
    Tensor tw = as_tensor(weight, &tx, fn.c_str());
    ConvPadding mode = ConvPadding::Explicit;
    IntList pad{0};
    if (nb::isinstance<nb::str>(padding)) {
      std::string s = nb::cast<std::string>(padding);
      if (s == "valid") mode = ConvPadding::Valid;
      else if (s == "same") mode = ConvPadding::Same;
      else throw ValueError(errmsg(fn.c_str(), "padding must be 'valid', 'same', an int or a tuple of ints, got '" + s + "'"));
    } else {
      pad = int_list(padding, fn, "padding");
    }
    return convolution(tx, tw, opt_tensor(bias, tx, fn.c_str()), nsp, int_list(stride, fn, "stride"), pad,
                       int_list(dilation, fn, "dilation"), groups, mode);
  }, nb::arg("input").none(), nb::arg("weight").none(), nb::arg("bias").none() = nb::none(),
     nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("groups") = 1);
}

void def_conv_transpose(nb::module_& m, int nsp) {
  const std::string fn = "conv_transpose" + std::to_string(nsp) + "d";
  m.def(fn.c_str(), [nsp, fn](nb::handle x, nb::handle weight, nb::handle bias, nb::handle stride,
                              nb::handle padding, nb::handle output_padding, int64_t groups, nb::handle dilation) {
    Tensor tx = as_tensor(x, nullptr, fn.c_str());
    Tensor tw = as_tensor(weight, &tx, fn.c_str());
    return conv_transpose(tx, tw, opt_tensor(bias, tx, fn.c_str()), nsp, int_list(stride, fn, "stride"),
                          int_list(padding, fn, "padding"), int_list(output_padding, fn, "output_padding"), groups,
                          int_list(dilation, fn, "dilation"));
  }, nb::arg("input").none(), nb::arg("weight").none(), nb::arg("bias").none() = nb::none(),
     nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("output_padding") = 0, nb::arg("groups") = 1,
     nb::arg("dilation") = 1);
}

void def_max_pool(nb::module_& m, int nsp) {
  const std::string fn = "max_pool" + std::to_string(nsp) + "d";
  using F = Tensor (*)(const Tensor&, const IntList&, const IntList&, const IntList&, const IntList&, bool);
  F f = nsp == 1 ? &max_pool1d : nsp == 2 ? &max_pool2d : &max_pool3d;
  m.def(fn.c_str(), [f, fn](nb::handle x, nb::handle kernel, nb::handle stride, nb::handle padding,
                            nb::handle dilation, bool ceil_mode, bool return_indices) {
    if (return_indices) throw ValueError(errmsg(fn.c_str(), "return_indices=True is not supported"));
    IntList st = pool_stride(stride, fn);
    return f(as_tensor(x, nullptr, fn.c_str()), int_list(kernel, fn, "kernel_size"), st,
             int_list(padding, fn, "padding"), int_list(dilation, fn, "dilation"), ceil_mode);
  }, nb::arg("input").none(), nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(),
     nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("ceil_mode") = false,
     nb::arg("return_indices") = false);
}

void def_avg_pool(nb::module_& m, int nsp) {
  const std::string fn = "avg_pool" + std::to_string(nsp) + "d";
  m.def(fn.c_str(), [nsp, fn](nb::handle x, nb::handle kernel, nb::handle stride, nb::handle padding,
                              bool ceil_mode, bool count_include_pad, nb::handle divisor_override) {
    IntList st = pool_stride(stride, fn);
    int64_t div = 0;
    if (!divisor_override.is_none()) {
      if (nsp == 1) throw ValueError(errmsg(fn.c_str(), "divisor_override is not an argument of avg_pool1d"));
      div = as_index(divisor_override, fn, "divisor_override");
      if (div == 0) throw ValueError(errmsg(fn.c_str(), "divisor_override must not be zero"));
    }
    Tensor tx = as_tensor(x, nullptr, fn.c_str());
    IntList k = int_list(kernel, fn, "kernel_size"), p = int_list(padding, fn, "padding");
    if (nsp == 1) return avg_pool1d(tx, k, st, p, ceil_mode, count_include_pad);
    if (nsp == 2) return avg_pool2d(tx, k, st, p, ceil_mode, count_include_pad, div);
    return avg_pool3d(tx, k, st, p, ceil_mode, count_include_pad, div);
  }, nb::arg("input").none(), nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(),
     nb::arg("padding") = 0, nb::arg("ceil_mode") = false, nb::arg("count_include_pad") = true,
     nb::arg("divisor_override").none() = nb::none());
}

void def_adaptive(nb::module_& m, int nsp, bool is_max) {
  const std::string fn = std::string(is_max ? "adaptive_max_pool" : "adaptive_avg_pool") + std::to_string(nsp) + "d";
  using F = Tensor (*)(const Tensor&, const std::vector<std::optional<int64_t>>&);
  F f = is_max ? (nsp == 1 ? &adaptive_max_pool1d : nsp == 2 ? &adaptive_max_pool2d : &adaptive_max_pool3d)
               : (nsp == 1 ? &adaptive_avg_pool1d : nsp == 2 ? &adaptive_avg_pool2d : &adaptive_avg_pool3d);
  auto body = [f, fn](nb::handle x, nb::handle output_size, bool return_indices) {
    if (return_indices) throw ValueError(errmsg(fn.c_str(), "return_indices=True is not supported"));
    std::vector<std::optional<int64_t>> size;
    if (PyTuple_Check(output_size.ptr()) || PyList_Check(output_size.ptr())) {
      for (nb::handle e : output_size) {
        if (e.is_none()) size.push_back(std::nullopt);
        else size.push_back(as_index(e, fn, "output_size"));
      }
    } else {
      size.push_back(as_index(output_size, fn, "output_size"));
    }
    return f(as_tensor(x, nullptr, fn.c_str()), size);
  };
  if (is_max) {
    m.def(fn.c_str(), body, nb::arg("input").none(), nb::arg("output_size").none(),
          nb::arg("return_indices") = false);
  } else {
    m.def(fn.c_str(), [body](nb::handle x, nb::handle output_size) { return body(x, output_size, false); },
          nb::arg("input").none(), nb::arg("output_size").none());
  }
}

}  // namespace

void init_ops_conv(nb::module_& m) {
  for (int nsp = 1; nsp <= 3; ++nsp) {
    def_conv(m, nsp);
    def_conv_transpose(m, nsp);
    def_max_pool(m, nsp);
    def_avg_pool(m, nsp);
    def_adaptive(m, nsp, false);
    def_adaptive(m, nsp, true);
  }

  // Training with running statistics rebinds the caller's running_mean and
  // running_var handles to the updated values (as torch updates them in place).
  m.def("batch_norm", [](nb::handle x, nb::handle running_mean, nb::handle running_var, nb::handle weight,
                         nb::handle bias, bool training, nb::handle momentum, double eps) {
    const char* fn = "batch_norm";
    Tensor tx = as_tensor(x, nullptr, fn);
    if (momentum.is_none()) {
      throw ValueError(errmsg(fn, "momentum=None (a cumulative moving average) is not supported; pass a number"));
    }
    double mom = 0.1;
    try {
      mom = nb::cast<double>(momentum);
    } catch (const nb::cast_error&) {
      throw ValueError(errmsg(fn, "momentum must be a number"));
    }
    const bool update = training && !running_mean.is_none();
    if (update) {
      for (nb::handle h : {running_mean, running_var}) {
        if (!h.is_none() && !nb::isinstance<Tensor>(h)) {
          throw ValueError(errmsg(fn, "running_mean and running_var must be pf.Tensor objects to be updated "
                                      "when training=True"));
        }
      }
    }
    BatchNormResult r = batch_norm_update(tx, opt_tensor(running_mean, tx, fn), opt_tensor(running_var, tx, fn),
                                          opt_tensor(weight, tx, fn), opt_tensor(bias, tx, fn), training, mom, eps);
    if (update && r.running_mean.defined() && nb::isinstance<Tensor>(running_mean) &&
        nb::isinstance<Tensor>(running_var)) {
      nb::cast<Tensor&>(running_mean) = r.running_mean;
      nb::cast<Tensor&>(running_var) = r.running_var;
    }
    return r.output;
  }, nb::arg("input").none(), nb::arg("running_mean").none(), nb::arg("running_var").none(),
     nb::arg("weight").none() = nb::none(), nb::arg("bias").none() = nb::none(), nb::arg("training") = false,
     nb::arg("momentum").none() = 0.1, nb::arg("eps") = 1e-5);

  // ---- tuning cache (pyflame.backend.tuning wraps these) ----
  namespace r = backend::rocm;
  m.def("_tuning_enable_exhaustive_search", [](bool on) { r::get_tuning_cache().enable_exhaustive_search(on); });
  m.def("_tuning_exhaustive_search", []() { return r::get_tuning_cache().exhaustive_search(); });
  m.def("_tuning_enable_caching", [](bool on) { r::get_tuning_cache().enable_caching(on); });
  m.def("_tuning_set_cache_file", [](const std::string& path) { r::get_tuning_cache().set_cache_file(path); });
  m.def("_tuning_cache_file", []() { return r::get_tuning_cache().cache_file(); });
  m.def("_tuning_clear", []() { r::get_tuning_cache().clear(); });
  m.def("_tuning_stats", []() {
    r::MIOpenTuningCache::Stats s = r::get_tuning_cache().get_stats();
    nb::dict out;
    out["hits"] = s.hits;
    out["misses"] = s.misses;
    out["entries"] = s.entries;
    return out;
  });
  m.def("_tuning_entries", []() {
    nb::list out;
    for (const auto& [key, e] : r::get_tuning_cache().entries()) {
      out.append(nb::make_tuple(key, e.algo, e.workspace, e.math, e.exhaustive));
    }
    return out;
  });
  // Direct access for tests and tools: what the DNN wrapper does per problem.
  m.def("_tuning_lookup", [](const std::string& key) -> nb::object {
    auto e = r::get_tuning_cache().lookup(key);
    if (!e) return nb::none();
    return nb::make_tuple(e->algo, e->workspace, e->math, e->exhaustive);
  });
  m.def("_tuning_insert", [](const std::string& key, uint64_t algo, uint64_t workspace, int32_t math,
                             bool exhaustive) {
    if (key.empty() || key.find_first_of("\t\n") != std::string::npos) {
      throw ValueError(errmsg("tuning_cache", "a key must be non-empty and hold no tabs or newlines"));
    }
    r::get_tuning_cache().insert(key, {algo, workspace, math, exhaustive});
  }, nb::arg("key"), nb::arg("algo"), nb::arg("workspace") = 0, nb::arg("math") = 0, nb::arg("exhaustive") = true);
}

}  // namespace pyflame::py
