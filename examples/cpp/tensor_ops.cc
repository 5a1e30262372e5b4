// Tensor ops on the best device (a GPU if this build and machine have one,
// else the CPU), checked against plain loops on the host.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "pyflame/pyflame.h"

namespace pf = pyflame;

int main() {
  const pf::Device dev = pf::best_device();
  std::printf("device: %s\n", dev.str().c_str());

  const int64_t m = 64, k = 48, n = 32;
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal;
  std::vector<float> a(m * k), b(k * n), bias(n);
  for (auto& v : a) v = normal(rng);
  for (auto& v : b) v = normal(rng);
  for (auto& v : bias) v = normal(rng);

  // y = relu(a @ b + bias), then a row softmax and a sum: recorded lazily,
  // evaluated by the host copies below.
  pf::Tensor ta = pf::to_device(pf::Tensor::from_host(a.data(), {m, k}, pf::Dtype::Float32), dev);
  pf::Tensor tb = pf::to_device(pf::Tensor::from_host(b.data(), {k, n}, pf::Dtype::Float32), dev);
  pf::Tensor tbias = pf::to_device(pf::Tensor::from_host(bias.data(), {n}, pf::Dtype::Float32), dev);
  pf::Tensor y = pf::relu(pf::add(pf::matmul(ta, tb), tbias));
  pf::Tensor p = pf::softmax(y, -1);
  pf::Tensor total = pf::sum(y);

  std::vector<float> y_out(m * n), p_out(m * n);
  float total_out = 0;
  y.copy_to_host(y_out.data());
  p.copy_to_host(p_out.data());
  total.copy_to_host(&total_out);

  // Host reference.
  double max_err = 0, max_perr = 0, ref_total = 0;
  for (int64_t i = 0; i < m; ++i) {
    std::vector<double> row(n);
    double row_max = 0, row_sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias[j];
      for (int64_t t = 0; t < k; ++t) acc += double(a[i * k + t]) * b[t * n + j];
      row[j] = acc > 0 ? acc : 0;
      ref_total += row[j];
      max_err = std::fmax(max_err, std::fabs(row[j] - y_out[i * n + j]));
      row_max = std::fmax(row_max, row[j]);
    }
    for (int64_t j = 0; j < n; ++j) row_sum += std::exp(row[j] - row_max);
    for (int64_t j = 0; j < n; ++j)
      max_perr = std::fmax(max_perr, std::fabs(std::exp(row[j] - row_max) / row_sum - p_out[i * n + j]));
  }
  const double total_err = std::fabs(ref_total - total_out) / std::fmax(1.0, std::fabs(ref_total));
  std::printf("relu(a@b+bias) max error %.2e, softmax max error %.2e, sum %.4f (relative error %.2e)\n",
              max_err, max_perr, total_out, total_err);

  // Errors are exceptions whose message names the function.
  bool raised = false;
  try {
    pf::matmul(pf::zeros({2, 3}), pf::zeros({4, 5}));
  } catch (const pf::ValueError& e) {
    raised = true;
    std::printf("expected error: %s\n", e.what());
  }
  const bool ok = max_err < 1e-3 && max_perr < 1e-5 && total_err < 1e-5 && raised;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
