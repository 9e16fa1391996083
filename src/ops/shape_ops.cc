#include "ops/shape_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "base/checked_math.h"
#include "base/onnx_types.h"

namespace strider {
namespace {

Result<std::vector<int64_t>> normalized_axes(const NodeInputs& node, std::vector<int64_t> axes,
                                             int64_t rank) {
  std::set<int64_t> seen;
  for (int64_t& a : axes) {
    int64_t original = a;
    if (!normalize_axis(a, rank, &a))
      return node.error("axis {} out of range for rank {}", original, rank);
    if (!seen.insert(a).second) return node.error("axis {} repeated", original);
  }
  return axes;
}

}  // namespace

Result<SplitParams> resolve_split(const NodeInputs& node) {
  SplitParams p;
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, node.attributes().get_int("axis", 0));
  int64_t rank = node.input_rank(0);
  if (!normalize_axis(axis, rank, &p.axis))
    return node.error("axis {} out of range for rank {}", axis, rank);
  int64_t dim = node.input_shape(0)[size_t(p.axis)];
  int64_t outputs = int64_t(node.num_outputs());
  if (node.opset() < 13 && node.attributes().has("split")) {
    STRIDER_ASSIGN_OR_RETURN(p.sizes, node.attributes().get_ints("split", {}));
  } else if (node.opset() >= 13 && node.has_input(1)) {
    STRIDER_ASSIGN_OR_RETURN(p.sizes, node.constant_ints(1, "split sizes"));
  } else {
    STRIDER_ASSIGN_OR_RETURN(int64_t parts, node.attributes().get_int("num_outputs", 0));
    if (parts != 0 && parts != outputs)
      return node.error("num_outputs is {} but the node has {} outputs", parts, outputs);
    if (outputs <= 0) return node.error("needs at least one output");
    // Opset 18's rule: chunks of ceil(dim / n), the last one smaller; before 18 the
    // dimension had to divide evenly.
    int64_t chunk = node.opset() >= 18 ? (dim + outputs - 1) / outputs : dim / outputs;
    if (node.opset() < 18 && dim % outputs != 0)
      return node.error("axis {} of size {} does not split evenly into {} outputs", p.axis, dim,
                        outputs);
    for (int64_t i = 0, left = dim; i < outputs; ++i, left -= chunk)
      p.sizes.push_back(std::clamp<int64_t>(left, 0, chunk));
  }
  if (int64_t(p.sizes.size()) != outputs)
    return node.error("{} split sizes for {} outputs", p.sizes.size(), outputs);
  int64_t total = 0;
  for (int64_t s : p.sizes) {
    if (s < 0) return node.error("negative split size {}", s);
    total += s;
  }
  if (total != dim)
    return node.error("split sizes {} add up to {}, but axis {} has size {}",
                      shape_to_string(p.sizes), total, p.axis, dim);
  return p;
}

Result<std::vector<SliceAxis>> resolve_slice(const NodeInputs& node) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (node.opset() < 10) {
    STRIDER_ASSIGN_OR_RETURN(starts, node.attributes().require_ints("starts"));
    STRIDER_ASSIGN_OR_RETURN(ends, node.attributes().require_ints("ends"));
    STRIDER_ASSIGN_OR_RETURN(axes, node.attributes().get_ints("axes", {}));
  } else {
    STRIDER_ASSIGN_OR_RETURN(starts, node.constant_ints(1, "starts"));
    STRIDER_ASSIGN_OR_RETURN(ends, node.constant_ints(2, "ends"));
    if (node.has_input(3)) {
      STRIDER_ASSIGN_OR_RETURN(axes, node.constant_ints(3, "axes"));
    }
    if (node.has_input(4)) {
      STRIDER_ASSIGN_OR_RETURN(steps, node.constant_ints(4, "steps"));
    }
  }
  int64_t rank = node.input_rank(0);
  if (axes.empty())
    for (int64_t i = 0; i < int64_t(starts.size()); ++i) axes.push_back(i);
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return node.error("starts, ends, axes and steps have different lengths");
  STRIDER_ASSIGN_OR_RETURN(axes, normalized_axes(node, axes, rank));
  std::vector<SliceAxis> result;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t dim = node.input_shape(0)[size_t(axes[i])];
    int64_t step = steps[i];
    if (step == 0) return node.error("step 0 on axis {}", axes[i]);
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    // (end - start - 1) / step + 1 rather than the usual rounding-up form, which
    // overflows for steps near INT64_MAX; |INT64_MIN| is taken as INT64_MAX (the distance
    // is below 2^53, so the quotient is the same).
    int64_t count = 0;
    if (step > 0 && end > start) count = (end - start - 1) / step + 1;
    if (step < 0 && start > end)
      count = (start - end - 1) / (step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step) + 1;
    result.push_back({axes[i], count == 0 ? 0 : start, step, count});
  }
  return result;
}

