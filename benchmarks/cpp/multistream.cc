// The multi_stream workload of BENCHMARKS.md driven from C++ threads, the
// way lc0 drives its backend: each of `threads` threads uploads a batch,
// runs `layers` fp16 layers relu(x @ W) of width `width` and downloads the
// result, `evals` times. Three modes: multi_stream off, on, and on with each
// thread calling its own compiled function (pyflame::compile; a GPU graph
// replay on the thread's stream bundle). Prints evaluations per second and
// the ratios to "off".
//
//   pyflame_bench_multistream [device=rocm:0] [threads=8] [layers=8] [width=1024] [evals=200]
//                             [mode=all|off|on|compiled] [phases=0|1]
//
// phases=1 evaluates the upload, the layers and the download separately and
// prints the mean time per evaluation of each phase (summed over threads, so
// a phase that waits for the GPU shows its wait): where a thread's time goes.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "pyflame/backend/rocm.h"
#include "pyflame/compile.h"
#include "pyflame/ops.h"

using namespace pyflame;

namespace {

struct Setup {
  Device device = Device::cpu();
  int threads = 8, layers = 8, width = 1024, evals = 200;
  std::string mode = "all";
  std::vector<int> batches{16, 32, 64, 128, 256};
  bool phases = false;
};

using Clock = std::chrono::steady_clock;

// Nanoseconds per phase, summed over a run's threads.
struct Phases {
  std::atomic<int64_t> ns[4] = {};
  static constexpr const char* names[4] = {"upload", "record", "evaluate", "download"};
};

Tensor upload(const std::vector<uint16_t>& host, int64_t batch, const Setup& s) {
  Tensor h = Tensor::from_host(host.data(), {batch, s.width}, Dtype::Float16);
  return s.device.is_cpu() ? h : to_device(h, s.device);
}

std::vector<Tensor> layers(const std::vector<Tensor>& ws, const Tensor& x) {
  Tensor h = x;
  for (const Tensor& w : ws) h = relu(matmul(h, w));
  return {h};
}

// Evaluations per second with every thread running `evals` evaluations.
double run(const Setup& s, const std::vector<Tensor>& ws, bool compiled) {
  Phases phases;
  std::vector<std::vector<uint16_t>> inputs;
  for (int b : s.batches) inputs.emplace_back(static_cast<size_t>(b) * s.width, 0x3c00);  // 1.0
  auto worker = [&](int t) {
    CompiledFunction fn = compile([&](const std::vector<Tensor>& in) { return layers(ws, in[0]); });
    std::vector<uint16_t> out(static_cast<size_t>(s.batches.back()) * s.width);
    for (int j = 0; j < s.evals; ++j) {
      const size_t k = (t + j) % s.batches.size();
      if (!s.phases) {
        Tensor x = upload(inputs[k], s.batches[k], s);
        Tensor y = compiled ? fn({x})[0] : layers(ws, x)[0];
        y.copy_to_host(out.data());
        continue;
      }
      auto mark = Clock::now();
      auto lap = [&](int phase) {
        const auto now = Clock::now();
        phases.ns[phase] += std::chrono::duration_cast<std::chrono::nanoseconds>(now - mark).count();
        mark = now;
      };
      Tensor x = upload(inputs[k], s.batches[k], s);
      x.eval();
      lap(0);
      Tensor y = compiled ? fn({x})[0] : layers(ws, x)[0];
      lap(1);
      y.eval();
      lap(2);
      y.copy_to_host(out.data());
      lap(3);
    }
  };
  worker(0);  // warm-up: kernels, handles, caches
  for (auto& n : phases.ns) n = 0;
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < s.threads; ++t) ts.emplace_back(worker, t);
  for (auto& t : ts) t.join();
  const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  if (s.phases) {
    std::printf("    per evaluation and thread:");
    for (int i = 0; i < 4; ++i) {
      std::printf(" %s %.1f us", Phases::names[i], 1e-3 * double(phases.ns[i]) / (s.threads * s.evals));
    }
    std::printf("\n");
  }
  return s.threads * s.evals / sec;
}

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  s.device = backend::rocm::is_available() ? Device::rocm(0) : Device::cpu();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    const std::string k = a.substr(0, eq), v = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (k == "device") s.device = Device::parse(v, "multistream");
    else if (k == "threads") s.threads = std::atoi(v.c_str());
    else if (k == "layers") s.layers = std::atoi(v.c_str());
    else if (k == "width") s.width = std::atoi(v.c_str());
    else if (k == "evals") s.evals = std::atoi(v.c_str());
    else if (k == "phases") s.phases = v == "1";
    else if (k == "mode" && (v == "all" || v == "off" || v == "on" || v == "compiled")) s.mode = v;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<Tensor> ws;
  for (int i = 0; i < s.layers; ++i) {
    ws.push_back(astype(mul(randn({s.width, s.width}, Dtype::Float32, s.device),
                            full({}, 1.0 / std::sqrt(double(s.width)), Dtype::Float32, s.device)),
                        Dtype::Float16));
  }
  eval(ws);
  std::printf("multistream: %s, %d threads, %d x %d fp16 layers, %d evaluations per thread\n",
              s.device.str().c_str(), s.threads, s.layers, s.width, s.evals);
  if (s.mode != "all") {  // one mode alone, e.g. to profile it
    backend::rocm::set_multi_stream(s.mode != "off");
    std::printf("  %-14s %9.0f eval/s\n", s.mode.c_str(), run(s, ws, s.mode == "compiled"));
    backend::rocm::set_multi_stream(false);
    return 0;
  }
  backend::rocm::set_multi_stream(false);
  const double off = run(s, ws, false);
  backend::rocm::set_multi_stream(true);
  const double on = run(s, ws, false);
  const double comp = run(s, ws, true);
  backend::rocm::set_multi_stream(false);
  std::printf("  off            %9.0f eval/s\n", off);
  std::printf("  on             %9.0f eval/s  %.2fx off\n", on, on / off);
  std::printf("  on, compiled   %9.0f eval/s  %.2fx off\n", comp, comp / off);
  return 0;
}
