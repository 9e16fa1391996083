// gemm_as_matmul: a Gemm that is a plain linear layer, Y = A x B (+ C) with alpha = beta = 1
// and A not transposed (torch's nn.Linear exports so, B transposed), is written as
//   MatMul(A, B)            or   MatMul(A, Transpose(B))  for transB = 1
// followed by Add(product, C) where C is given. The Transpose of B is a view (the planner
// gives it B's bytes with swapped strides), so nothing is copied; the Add is an ordinary
// elementwise node, which fuse_elementwise joins to what follows it (BERT's pooler: Tanh)
// and fuse_matmul_epilogues then folds into the product: one kernel where the Gemm and its
// activation were two. The same products and sums in the same order of rounding as a Gemm
// kernel that adds C after the product, so results agree within the product's rounding.
//
// Only a Gemm whose output one elementwise node of its shape alone reads is rewritten: that
// is where the product gains an epilogue. Any other Gemm stays a Gemm, whose kernels add C
// as well as an epilogue would. A Gemm is also left alone where alpha or beta is not 1, A is transposed, an operand is not
// 2-D (C may be any shape Gemm allows: Add broadcasts it the same way), or its dtype is not
// floating. Runs after shape inference (it types the values it writes), before
// fuse_elementwise, and only where the device fuses MatMul epilogues and reads B's
// transposed view as well as a Gemm would (Device::rewrites_linear_gemms: cuda and sim,
// not the CPU, whose Gemm kernels pack constant weights that a view hides).
#pragma once

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

// Returns how many Gemm nodes were rewritten.
Result<int> gemm_as_matmul(Graph& graph);

}  // namespace strider