Result<Shape> resolve_reshape(const NodeInputs& node) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> target, node.constant_ints(1, "shape"));
  STRIDER_ASSIGN_OR_RETURN(int64_t allowzero, node.attributes().get_int("allowzero", 0));
  const Shape& in = node.input_shape(0);
  int64_t infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowzero) {
      if (i >= in.size()) return node.error("shape {} copies dim {} of a rank-{} input",
                                            shape_to_string(target), i, in.size());
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (infer_at >= 0) return node.error("shape {} has two -1 dims", shape_to_string(target));
      infer_at = int64_t(i);
    } else if (target[i] < 0) {
      return node.error("shape {} has a negative dim", shape_to_string(target));
    } else {
      auto product = checked_mul(known, target[i]);
      if (!product || *product > kMaxTensorBytes) return node.error("shape {} is too large", shape_to_string(target));
      known = *product;
    }
  }
  int64_t total = num_elements(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      return node.error("cannot reshape {} into {}", shape_to_string(in), shape_to_string(target));
    target[size_t(infer_at)] = total / known;
  } else if (known != total) {
    return node.error("cannot reshape {} ({} elements) into {} ({} elements)",
                      shape_to_string(in), total, shape_to_string(target), known);
  }
  return Shape(target);
}

Result<ArgReduceParams> resolve_arg_reduce(const NodeInputs& node) {
  ArgReduceParams p;
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, node.attributes().get_int("axis", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t keepdims, node.attributes().get_int("keepdims", 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t last, node.attributes().get_int("select_last_index", 0));
  const int64_t rank = node.input_rank(0);
  if (!normalize_axis(axis, rank, &p.axis)) return node.error("axis {} out of range for rank {}", axis, rank);
  if (node.input_shape(0)[size_t(p.axis)] == 0) return node.error("axis {} is empty: no element to pick", p.axis);
  p.keepdims = keepdims != 0;
  p.last = last != 0;
  p.max = node.node().op_type == "ArgMax";
  return p;
}

Result<TopKParams> resolve_topk(const NodeInputs& node) {
  TopKParams p;
  const int64_t rank = node.input_rank(0);
  int64_t axis = -1, largest = 1;
  if (node.opset() < 10) {
    STRIDER_ASSIGN_OR_RETURN(p.k, node.attributes().require_int("k"));
  } else {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> k, node.constant_ints(1, "K"));
    if (k.size() != 1) return node.error("K must be one integer, got {} values", k.size());
    p.k = k[0];
  }
  STRIDER_ASSIGN_OR_RETURN(axis, node.attributes().get_int("axis", -1));
  if (node.opset() >= 11) {
    STRIDER_ASSIGN_OR_RETURN(largest, node.attributes().get_int("largest", 1));
  }
  if (!normalize_axis(axis, rank, &p.axis)) return node.error("axis {} out of range for rank {}", axis, rank);
  if (p.k < 0 || p.k > node.input_shape(0)[size_t(p.axis)])
    return node.error("K {} is not in [0, {}] (the axis's size)", p.k, node.input_shape(0)[size_t(p.axis)]);
  if (node.input_dtype(0) == DType::kBool) return node.error("input is bool, expected a numeric type");
  p.largest = largest != 0;
  return p;
}

