#include "runtime/settings.h"

#include <cstdlib>

namespace pyflame::settings {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// "1" turns an off-by-default switch on; "0" turns an on-by-default one off.
bool flag(const char* name, bool dflt) {
  const char* v = env(name);
  if (!v) return dflt;
  return dflt ? std::string(v) != "0" : std::string(v) == "1";
}

}  // namespace

bool allow_tf32() {
  static const bool on = flag("PYFLAME_ALLOW_TF32", false);
  return on;
}

bool gpu_poison() {
  static const bool on = flag("PYFLAME_GPU_POISON", false);
  return on;
}

bool fusion() {
  static const bool on = flag("PYFLAME_FUSION", true);
  return on;
}

bool fusion_gpu() {
  static const bool on = flag("PYFLAME_FUSION_GPU", true);
  return on;
}

bool cpu_baseline_isa() {
  static const bool on = [] {
    const char* v = env("PYFLAME_CPU_ISA");
    return v && std::string(v) == "sse2";
  }();
  return on;
}

int cpu_threads() {
  static const int n = [] {
    for (const char* name : {"PYFLAME_NUM_THREADS", "OMP_NUM_THREADS"}) {
      const char* v = std::getenv(name);
      const int k = v ? std::atoi(v) : 0;  // OMP_NUM_THREADS may list levels: "4,2" gives 4
      if (k > 0) return k;
    }
    return 0;
  }();
  return n;
}

ConvLayout conv_layout() {
  static const ConvLayout layout = [] {
    const char* v = env("PYFLAME_CONV_LAYOUT");
    if (v && std::string(v) == "nchw") return ConvLayout::Nchw;
    if (v && std::string(v) == "nhwc") return ConvLayout::Nhwc;
    return ConvLayout::Auto;
  }();
  return layout;
}

bool graph_replay() {
  static const bool on = flag("PYFLAME_GRAPH_REPLAY", true);
  return on;
}

bool cudnn_graph() {
  static const bool on = flag("PYFLAME_CUDNN_GRAPH", true);
  return on;
}

const std::string& cache_dir() {
  static const std::string dir = [] {
    if (const char* d = env("PYFLAME_CACHE_DIR")) return std::string(d);
    if (const char* x = env("XDG_CACHE_HOME")) return std::string(x) + "/pyflame";
    if (const char* h = env("HOME")) return std::string(h) + "/.cache/pyflame";
    return std::string();
  }();
  return dir;
}

}  // namespace pyflame::settings
