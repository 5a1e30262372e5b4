// Automatic fusion: the switch, the plan preview and the counters.
#include "common.h"
#include "pyflame/errors.h"
#include "ir/passes/fuse.h"
#include "pyflame/fusion.h"

namespace pyflame::py {

void init_fusion(nb::module_& m) {
  m.def(
      "set_fusion",
      [](bool enabled, std::optional<bool> gpu) {
        set_fusion(enabled);
        if (gpu) set_fusion_gpu(*gpu);
      },
      nb::arg("enabled"), nb::arg("gpu") = nb::none(),
      "Turns automatic kernel fusion on or off (PYFLAME_FUSION=0 starts with it off). gpu=False "
      "leaves GPU graphs to the prebuilt unfused kernels (PYFLAME_FUSION_GPU=0 starts that way); "
      "gpu=None leaves that switch as it is.");
  m.def("get_fusion", &get_fusion, "True when automatic kernel fusion is on.");
  m.def("get_fusion_gpu", &get_fusion_gpu, "True when GPU regions are fused too (the default).");
  m.def(
      "explain",
      [](nb::args args) {
        std::vector<Tensor> ts;
        for (nb::handle h : args) {
          if (!nb::isinstance<Tensor>(h)) throw ValueError(errmsg("explain", "arguments must be tensors"));
          ts.push_back(nb::cast<Tensor>(h));
        }
        return explain(ts);
      },
      "The plan evaluating these tensors would follow now, as text: fused regions (their ops and "
      "kernel) and single nodes.");
  m.def(
      "can_fuse",
      [](const std::vector<std::string>& ops) -> std::optional<std::string> {
        auto t = can_fuse(ops);
        if (!t) return std::nullopt;
        return std::string(fused_op_name(*t));
      },
      nb::arg("ops"), "The spec's fused pattern (e.g. 'MATMUL_BIAS_RELU') these op names form, or None.");
  m.def("fusion_stats", []() {
    FusionStats s = fusion_stats();
    nb::dict d;
    d["regions"] = s.regions;
    d["fallbacks"] = s.fallbacks;
    d["compiles"] = s.compiles;
    d["disk_hits"] = s.disk_hits;
    d["memory_hits"] = s.memory_hits;
    d["gemm_epilogues"] = s.gemm_epilogues;
    return d;
  }, "Counters: regions run fused, GPU fallbacks to unfused kernels, run-time compiles, kernel cache hits, "
     "GEMMs whose bias or relu ran in the BLAS library's epilogue.");
  m.def("reset_fusion_stats", &reset_fusion_stats);
  m.def(
      "_fused_sources",
      [](const std::vector<Tensor>& outputs, int wave_size) { return fuse::region_sources(outputs, wave_size); },
      nb::arg("outputs"), nb::arg("wave_size") = 32,
      "(kernel name, generated GPU source) of each region evaluating these tensors would form.");
}

}  // namespace pyflame::py
