// Ops whose output shapes depend on their input values: NonZero, Compress, Unique and
// NonMaxSuppression, and TopK with a k known only at run time.
//
// Their shape is known only once they ran, so no device has kernels for them and no plan
// holds them. Shape inference computes them whenever their inputs are constants (folding,
// as for any op); when an input is not, inference stops at the node and the session splits
// its graph there (exec/staged_session.h): the part before runs as a plan, the node is
// evaluated on the host by these functions on the real values, and the part after is
// planned for the shapes they produced. See docs/ARCHITECTURE.md, "Data-dependent shapes".
//
// Each function takes host tensors and returns new ones; errors are INVALID_ARGUMENT
// naming the field (the caller adds the node).
#pragma once

#include <optional>
#include <vector>

#include "ops/op_registry.h"
#include "strider/tensor.h"

namespace strider {

// Whether the node's output shapes depend on input values: one of the ops above, or TopK
// whose k is not a constant (computed by the model, or a graph input not bound as one).
bool has_data_dependent_shape(const Graph& graph, const Node& node);

// NonZero: int64 [rank, count], the indices of the nonzero elements in row-major order.
Tensor nonzero(const Tensor& x);

// Compress: the slices of x along `axis` (flattened x when absent) whose condition entry is
// true; a condition shorter than the axis keeps only its own length.
Result<Tensor> compress(const Tensor& x, const Tensor& condition, std::optional<int64_t> axis);

// Unique: {Y, indices, inverse_indices, counts} of x's elements (flattened when `axis` is
// absent) or of its slices along `axis`, ascending when `sorted` (slices compared
// lexicographically), else in order of first occurrence.
Result<std::vector<Tensor>> unique(const Tensor& x, std::optional<int64_t> axis, bool sorted);

struct NmsParams {
  int64_t max_boxes_per_class = 0;
  float iou_threshold = 0;
  std::optional<float> score_threshold;
  bool center_point_box = false;  // boxes are [x_center, y_center, w, h], else two corners [y1, x1, y2, x2]
};
// NonMaxSuppression: int64 [selected, 3] rows (batch, class, box), per batch and class the
// boxes by descending score (ties: lower index first) that overlap no box kept before by
// more than iou_threshold, at most max_boxes_per_class of them.
Result<Tensor> non_max_suppression(const Tensor& boxes, const Tensor& scores, const NmsParams& params);

// The registry's entries for these ops (op_registry.cc).
void register_data_dependent_ops(std::vector<OpSchema>& ops);

}  // namespace strider
