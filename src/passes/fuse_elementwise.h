// fuse_elementwise: folds groups of elementwise nodes into one FusedElementwise node
// (ops/fused_elementwise.h), so their intermediate values are never written to memory and
// a group costs one pass over its operands instead of one per op.
//
// A group is grown backwards from a sink node: a producer joins when it is a fusable op
// (the fusable rows of ops/elementwise_math.h; float dtypes f32, bf16, f16; Clip only with constant bounds),
// its output has the sink's shape and dtype, is not a graph output, and every reader of it
// is already in the group. So each removed value was read only inside its group, and the
// fused node computes exactly the sink's output from values that exist before the sink:
// it takes the sink's place in the node order. Groups of one node are left alone; a group
// stops growing at kMaxFusedInputs operands or kMaxFusedInstructions ops.
//
// Runs after shape inference and precision lowering, just before planning, and only for a
// device that has a FusedElementwise kernel (the session checks). The planner then sees
// one elementwise node: it may run in place and write into a concat slice like any other.
#pragma once

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

struct FusionStats {
  int groups = 0;  // FusedElementwise nodes made
  int nodes = 0;   // elementwise nodes they replaced
};

Result<FusionStats> fuse_elementwise(Graph& graph);

// Folds a Conv into the elementwise program that alone reads its output (a FusedElementwise
// such as SiLU, or a residual SiLU x + SiLU(conv), or a single fusable op such as Relu or
// Clip), when the program's output has the conv's shape: the pair becomes one FusedConv
// node writing the program's output (inputs X, W, B or absent, then the program's other
// operands), so the convolution's raw result is never stored (oneDNN applies the program
// as post-ops where it can). Run after fuse_elementwise, for devices with a FusedConv
// kernel. Returns how many. With `into_concat` false, a convolution whose program's output
// is a Concat's input stays unfused (Device::fuses_conv_into_concat).
Result<int> fuse_conv_activations(Graph& graph, bool into_concat = true);

// Folds a MatMul into the elementwise program that alone reads its output (its epilogue:
// the bias Add torch exports after every Linear, then GELU, a residual add), when the
// program's output has the MatMul's shape: one FusedMatMul node (ops/fused_elementwise.h)
// whose extra inputs are the program's other operands, so the raw product is never stored
// (oneDNN applies what it can as post-ops). Run after fuse_elementwise, for devices with a
// FusedMatMul kernel. Returns how many.
Result<int> fuse_matmul_epilogues(Graph& graph);

}  // namespace strider
