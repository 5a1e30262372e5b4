// Device management (spec 002): set_device, device_info, rocm_* functions.
#include <thread>

#include "backend/cpu/vec_math.h"
#include "common.h"
#include "pyflame/errors.h"
#include "pyflame/backend/rocm.h"

namespace pyflame::py {

namespace {
nb::dict info_dict(const backend::rocm::DeviceInfo& i) {
  nb::dict d;
  d["device_id"] = i.device_id;
  d["name"] = i.name;
  d["architecture"] = i.architecture;
  d["platform"] = i.platform;
  d["total_memory"] = i.total_memory;
  d["free_memory"] = i.free_memory;
  d["compute_units"] = i.compute_units;
  d["wave_size"] = i.wave_size;
  return d;
}
}  // namespace

void init_device(nb::module_& m) {
  namespace r = backend::rocm;
  m.def("set_device", [](nb::handle s) {
    OptDevice d = to_opt_device(s, "set_device");
    if (!d) throw ValueError(errmsg("set_device", "device must be a string such as 'cpu' or 'rocm:0', got None"));
    set_default_device(*d);
  }, nb::arg("device").none());
  m.def("get_device", []() { return default_device().str(); });
  m.def("device_info", []() {
    Device d = default_device();
    if (d.is_gpu()) {
      nb::dict info = info_dict(r::get_device_info(d.index));
      info["type"] = "rocm";
      return info;
    }
    nb::dict info;
    info["type"] = "cpu";
    info["name"] = nb::module_::import_("pyflame._convert").attr("cpu_name")();
    info["cores"] = std::thread::hardware_concurrency();
    return info;
  });
  m.def("synchronize", []() {
    nb::gil_scoped_release release;
    if (default_device().is_gpu()) r::synchronize();
  });
  m.def("rocm_is_available", &r::is_available);
  m.def("rocm_device_count", &r::get_device_count);
  m.def("rocm_get_device_info", [](int i) { return info_dict(r::get_device_info(i)); },
        nb::arg("device_id") = 0);
  m.def("rocm_set_device", [](int i) {
    r::set_device(i);
    // Subsequent operations follow when the default device is a GPU.
    if (default_device().is_gpu()) set_default_device(Device::rocm(i));
  }, nb::arg("device_id"));
  m.def("rocm_get_device", &r::get_current_device);
  m.def("rocm_synchronize", []() {
    nb::gil_scoped_release release;
    r::synchronize();
  });
  m.def("gpu_backend_compiled", &r::compiled);
  m.def("gpu_platform", &r::platform);
  // Which vectorized math the CPU kernels run ("avx2" or "sse2"), for tests.
  m.def("_cpu_vec_isa", &cpu::vec_isa);
}

}  // namespace pyflame::py
