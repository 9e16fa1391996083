// ScatterND, ScatterElements and GatherND: their parameters resolved once (for shape
// inference and every device's kernel) and their scalar combine rule, the one place the
// meaning of `reduction` lives.
//
// Both scatters write a copy of `data` with `updates` combined into the addressed
// elements, in the order the updates are listed (ONNX leaves duplicate indices with
// reduction "none" undefined; strider's kernels apply them in order on every device, so the
// last one wins everywhere). Every kernel visits the updates that can collide (the same
// slice element for ScatterND, the same line along the axis for ScatterElements) in that
// order from one thread: deterministic, no atomics.
#pragma once

#include "ops/op_registry.h"
#include "ops/scatter_math.h"

namespace strider {

// ScatterND: indices [..., k] (k <= rank of data) address slices data[i0..ik-1, ...];
// updates have shape indices.shape[:-1] + data.shape[k:]. `reduction` from opset 16
// ("none", "add", "mul"; "max", "min" from 18).
Result<ScatterParams> resolve_scatter_nd(const NodeInputs& node);
// ScatterElements: indices and updates of one shape and data's rank; element p of updates
// goes to p with its `axis` coordinate replaced by indices[p].
Result<ScatterParams> resolve_scatter_elements(const NodeInputs& node);

// GatherND: the first `batch_dims` dims of data and indices are shared; each index tuple
// (indices' last dim, k) addresses a slice of data's dims [batch_dims, batch_dims + k).
Result<GatherNDParams> resolve_gather_nd(const NodeInputs& node);
// indices.shape[:-1] + data.shape[batch_dims + k:].
Shape gather_nd_output_shape(const GatherNDParams& p, const Shape& data, const Shape& indices);

void register_scatter_ops(std::vector<OpSchema>& ops);

}  // namespace strider
