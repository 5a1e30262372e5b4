// pyflame.distributed's core (_core._dist): the C++ collectives, out of place;
// python/pyflame/distributed writes results into the caller's tensors.
#include "common.h"
#include "pyflame/distributed.h"
#include "pyflame/errors.h"

namespace pyflame::py {

namespace d = pyflame::distributed;

namespace {
d::ReduceOp to_reduce_op(const std::string& name, const char* fn) {
  if (name == "sum") return d::ReduceOp::Sum;
  if (name == "avg") return d::ReduceOp::Avg;
  if (name == "max") return d::ReduceOp::Max;
  if (name == "min") return d::ReduceOp::Min;
  throw ValueError(errmsg(fn, "unknown op '" + name + "' (expected sum, avg, max or min)"));
}
}  // namespace

void init_distributed(nb::module_& m) {
  auto dm = m.def_submodule("_dist", "process groups and collectives (see pyflame.distributed)");
  dm.def("init_process_group",
         [](const std::string& backend, double timeout, int rank, int world_size) {
           nb::gil_scoped_release release;
           d::init_process_group({backend, timeout, rank, world_size});
         },
         nb::arg("backend"), nb::arg("timeout"), nb::arg("rank"), nb::arg("world_size"));
  dm.def("is_initialized", &d::is_initialized);
  dm.def("destroy_process_group", &d::destroy_process_group);
  dm.def("get_backend", &d::get_backend);
  dm.def("get_rank", &d::get_rank);
  dm.def("get_world_size", &d::get_world_size);
  dm.def("mpi_available", &d::mpi_available);
  dm.def("gpu_collectives_available", &d::gpu_collectives_available);
  dm.def("barrier", &d::barrier, nb::call_guard<nb::gil_scoped_release>());
  dm.def("all_reduce", [](const Tensor& x, const std::string& op) {
    auto o = to_reduce_op(op, "all_reduce");
    nb::gil_scoped_release release;
    return d::all_reduce(x, o);
  });
  dm.def("reduce_scatter", [](const Tensor& x, const std::string& op) {
    auto o = to_reduce_op(op, "reduce_scatter");
    nb::gil_scoped_release release;
    return d::reduce_scatter(x, o);
  });
  dm.def("broadcast", &d::broadcast, nb::call_guard<nb::gil_scoped_release>());
  dm.def("all_gather", &d::all_gather, nb::call_guard<nb::gil_scoped_release>());
  dm.def("send", &d::send, nb::call_guard<nb::gil_scoped_release>());
  dm.def("recv", &d::recv, nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace pyflame::py