Result<CumSumParams> resolve_cumsum(const NodeInputs& node) {
  CumSumParams p;
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axis, node.constant_ints(1, "axis"));
  if (axis.size() != 1) return node.error("axis must be one integer, got {} values", axis.size());
  const int64_t rank = node.input_rank(0);
  if (!normalize_axis(axis[0], rank, &p.axis)) return node.error("axis {} out of range for rank {}", axis[0], rank);
  STRIDER_ASSIGN_OR_RETURN(int64_t exclusive, node.attributes().get_int("exclusive", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t reverse, node.attributes().get_int("reverse", 0));
  p.exclusive = exclusive != 0;
  p.reverse = reverse != 0;
  p.product = node.node().op_type == "CumProd";
  return p;
}

Result<TriluParams> resolve_trilu(const NodeInputs& node) {
  TriluParams p;
  STRIDER_ASSIGN_OR_RETURN(int64_t upper, node.attributes().get_int("upper", 1));
  p.upper = upper != 0;
  if (node.input_rank(0) < 2) return node.error("input must have rank 2 or more, not {}", node.input_rank(0));
  if (node.has_input(1)) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> k, node.constant_ints(1, "k"));
    if (k.size() != 1) return node.error("k must be one integer, got {} values", k.size());
    p.k = k[0];
  }
  return p;
}

Tensor trilu_mask(const TriluParams& p, int64_t rows, int64_t cols) {
  Tensor mask(DType::kBool, {rows, cols});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) mask.data<uint8_t>()[i * cols + j] = trilu_keeps(p, i, j) ? 1 : 0;
  return mask;
}

Strides trilu_mask_strides(const Shape& x_sizes) {
  const size_t rank = x_sizes.size();
  Strides strides(rank, 0);
  strides[rank - 2] = x_sizes[rank - 1];
  strides[rank - 1] = 1;
  return strides;
}

Result<int64_t> resolve_gather_elements_axis(const NodeInputs& node) {
  STRIDER_ASSIGN_OR_RETURN(int64_t axis_attr, node.attributes().get_int("axis", 0));
  const int64_t rank = node.input_rank(0);
  int64_t axis = 0;
  if (!normalize_axis(axis_attr, rank, &axis)) return node.error("axis {} out of range for rank {}", axis_attr, rank);
  if (node.input_rank(1) != rank) return node.error("indices have rank {}, data {}", node.input_rank(1), rank);
  if (node.input_dtype(1) != DType::kI64 && node.input_dtype(1) != DType::kI32)
    return node.error("indices must be i64 or i32, got {}", dtype_name(node.input_dtype(1)));
  return axis;
}

Result<std::vector<int64_t>> resolve_transpose(const NodeInputs& node) {
  int64_t rank = node.input_rank(0);
  std::vector<int64_t> reverse;
  for (int64_t i = rank - 1; i >= 0; --i) reverse.push_back(i);
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> perm, node.attributes().get_ints("perm", reverse));
  if (int64_t(perm.size()) != rank)
    return node.error("perm {} has {} entries for a rank-{} input", shape_to_string(perm),
                      perm.size(), rank);
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[size_t(p)])
      return node.error("perm {} is not a permutation", shape_to_string(perm));
    seen[size_t(p)] = true;
  }
  return perm;
}

Result<Shape> resolve_squeeze(const NodeInputs& node) {
  std::vector<int64_t> axes;
  if (node.opset() < 13) {
    STRIDER_ASSIGN_OR_RETURN(axes, node.attributes().get_ints("axes", {}));
  } else if (node.has_input(1)) {
    STRIDER_ASSIGN_OR_RETURN(axes, node.constant_ints(1, "axes"));
  }
  const Shape& in = node.input_shape(0);
  STRIDER_ASSIGN_OR_RETURN(axes, normalized_axes(node, axes, int64_t(in.size())));
  std::vector<bool> drop(in.size(), false);
  for (int64_t a : axes) {
    if (in[size_t(a)] != 1) return node.error("cannot squeeze axis {} of size {}", a, in[size_t(a)]);
    drop[size_t(a)] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!(axes.empty() ? in[i] == 1 : drop[i])) out.push_back(in[i]);
  return out;
}

