// Primitives of the 'linalg' family: LAPACK decompositions of row-major
// stacks of matrices. One primitive computes one output of a decomposition
// (`output` picks it: Q or R, values or vectors, U, S or Vh); a node per
// output keeps the one-output node contract, at the cost of recomputing the
// decomposition for each output a program uses.
#pragma once
#include <cstdint>

#include "ir/primitive.h"

#define PF_LINALG_PRIMITIVES(X) X(Lapack)

namespace pyflame {

enum class LapackOp : uint8_t { Cholesky, Inv, Det, Slogdet, Solve, Qr, Eigh, Svd };

class Lapack : public Primitive {
 public:
  Lapack(LapackOp o, int out_index, bool f) : op(o), output(out_index), flag(f) {}
  const char* name() const override;
  PF_PARAMS(op, output, flag)
  PF_EVAL_DECLS
  // inv, det, slogdet, solve, cholesky and eigh; qr and svd raise "not differentiable".
  PF_VJP_DECL
  LapackOp op;
  int output;  // which output of the decomposition this node holds
  bool flag;   // cholesky: upper; qr: complete; svd: full_matrices (-1 outputs: values only)
};

}  // namespace pyflame
