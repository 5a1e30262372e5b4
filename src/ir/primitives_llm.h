// Primitives of the 'llm' family.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_LLM_PRIMITIVES(X) \
  X(Rope)                    \
  X(Attention)               \
  X(FusedGemv)

namespace pyflame {

// Rotary embedding of a row-major x (..., S, D). Inputs: x, and when
// has_positions a float32 positions tensor viewed with x.shape[:-1] (any
// strides); otherwise position = (index along axis -2) + offset.
class Rope : public Primitive {
 public:
  Rope(float th, double off, bool inter, bool has_pos, std::vector<float> f = {})
      : theta(th), offset(off), interleaved(inter), has_positions(has_pos), freqs(std::move(f)) {}
  const char* name() const override { return "rope"; }
  PF_PARAMS(theta, offset, interleaved, has_positions, freqs)
  PF_EVAL_DECLS
  PF_VJP_DECL
  // inv_freq[j] = theta^(-2j/D), evaluated in double and rounded to float,
  // on the host for both backends.
  static float inv_freq(float theta, int64_t j, int64_t D) {
    return static_cast<float>(std::pow(static_cast<double>(theta), -2.0 * double(j) / double(D)));
  }
  // Frequency j of this rope: freqs[j] when given, else inv_freq(theta, j, D).
  float freq(int64_t j, int64_t D) const { return freqs.empty() ? inv_freq(theta, j, D) : freqs[j]; }
  float theta;
  double offset;
  bool interleaved;
  bool has_positions;
  std::vector<float> freqs;
};

// Attention over 4-d q (B, H, Sq, D), k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv),
// any strides, same floating dtype; output (B, H, Sq, Dv) row-major. With
// causal, query i sees keys j <= i + causal_offset (+ the value of a 0-d
// int64 fourth input, when there is one: an offset known at evaluation).
class Attention : public Primitive {
 public:
  Attention(float s, bool c, int64_t off) : scale(s), causal(c), causal_offset(off) {}
  const char* name() const override { return "scaled_dot_product_attention"; }
  PF_PARAMS(scale, causal, causal_offset)
  PF_EVAL_DECLS
  PF_VJP_DECL
  float scale;
  bool causal;
  int64_t causal_offset;
};

// One row times a matrix (a decode step's projection, y = x @ w with x of
// shape (1, K) and w (K, N)) with what surrounds it in a decoder layer
// computed in the same kernel (docs/design/fusion.md, "GEMV prologues and
// epilogues"). Recorded by matmul and add on a GPU, with fusion on and no
// gradient recorded. Inputs, in order:
//   Rms:  h (1, K), g (K) float32: x = rms_norm(h, g, eps);
//   None: x (1, K);
// then w (K, N), then with `add` r (1, N): y = y + r. Every step rounds to
// the dtype as the unfused ops do.
class FusedGemv : public Primitive {
 public:
  enum class Prologue : uint8_t { None, Rms };
  FusedGemv(Prologue p, double e, bool a) : prologue(p), eps(e), add(a) {}
  const char* name() const override { return "fused_gemv"; }
  PF_PARAMS(prologue, eps, add)
  PF_EVAL_DECLS
  // Inputs the prologue reads (w follows them).
  int prologue_inputs() const { return prologue == Prologue::Rms ? 2 : 1; }
  // The same values through the unfused primitives, one kernel each: the
  // CPU's path and the GPU's for layouts the fused kernel does not take.
  void eval_unfused(const std::vector<Tensor>& in, Tensor& out) const;
  Prologue prologue;
  double eps;
  bool add;
};

}  // namespace pyflame