Result<Shape> resolve_unsqueeze(const NodeInputs& node) {
  std::vector<int64_t> axes;
  if (node.opset() < 13) {
    STRIDER_ASSIGN_OR_RETURN(axes, node.attributes().require_ints("axes"));
  } else {
    STRIDER_ASSIGN_OR_RETURN(axes, node.constant_ints(1, "axes"));
  }
  const Shape& in = node.input_shape(0);
  int64_t out_rank = int64_t(in.size() + axes.size());
  STRIDER_ASSIGN_OR_RETURN(axes, normalized_axes(node, axes, out_rank));
  std::vector<bool> inserted(size_t(out_rank), false);
  for (int64_t a : axes) inserted[size_t(a)] = true;
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(inserted[size_t(i)] ? 1 : in[next++]);
  return out;
}

Result<DType> cast_target(const NodeInputs& node) {
  STRIDER_ASSIGN_OR_RETURN(int64_t to, node.attributes().require_int("to"));
  std::optional<DType> dtype = dtype_from_onnx_code(int(to));
  if (!dtype) return unsupported(fmt::format("cast to {} is not supported", onnx_type_name(int(to))));
  return *dtype;
}

Result<Tensor> constant_value(const AttributeMap& attributes) {
  if (const Attribute* a = attributes.find("value")) {
    if (a->kind != Attribute::Kind::kTensor) return invalid_model("attribute 'value' is not a tensor");
    return *a->tensor;
  }
  if (const Attribute* a = attributes.find("value_float"))
    return Tensor::from_values<float>(DType::kF32, {}, std::span(&a->f, 1));
  if (const Attribute* a = attributes.find("value_floats"))
    return Tensor::from_values<float>(DType::kF32, {int64_t(a->floats.size())}, a->floats);
  if (const Attribute* a = attributes.find("value_int"))
    return Tensor::from_values<int64_t>(DType::kI64, {}, std::span(&a->i, 1));
  if (const Attribute* a = attributes.find("value_ints"))
    return Tensor::from_values<int64_t>(DType::kI64, {int64_t(a->ints.size())}, a->ints);
  for (const char* name : {"value_string", "value_strings", "sparse_value"})
    if (attributes.has(name)) return unsupported(fmt::format("Constant with attribute '{}'", name));
  return invalid_model("Constant has no value attribute");
}

Result<int64_t> range_count(const NodeInputs& node) {
  DType dtype = node.input_dtype(0);
  if (is_floating(dtype)) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<double> start, node.constant_floats(0, "start"));
    STRIDER_ASSIGN_OR_RETURN(std::vector<double> limit, node.constant_floats(1, "limit"));
    STRIDER_ASSIGN_OR_RETURN(std::vector<double> delta, node.constant_floats(2, "delta"));
    if (start.size() != 1 || limit.size() != 1 || delta.size() != 1)
      return node.error("start, limit and delta must be scalars");
    if (delta[0] == 0) return node.error("delta is 0");
    double count = std::ceil((limit[0] - start[0]) / delta[0]);
    if (std::isnan(count)) return node.error("start {}, limit {} and delta {} give no count", start[0], limit[0], delta[0]);
    // Beyond 2^52 elements no tensor can hold it (and a double no longer counts exactly).
    std::optional<int64_t> n = checked_double_to_int(std::max(count, 0.0), 0, kMaxTensorBytes);
    if (!n) return node.error("start {}, limit {} and delta {} give {} elements: too many", start[0], limit[0], delta[0], count);
    return *n;
  }
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> start, node.constant_ints(0, "start"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> limit, node.constant_ints(1, "limit"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> delta, node.constant_ints(2, "delta"));
  if (start.size() != 1 || limit.size() != 1 || delta.size() != 1)
    return node.error("start, limit and delta must be scalars");
  if (delta[0] == 0) return node.error("delta is 0");
  CheckedInt span = CheckedInt(limit[0]) - start[0];
  int64_t d = delta[0];
  if (span.ok() && span.value() != 0 && (span.value() > 0) != (d > 0)) return int64_t(0);
  // ceil(span / d) with span and d of one sign: (span + d - sign) / d, all checked.
  CheckedInt count = (span + d - (d > 0 ? 1 : -1)) / d;
  if (!count.ok() || count.value() > kMaxTensorBytes)
    return node.error("start {}, limit {} and delta {} give more elements than any tensor holds", start[0], limit[0], d);
  return std::max<int64_t>(count.value(), 0);
}

