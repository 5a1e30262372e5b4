// pyflame.distributed's core (_core._dist): the C++ collectives, out of place;
// python/pyflame/distributed writes results into the caller's tensors.
#include <nanobind/stl/shared_ptr.h>

#include "common.h"
#include "distributed/store.h"
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

using Store = d::detail::TcpStore;

std::string as_bytes(nb::handle v) {
  if (nb::isinstance<nb::bytes>(v)) {
    nb::bytes b = nb::borrow<nb::bytes>(v);
    return std::string(b.c_str(), b.size());
  }
  if (nb::isinstance<nb::str>(v)) return nb::cast<std::string>(v);
  throw ValueError(errmsg("TCPStore", "values are bytes or str"));
}

nb::bytes to_py(const std::string& s) { return nb::bytes(s.data(), s.size()); }

// The rendezvous store (pyflame.distributed.TCPStore wraps it). Every call
// that may wait releases the GIL.
void def_store(nb::module_& dm) {
  nb::class_<Store>(dm, "TCPStore")
      .def("__init__",
           [](Store* s, const std::string& host, int port, bool is_master, double timeout, int rank) {
             nb::gil_scoped_release release;
             new (s) Store(host, port, is_master, timeout, rank, "TCPStore");
           },
           nb::arg("host"), nb::arg("port"), nb::arg("is_master"), nb::arg("timeout"), nb::arg("rank"))
      .def("set", [](Store& s, const std::string& key, nb::handle value) {
        std::string v = as_bytes(value);
        nb::gil_scoped_release release;
        s.set(key, v, "TCPStore.set");
      })
      .def("get", [](Store& s, const std::string& key) {
        std::string v;
        {
          nb::gil_scoped_release release;
          v = s.get(key, "TCPStore.get");
        }
        return to_py(v);
      })
      .def("add", [](Store& s, const std::string& key, int64_t delta) {
        nb::gil_scoped_release release;
        return s.add(key, delta, "TCPStore.add");
      })
      .def("check", [](Store& s, const std::string& key) {
        nb::gil_scoped_release release;
        return s.check(key, "TCPStore.check");
      })
      .def("delete_key", [](Store& s, const std::string& key) {
        nb::gil_scoped_release release;
        return s.remove(key, "TCPStore.delete_key");
      })
      .def("gather", [](Store& s, const std::string& key, int rank, int world, nb::handle part) {
        std::string p = as_bytes(part);
        std::vector<std::string> all;
        {
          nb::gil_scoped_release release;
          all = s.gather(key, rank, world, p, "TCPStore.gather");
        }
        nb::list out;
        for (const auto& x : all) out.append(to_py(x));
        return out;
      })
      .def("close", [](Store& s) {
        nb::gil_scoped_release release;
        s.close();
      })
      .def_prop_ro("address", &Store::address);
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
  nb::class_<d::Work>(dm, "Work", "a collective started with async_op=True")
      .def("is_completed", &d::Work::is_completed, nb::call_guard<nb::gil_scoped_release>())
      .def("wait", &d::Work::wait, nb::call_guard<nb::gil_scoped_release>());
  dm.def("all_reduce_async", [](const Tensor& x, const std::string& op) {
    auto o = to_reduce_op(op, "all_reduce");
    nb::gil_scoped_release release;
    return d::all_reduce_async(x, o);
  });
  dm.def("broadcast_async", &d::broadcast_async, nb::call_guard<nb::gil_scoped_release>());
  dm.def("all_gather", &d::all_gather, nb::call_guard<nb::gil_scoped_release>());
  dm.def("send", &d::send, nb::call_guard<nb::gil_scoped_release>());
  dm.def("recv", &d::recv, nb::call_guard<nb::gil_scoped_release>());
  def_store(dm);
}

}  // namespace pyflame::py
