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

#include <cstdint>

#include "base/host_device.h"
#include "base/wrapping_math.h"
#include "ops/op_registry.h"

namespace strider {

enum class ScatterReduction : int { kNone, kAdd, kMul, kMax, kMin };

struct ScatterParams {
  ScatterReduction reduction = ScatterReduction::kNone;
  int64_t axis = 0;  // ScatterElements only, normalized
};
// ScatterND: indices [..., k] (k <= rank of data) address slices data[i0..ik-1, ...];
// updates have shape indices.shape[:-1] + data.shape[k:]. `reduction` from opset 16
// ("none", "add", "mul"; "max", "min" from 18).
Result<ScatterParams> resolve_scatter_nd(const NodeInputs& node);
// ScatterElements: indices and updates of one shape and data's rank; element p of updates
// goes to p with its `axis` coordinate replaced by indices[p].
Result<ScatterParams> resolve_scatter_elements(const NodeInputs& node);

// GatherND: the first `batch_dims` dims of data and indices are shared; each index tuple
// (indices' last dim, k) addresses a slice of data's dims [batch_dims, batch_dims + k).
struct GatherNDParams {
  int64_t batch_dims = 0;
  int64_t k = 0;  // indices.shape[-1]
};
Result<GatherNDParams> resolve_gather_nd(const NodeInputs& node);
// indices.shape[:-1] + data.shape[batch_dims + k:].
Shape gather_nd_output_shape(const GatherNDParams& p, const Shape& data, const Shape& indices);

// The element a scatter leaves: `old` combined with `update`. T is the compute type (float
// for bf16/f16); integer add and mul wrap (base/wrapping_math.h) like the reference.
template <typename T>
STRIDER_HOST_DEVICE T scatter_combine(ScatterReduction r, T old, T update) {
  switch (r) {
    case ScatterReduction::kAdd: return wrapping_add(old, update);
    case ScatterReduction::kMul: return wrapping_mul(old, update);
    case ScatterReduction::kMax: return update > old ? update : old;
    case ScatterReduction::kMin: return update < old ? update : old;
    default: return update;
  }
}

void register_scatter_ops(std::vector<OpSchema>& ops);

}  // namespace strider
