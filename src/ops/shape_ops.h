// Parameter resolution shared by shape functions and kernels: each reads a node's
// attributes and constant inputs (switching on the opset where ONNX changed them) and
// returns the normalized parameters, or an error naming the field.
#pragma once

#include <vector>

#include "ops/op_registry.h"

namespace strider {

struct SplitParams {
  int64_t axis = 0;
  std::vector<int64_t> sizes;  // one per output
};
// split attribute (opset < 13), split input (>= 13), num_outputs (>= 18) or equal parts.
Result<SplitParams> resolve_split(const NodeInputs& node);

struct SliceAxis {
  int64_t axis = 0;
  int64_t start = 0;  // first element taken, already clamped
  int64_t step = 1;
  int64_t count = 0;  // elements taken
};
// starts/ends/axes attributes (opset < 10) or inputs with optional steps (>= 10).
Result<std::vector<SliceAxis>> resolve_slice(const NodeInputs& node);

// Reshape's output shape: 0 copies the input dim (unless allowzero), -1 is inferred.
Result<Shape> resolve_reshape(const NodeInputs& node);
// Transpose's permutation (the reverse when `perm` is absent).
Result<std::vector<int64_t>> resolve_transpose(const NodeInputs& node);
// Trilu: keep the upper (j - i >= k) or lower (j - i <= k) triangle of each matrix of the
// last two dims; k is input 1 (a constant scalar, 0 when omitted).
struct TriluParams {
  bool upper = true;
  int64_t k = 0;
};
Result<TriluParams> resolve_trilu(const NodeInputs& node);
inline bool trilu_keeps(const TriluParams& p, int64_t row, int64_t col) {
  // row and col are below 2^52 (checked shapes): col - row cannot overflow, whatever k is.
  return p.upper ? col - row >= p.k : col - row <= p.k;
}
// The bool [rows, cols] mask of the elements Trilu keeps (rows, cols: the last two dims).
Tensor trilu_mask(const TriluParams& p, int64_t rows, int64_t cols);
// That mask's strides as a view over x's sizes (broadcast over the batch dims).
Strides trilu_mask_strides(const Shape& x_sizes);

// ArgMax / ArgMin: the index of the first (or, select_last_index, last) extreme element
// along `axis`; a NaN counts as the extreme (numpy's rule). Output int64.
struct ArgReduceParams {
  int64_t axis = 0;
  bool keepdims = true;
  bool last = false;
  bool max = true;
};
Result<ArgReduceParams> resolve_arg_reduce(const NodeInputs& node);
// (Which element wins: arg_reduce_takes in ops/reduce_math.h, for every device.)

// CumSum and CumProd: running sums (products) along `axis` (input 1, a constant), from the
// end when `reverse`, each excluding its own element when `exclusive` (the first is then 0,
// or 1 for a product).
struct CumSumParams {
  int64_t axis = 0;
  bool exclusive = false, reverse = false;
  bool product = false;  // CumProd
};
Result<CumSumParams> resolve_cumsum(const NodeInputs& node);

// TopK: the k first elements along `axis` in topk_before's order (ops/reduce_math.h), with
// their indices; k is input 1 (a constant, 0 <= k <= the axis's size). `sorted` = 0 allows
// any order; strider's kernels always sort.
struct TopKParams {
  int64_t axis = 0, k = 0;
  bool largest = true;
};
Result<TopKParams> resolve_topk(const NodeInputs& node);

// GatherElements' axis, normalized, with data and indices of one rank and integer indices.
Result<int64_t> resolve_gather_elements_axis(const NodeInputs& node);
Result<Shape> resolve_squeeze(const NodeInputs& node);
Result<Shape> resolve_unsqueeze(const NodeInputs& node);
// Cast's target dtype from the `to` attribute.
Result<DType> cast_target(const NodeInputs& node);
// Constant's value from whichever value* attribute it has.
Result<Tensor> constant_value(const AttributeMap& attributes);
// Number of elements Range produces.
Result<int64_t> range_count(const NodeInputs& node);

// Reduction axes: the `axes` attribute or input (by opset), normalized and sorted.
// Empty `axes` with noop_with_empty_axes set means "no reduction" (`*noop` = true);
// otherwise empty means all axes.
struct ReduceParams {
  std::vector<int64_t> axes;
  bool keepdims = true;
  bool noop = false;
};
Result<ReduceParams> resolve_reduce(const NodeInputs& node);

// The most work strider takes on for one node: 2^42 multiply-adds (or window reads),
// hours of a CPU core. A convolution, matmul or pool past it is RESOURCE_EXHAUSTED at
// session creation: a 200-byte model (weights from a folded ConstantOfShape, a kernel of
// 2^31) must not be able to make strider compute for days.
inline constexpr int64_t kMaxNodeWork = int64_t(1) << 42;
// The product of `factors` (output dims, reduction sizes, ...) against kMaxNodeWork.
Status check_work(const NodeInputs& node, std::span<const int64_t> factors, std::string_view what);

// Sliding-window geometry of Conv and pooling along the spatial dims.
// A convolution's output shape [N, M, spatial...] for X and W (group, kernel_shape, strides,
// pads, dilations, auto_pad from the node's attributes), or an error naming what does not fit.
Result<Shape> conv_output_shape(const NodeInputs& node, const Shape& x, const Shape& w);

struct WindowGeometry {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, output;
};
// `input` and `kernel` are the spatial sizes; pads follow auto_pad or the `pads` attribute.
Result<WindowGeometry> resolve_window(const NodeInputs& node, std::span<const int64_t> input,
                                      std::span<const int64_t> kernel, bool ceil_mode);

}  // namespace strider
