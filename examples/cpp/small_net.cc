// A small two-layer network trained with plain SGD on the best device: a
// synthetic task (the class of a point is the quadrant it lies in), the
// gradient of the first step checked against finite differences computed by
// the same forward pass, and the accuracy the training reaches.
#include <cmath>
#include <cstdio>
#include <vector>

#include "pyflame/pyflame.h"

namespace pf = pyflame;

namespace {

struct Net {
  pf::Tensor w1, b1, w2, b2;
  std::vector<pf::Tensor*> params() { return {&w1, &b1, &w2, &b2}; }
};

pf::Tensor forward(const Net& net, const pf::Tensor& x) {
  pf::Tensor h = pf::tanh(pf::add(pf::matmul(x, net.w1), net.b1));
  return pf::add(pf::matmul(h, net.w2), net.b2);
}

float item(const pf::Tensor& t) {
  float v = 0;
  t.copy_to_host(&v);
  return v;
}

pf::Tensor param(const pf::Shape& shape, double scale, pf::Device dev) {
  pf::Tensor t = pf::mul(pf::randn(shape, pf::Dtype::Float32, dev), pf::scalar(scale, pf::Dtype::Float32, dev));
  t.eval();
  t = pf::detach(t);
  t.set_requires_grad(true);
  return t;
}

}  // namespace

int main() {
  const pf::Device dev = pf::best_device();
  std::printf("device: %s\n", dev.str().c_str());
  pf::manual_seed(7);

  // Points in [-1, 1)^2 and their quadrant (0..3).
  const int64_t n = 512, hidden = 32, classes = 4;
  pf::Tensor x = pf::sub(pf::mul(pf::rand({n, 2}, pf::Dtype::Float32, dev), pf::scalar(2, pf::Dtype::Float32, dev)),
                         pf::scalar(1, pf::Dtype::Float32, dev));
  pf::Tensor right = pf::astype(pf::gt(pf::select(x, 1, 0), pf::scalar(0, pf::Dtype::Float32, dev)), pf::Dtype::Int64);
  pf::Tensor up = pf::astype(pf::gt(pf::select(x, 1, 1), pf::scalar(0, pf::Dtype::Float32, dev)), pf::Dtype::Int64);
  pf::Tensor y = pf::add(right, pf::mul(up, pf::scalar(2, pf::Dtype::Int64, dev)));
  pf::eval({x, y});

  Net net{param({2, hidden}, 1.0, dev), param({hidden}, 0.1, dev), param({hidden, classes}, 0.3, dev),
          param({classes}, 0.1, dev)};

  // The gradient of one weight against a central difference of the loss.
  pf::Tensor loss = pf::cross_entropy(forward(net, x), y);
  pf::backward(loss);
  std::vector<float> w1(2 * hidden), g1(2 * hidden);
  net.w1.copy_to_host(w1.data());
  net.w1.grad().copy_to_host(g1.data());
  const double eps = 1e-2;
  auto loss_with = [&](float v) {
    pf::NoGradGuard no_grad;
    std::vector<float> w = w1;
    w[5] = v;
    Net probe = net;
    probe.w1 = pf::to_device(pf::Tensor::from_host(w.data(), {2, hidden}, pf::Dtype::Float32), dev);
    return double(item(pf::cross_entropy(forward(probe, x), y)));
  };
  const double fd = (loss_with(w1[5] + eps) - loss_with(w1[5] - eps)) / (2 * eps);
  const double grad_err = std::fabs(fd - g1[5]);
  std::printf("d loss / d w1[0,5]: autograd %.5f, finite difference %.5f\n", g1[5], fd);

  const float first = item(loss);
  const double lr = 0.5;
  float last = first;
  for (int step = 0; step < 300; ++step) {
    if (step > 0) {
      loss = pf::cross_entropy(forward(net, x), y);
      pf::backward(loss);
    }
    pf::NoGradGuard no_grad;
    std::vector<pf::Tensor> updated;
    for (pf::Tensor* p : net.params()) {
      pf::Tensor next = pf::sub(*p, pf::mul(p->grad(), pf::scalar(lr, pf::Dtype::Float32, dev)));
      updated.push_back(next);
    }
    pf::eval(updated);
    int i = 0;
    for (pf::Tensor* p : net.params()) {
      *p = pf::detach(updated[i++]);
      p->set_requires_grad(true);
    }
    if (step % 100 == 99) std::printf("step %d: loss %.4f\n", step + 1, last = item(loss));
  }

  pf::NoGradGuard no_grad;
  // Accuracy: the logit of the true class is the row maximum.
  pf::Tensor logits = forward(net, x);
  pf::Tensor true_logit = pf::squeeze(pf::gather(logits, 1, pf::unsqueeze(y, 1)), pf::Axes{1});
  pf::Tensor hit = pf::astype(pf::ge(true_logit, pf::max(logits, {1})), pf::Dtype::Float32);
  const float accuracy = item(pf::mean(hit));
  std::printf("loss %.4f -> %.4f, training accuracy %.3f\n", first, last, accuracy);

  const bool ok = grad_err < 2e-3 && last < 0.5f * first && accuracy > 0.9f;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
