// Internal bindings behind pyflame.backend.rocm: memory manager, pinned pool,
// math-mode switches. A build without a GPU raises RuntimeError from each.
#include <algorithm>

#include "common.h"
#include "pyflame/backend/rocm.h"
#include "runtime/allocator.h"

namespace pyflame::py {

void init_backend(nb::module_& m) {
  namespace r = backend::rocm;
  auto dev = [](int d) { return d < 0 ? std::max(0, r::get_current_device()) : d; };
  m.def("_host_memory_stats", []() {
    HostMemoryStats s = host_memory_stats();
    return std::make_pair(s.allocated, s.peak);
  });
  m.def("_host_reset_peak_memory", &reset_host_peak_memory);
  m.def("_host_release_cache", &release_host_cache);
  m.def("_rocm_memory_stats", [dev](int d) {
    r::MemoryStats s = r::memory_stats(dev(d));
    nb::dict out;
    out["total_allocated"] = s.total_allocated;
    out["peak_allocated"] = s.peak_allocated;
    out["total_allocations"] = s.total_allocations;
    out["total_deallocations"] = s.total_deallocations;
    out["cache_hits"] = s.cache_hits;
    out["cache_misses"] = s.cache_misses;
    out["cached_bytes"] = s.cached_bytes;
    return out;
  });
  m.def("_rocm_reset_memory_stats", [dev](int d) { r::reset_memory_stats(dev(d)); });
  m.def("_rocm_clear_memory_pool", [dev](int d) {
    nb::gil_scoped_release release;
    r::clear_memory_pool(dev(d));
  });
  m.def("_rocm_memory_info", [dev](int d) {
    size_t free_b = 0, total_b = 0;
    r::memory_info(dev(d), &free_b, &total_b);
    return std::make_pair(free_b, total_b);
  });
  m.def("_rocm_pinned_warmup", &r::pinned_pool_warmup, nb::call_guard<nb::gil_scoped_release>());
  m.def("_rocm_pinned_clear", &r::pinned_pool_clear, nb::call_guard<nb::gil_scoped_release>());
  m.def("_rocm_pinned_cached_bytes", &r::pinned_pool_cached_bytes);
  m.def("_rocm_warmup_memory_pool", &r::warmup_memory_pool, nb::call_guard<nb::gil_scoped_release>());
  m.def("_rocm_dnn_graph_stats", []() {
    r::DnnGraphStats s = r::dnn_graph_stats();
    nb::dict out;
    out["enabled"] = s.enabled;
    out["plans_built"] = s.plans_built;
    out["plans_failed"] = s.plans_failed;
    out["runs"] = s.runs;
    out["last_failure"] = s.last_failure;
    return out;
  });
  m.def("_rocm_allow_tf32", &r::allow_tf32);
  m.def("_rocm_set_allow_tf32", &r::set_allow_tf32);
  m.def("multi_stream", &r::multi_stream,
        "Whether each evaluation takes its own GPU streams (see set_multi_stream).");
  m.def("set_multi_stream", &r::set_multi_stream, nb::arg("on"),
        "multi_stream option (off by default). Off: evaluations share each device's\n"
        "compute stream, BLAS handle and workspace. On: each evaluation takes a pooled\n"
        "bundle of its own (stream, BLAS/DNN handles, workspace), so evaluations from\n"
        "different threads run concurrently on the GPU. Results are complete when an\n"
        "evaluation returns, in both modes.");
}

}  // namespace pyflame::py
