// fuse_rms_norm: finds the RMSNorm that exporters write out op by op (Llama's and T5's
// `x * rsqrt(mean(x^2) + eps) * weight`, which torch 1.13 exports before opset 23 as
//   Pow(x, 2) | Mul(x, x) -> ReduceMean(trailing axes, keepdims) -> Add(eps) -> Sqrt
//   -> Div(x, s) | Mul(x, Div(1, s)) | Mul(x, Reciprocal(s)) -> [Mul(weight)]
// ) and replaces it with one RMSNormalization node (opset 23) over the same axes, whose
// kernel reads x once per row instead of once per op, with no powf and no [.., 1]
// intermediates. Without the weight Mul, the scale is a constant of ones.
//
// A pattern is folded only when each of its intermediate values is read by the next node
// of the pattern alone (not a graph output), every value has x's dtype (f32, bf16 or f16)
// and x's shape where it is elementwise, and the weight broadcasts over the normalized
// dims alone: then the node computes exactly the pattern's output from values that exist
// before its last node, and takes that node's place. The math is the same up to rounding
// (the kernel accumulates the mean of squares in double; the pattern in x's dtype).
//
// Runs after shape inference, before fuse_elementwise (which would otherwise take Add,
// Sqrt and Div into a program of their own), for devices with an RMSNormalization kernel.
#pragma once

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

// Returns how many patterns became RMSNormalization nodes.
Result<int> fuse_rms_norm(Graph& graph);

}  // namespace strider
