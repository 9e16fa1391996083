// MatMul and Gemm on the GPU through cuBLASLt, over the views as they are: Gemm's
// transposes are permuted views, a column chunk is a leading dimension.
#include <fmt/format.h>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/lt_matmul.h"

namespace strider::cuda {
namespace {

Result<std::unique_ptr<Kernel>> make_matmul(const KernelRequest& r, const CudaContext& context) {
  return make_lt_matmul(align_matmul(r.inputs[0], r.inputs[1], r.outputs[0]), nullptr, 1.0f, context, r.node.name);
}

// Gemm: alpha * A' x B' (+ beta * C). C is fused as cuBLASLt's bias when it is a row added
// with alpha = beta = 1 (torch's Linear); any other C (a scalar, a column, a matrix) is
// broadcast into the output first and accumulated by cuBLASLt with beta.
Result<std::unique_ptr<Kernel>> make_gemm(const KernelRequest& r, const CudaContext& context) {
  STRIDER_ASSIGN_OR_RETURN(GemmViews g, gemm_views(r.node.attributes, r.inputs[0], r.inputs[1], r.outputs[0]));
  const MatMulViews& v = g.views;
  const float alpha = g.alpha, beta = g.beta;
  if (!r.has_input(2) || beta == 0.0f) return make_lt_matmul(v, nullptr, alpha, context, r.node.name);
  TensorView c = r.inputs[2];
  while (c.rank() < 2) c = insert_unit_dim(c, 0);
  // The bias epilogue adds a full row [1, N] (torch's Linear); any other C is copied into
  // the output and accumulated with beta.
  if (alpha == 1.0f && beta == 1.0f && c.sizes[0] == 1 && c.sizes[1] == v.out.sizes[1])
    return make_lt_matmul(v, &c, 1.0f, context, r.node.name);
  return make_lt_matmul(v, nullptr, alpha, context, r.node.name, &c, beta);
}

}  // namespace

void register_matmul_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"MatMul", make_matmul});
  table.push_back({"Gemm", make_gemm});
}

}  // namespace strider::cuda