Result<ReduceParams> resolve_reduce(const NodeInputs& node) {
  ReduceParams p;
  STRIDER_ASSIGN_OR_RETURN(int64_t keepdims, node.attributes().get_int("keepdims", 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t noop_empty, node.attributes().get_int("noop_with_empty_axes", 0));
  p.keepdims = keepdims != 0;
  // ReduceSum takes axes as an input from opset 13, the other reductions from 18.
  int axes_input_since = node.node().op_type == "ReduceSum" ? 13 : 18;
  std::vector<int64_t> axes;
  if (node.opset() < axes_input_since) {
    STRIDER_ASSIGN_OR_RETURN(axes, node.attributes().get_ints("axes", {}));
  } else if (node.has_input(1)) {
    STRIDER_ASSIGN_OR_RETURN(axes, node.constant_ints(1, "axes"));
  }
  int64_t rank = node.input_rank(0);
  if (axes.empty()) {
    if (noop_empty) {
      p.noop = true;
      return p;
    }
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  STRIDER_ASSIGN_OR_RETURN(p.axes, normalized_axes(node, axes, rank));
  std::sort(p.axes.begin(), p.axes.end());
  return p;
}

namespace {

Status resolve_auto_pad(const NodeInputs& node, const std::string& auto_pad, size_t d,
                        int64_t in, int64_t effective_kernel, WindowGeometry* g) {
  int64_t stride = g->strides[d];
  if (auto_pad == "VALID") {
    g->pads_begin[d] = g->pads_end[d] = 0;
    g->output[d] = in >= effective_kernel ? (in - effective_kernel) / stride + 1 : 0;
    return Status::ok();
  }
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return node.error("auto_pad '{}' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", auto_pad);
  int64_t out = checked_ceil_div(in, stride).value();
  CheckedInt total = (CheckedInt(out) - 1) * stride + effective_kernel - in;
  if (!total.ok()) return node.error("SAME padding of spatial dim {} overflows", d);
  int64_t padding = std::max<int64_t>(0, total.value());
  int64_t small = padding / 2;
  g->pads_begin[d] = auto_pad == "SAME_UPPER" ? small : padding - small;
  g->pads_end[d] = padding - g->pads_begin[d];
  g->output[d] = out;
  return Status::ok();
}

// Every term a kernel computes from the geometry (window ends, padded extents, the last
// window's start) fits in int64 once these pass, so kernels need no checks of their own.
Status check_window_fits(const NodeInputs& node, const WindowGeometry& g, std::span<const int64_t> input, size_t d) {
  CheckedInt padded = CheckedInt(input[d]) + g.pads_begin[d] + g.pads_end[d];
  CheckedInt last_start = (CheckedInt(std::max<int64_t>(g.output[d], 1)) - 1) * g.strides[d];
  CheckedInt last_end = last_start + (CheckedInt(g.kernel[d]) - 1) * g.dilations[d] + 1;
  if (!padded.ok() || !last_end.ok() || !(padded + last_end).ok())
    return node.error("window geometry of spatial dim {} overflows 64 bits (input {}, kernel {}, stride {}, "
                      "dilation {}, pads {} and {})",
                      d, input[d], g.kernel[d], g.strides[d], g.dilations[d], g.pads_begin[d], g.pads_end[d]);
  return Status::ok();
}

}  // namespace

Status check_work(const NodeInputs& node, std::span<const int64_t> factors, std::string_view what) {
  CheckedInt work = 1;
  for (int64_t f : factors) work *= std::max<int64_t>(f, 0);
  if (work.ok() && work.value() <= kMaxNodeWork) return Status::ok();
  return resource_exhausted(fmt::format("needs {} {}, more than the 2^42 one node may take",
                                        work.ok() ? std::to_string(work.value()) : "more than 2^63", what));
}

Result<WindowGeometry> resolve_window(const NodeInputs& node, std::span<const int64_t> input,
                                      std::span<const int64_t> kernel, bool ceil_mode) {
  size_t n = input.size();
  WindowGeometry g;
  g.kernel.assign(kernel.begin(), kernel.end());
  STRIDER_ASSIGN_OR_RETURN(g.strides, node.attributes().get_ints("strides", std::vector<int64_t>(n, 1)));
  STRIDER_ASSIGN_OR_RETURN(g.dilations,
                           node.attributes().get_ints("dilations", std::vector<int64_t>(n, 1)));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                           node.attributes().get_ints("pads", std::vector<int64_t>(2 * n, 0)));
  STRIDER_ASSIGN_OR_RETURN(std::string auto_pad, node.attributes().get_string("auto_pad", "NOTSET"));
  if (g.kernel.size() != n || g.strides.size() != n || g.dilations.size() != n || pads.size() != 2 * n)
    return node.error("kernel_shape, strides, dilations or pads do not match {} spatial dims", n);
  g.pads_begin.assign(pads.begin(), pads.begin() + long(n));
  g.pads_end.assign(pads.begin() + long(n), pads.end());
  g.output.resize(n);
  for (size_t d = 0; d < n; ++d) {
    if (g.kernel[d] <= 0 || g.strides[d] <= 0 || g.dilations[d] <= 0)
      return node.error("kernel, strides and dilations must be positive on spatial dim {}", d);
    if (g.pads_begin[d] < 0 || g.pads_end[d] < 0) return node.error("negative pads");
    CheckedInt effective_checked = (CheckedInt(g.kernel[d]) - 1) * g.dilations[d] + 1;
    if (!effective_checked.ok())
      return node.error("kernel {} with dilation {} on spatial dim {} overflows 64 bits", g.kernel[d],
                        g.dilations[d], d);
    int64_t effective = effective_checked.value();
    if (auto_pad != "NOTSET" && !auto_pad.empty()) {
      STRIDER_RETURN_IF_ERROR(resolve_auto_pad(node, auto_pad, d, input[d], effective, &g));
      STRIDER_RETURN_IF_ERROR(check_window_fits(node, g, input, d));
      continue;
    }
    CheckedInt span_checked = CheckedInt(input[d]) + g.pads_begin[d] + g.pads_end[d] - effective;
    if (!span_checked.ok()) return node.error("pads {} and {} on spatial dim {} overflow 64 bits", g.pads_begin[d],
                                              g.pads_end[d], d);
    int64_t span = span_checked.value();
    if (span < 0) return node.error("window of {} does not fit spatial dim {} of size {} with pads",
                                    effective, d, input[d]);
    int64_t out = span / g.strides[d] + 1;
    if (ceil_mode && span % g.strides[d] != 0) {
      ++out;
      // A window that would start inside the end padding is dropped.
      if ((out - 1) * g.strides[d] >= input[d] + g.pads_begin[d]) --out;
    }
    g.output[d] = out;
    STRIDER_RETURN_IF_ERROR(check_window_fits(node, g, input, d));
  }
  return g;
}

}  // namespace strider
