#include "ops/data_dependent.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "base/shape.h"

namespace strider {
namespace {

bool element_is_nonzero(const Tensor& x, int64_t i) {
  if (is_floating(x.dtype())) return x.element_as_double(i) != 0.0;  // NaN counts, -0 does not
  return x.element_as_int(i) != 0;
}

// -1, 0 or 1 as element i of x compares to element j (u64 above 2^63 unsigned, as stored).
int compare_elements(const Tensor& x, int64_t i, int64_t j) {
  if (is_floating(x.dtype())) {
    double a = x.element_as_double(i), b = x.element_as_double(j);
    return a < b ? -1 : b < a ? 1 : 0;
  }
  if (x.dtype() == DType::kU64) {
    uint64_t a = uint64_t(x.element_as_int(i)), b = uint64_t(x.element_as_int(j));
    return a < b ? -1 : b < a ? 1 : 0;
  }
  int64_t a = x.element_as_int(i), b = x.element_as_int(j);
  return a < b ? -1 : b < a ? 1 : 0;
}

// x seen as [outer, count, inner] around `axis` (or [1, elements, 1] when flattened).
struct AxisSplit {
  int64_t outer = 1, count = 1, inner = 1;
};
Result<AxisSplit> split_at_axis(const Tensor& x, std::optional<int64_t> axis, int64_t* normalized) {
  AxisSplit s;
  if (!axis) {
    s.count = x.num_elements();
    return s;
  }
  if (!normalize_axis(*axis, x.rank(), normalized))
    return invalid_argument(fmt::format("axis {} is out of range for rank {}", *axis, x.rank()));
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d < *normalized) s.outer *= x.shape()[size_t(d)];
    else if (d > *normalized) s.inner *= x.shape()[size_t(d)];
  }
  s.count = x.shape()[size_t(*normalized)];
  return s;
}

// Copies slices `picked` (indices along the split axis) of x, in that order, into `out`.
void gather_slices(const Tensor& x, const AxisSplit& s, const std::vector<int64_t>& picked, Tensor& out) {
  const size_t element = dtype_size(x.dtype());
  const size_t run = size_t(s.inner) * element;
  if (run == 0 || picked.empty()) return;  // nothing to copy, and an empty tensor's bytes() may be null
  std::byte* to = out.bytes();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k : picked) {
      std::memcpy(to, x.bytes() + size_t((o * s.count + k) * s.inner) * element, run);
      to += run;
    }
}

Tensor int64_tensor(Shape shape, const std::vector<int64_t>& values) {
  return Tensor::from_values<int64_t>(DType::kI64, std::move(shape), values);
}

// ---- shape functions: evaluate on constant inputs (infer_and_fold never calls them
// otherwise: it splits the graph at the node instead) --------------------------------

// Input i's value, which the output's shape depends on. infer_and_fold calls these shape
// functions only when it is constant, but a schema's infer is reachable by other callers
// (tools, tests loading one-node models): a missing value is an error, not a null read.
Result<const Tensor*> value_of_input(const InferContext& ctx, size_t i) {
  const Tensor* t = ctx.input_constant(i);
  if (t == nullptr)
    return unsupported(fmt::format("input {} is not constant, and the output's shape depends on its values", i));
  return t;
}

Status infer_nonzero(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const Tensor* x, value_of_input(ctx, 0));
  ctx.set_output_constant(0, nonzero(*x));
  return Status::ok();
}

std::optional<int64_t> optional_axis(const NodeInputs& node) {
  if (!node.attributes().has("axis")) return std::nullopt;
  Result<int64_t> axis = node.attributes().get_int("axis", 0);
  return axis.is_ok() ? *axis : 0;
}

Status infer_compress(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const Tensor* x, value_of_input(ctx, 0));
  STRIDER_ASSIGN_OR_RETURN(const Tensor* condition, value_of_input(ctx, 1));
  STRIDER_ASSIGN_OR_RETURN(Tensor y, compress(*x, *condition, optional_axis(ctx)));
  ctx.set_output_constant(0, std::move(y));
  return Status::ok();
}

Status infer_unique(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(int64_t sorted, ctx.attributes().get_int("sorted", 1));
  STRIDER_ASSIGN_OR_RETURN(const Tensor* x, value_of_input(ctx, 0));
  STRIDER_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, unique(*x, optional_axis(ctx), sorted != 0));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (ctx.has_output(i)) ctx.set_output_constant(i, std::move(outputs[i]));
  return Status::ok();
}

Result<NmsParams> resolve_nms(const NodeInputs& node) {
  NmsParams p;
  STRIDER_ASSIGN_OR_RETURN(int64_t center, node.attributes().get_int("center_point_box", 0));
  if (center != 0 && center != 1) return invalid_argument(fmt::format("center_point_box {} is not 0 or 1", center));
  p.center_point_box = center == 1;
  if (const Tensor* t = node.input_constant(2); t && t->num_elements() > 0) p.max_boxes_per_class = t->element_as_int(0);
  if (const Tensor* t = node.input_constant(3); t && t->num_elements() > 0) p.iou_threshold = float(t->element_as_double(0));
  if (const Tensor* t = node.input_constant(4); t && t->num_elements() > 0) p.score_threshold = float(t->element_as_double(0));
  return p;
}

Status infer_nms(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(NmsParams params, resolve_nms(ctx));
  STRIDER_ASSIGN_OR_RETURN(const Tensor* boxes, value_of_input(ctx, 0));
  STRIDER_ASSIGN_OR_RETURN(const Tensor* scores, value_of_input(ctx, 1));
  STRIDER_ASSIGN_OR_RETURN(Tensor selected, non_max_suppression(*boxes, *scores, params));
  ctx.set_output_constant(0, std::move(selected));
  return Status::ok();
}

}  // namespace

bool has_data_dependent_shape(const Graph& graph, const Node& node) {
  if (!node.domain.empty() && node.domain != "ai.onnx") return false;
  if (node.op_type == "TopK")  // k is an input from opset 10 (an attribute before)
    return node.input(1) != kNoValue && !graph.value(node.inputs[1]).is_constant();
  return node.op_type == "NonZero" || node.op_type == "Compress" || node.op_type == "Unique" ||
         node.op_type == "NonMaxSuppression";
}

Tensor nonzero(const Tensor& x) {
  std::vector<int64_t> flat;
  for (int64_t i = 0; i < x.num_elements(); ++i)
    if (element_is_nonzero(x, i)) flat.push_back(i);
  const int64_t rank = x.rank(), count = int64_t(flat.size());
  std::vector<int64_t> indices(static_cast<size_t>(rank * count));
  for (int64_t k = 0; k < count; ++k) {
    int64_t rest = flat[size_t(k)];
    for (int64_t d = rank; d-- > 0;) {
      const int64_t size = x.shape()[size_t(d)];
      indices[size_t(d * count + k)] = rest % size;
      rest /= size;
    }
  }
  return int64_tensor({rank, count}, indices);
}

Result<Tensor> compress(const Tensor& x, const Tensor& condition, std::optional<int64_t> axis) {
  if (condition.rank() != 1) return invalid_argument(fmt::format("condition has rank {}, not 1", condition.rank()));
  int64_t normalized = 0;
  STRIDER_ASSIGN_OR_RETURN(AxisSplit s, split_at_axis(x, axis, &normalized));
  if (condition.num_elements() > s.count)
    return invalid_argument(fmt::format("condition has {} entries, more than the {} along the axis",
                                        condition.num_elements(), s.count));
  std::vector<int64_t> picked;
  for (int64_t k = 0; k < condition.num_elements(); ++k)
    if (condition.element_as_int(k) != 0) picked.push_back(k);
  Shape shape{int64_t(picked.size())};
  if (axis) {
    shape = x.shape();
    shape[size_t(normalized)] = int64_t(picked.size());
  }
  Tensor y = Tensor::for_overwrite(x.dtype(), shape);
  gather_slices(x, s, picked, y);
  return y;
}

Result<std::vector<Tensor>> unique(const Tensor& x, std::optional<int64_t> axis, bool sorted) {
  int64_t normalized = 0;
  STRIDER_ASSIGN_OR_RETURN(AxisSplit s, split_at_axis(x, axis, &normalized));
  // Slice k of the split, compared element by element in row-major order.
  auto compare_slices = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i)
        if (int c = compare_elements(x, (o * s.count + a) * s.inner + i, (o * s.count + b) * s.inner + i)) return c;
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(s.count));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare_slices(a, b) < 0; });
  // Groups of equal slices: each one's first occurrence (the lowest index: the sort is stable).
  std::vector<int64_t> first, group_of(static_cast<size_t>(s.count)), counts;
  for (size_t r = 0; r < order.size(); ++r) {
    if (r == 0 || compare_slices(order[r - 1], order[r]) != 0) {
      first.push_back(order[r]);
      counts.push_back(0);
    }
    group_of[size_t(order[r])] = int64_t(first.size()) - 1;
    ++counts.back();
  }
  std::vector<int64_t> rank(first.size());  // group -> output position
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(first.size());
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return first[size_t(a)] < first[size_t(b)]; });
    for (size_t p = 0; p < by_first.size(); ++p) rank[size_t(by_first[p])] = int64_t(p);
  }
  const int64_t n = int64_t(first.size());
  std::vector<int64_t> indices(static_cast<size_t>(n)), out_counts(static_cast<size_t>(n)),
      inverse(static_cast<size_t>(s.count));
  for (int64_t g = 0; g < n; ++g) {
    indices[size_t(rank[size_t(g)])] = first[size_t(g)];
    out_counts[size_t(rank[size_t(g)])] = counts[size_t(g)];
  }
  for (int64_t k = 0; k < s.count; ++k) inverse[size_t(k)] = rank[size_t(group_of[size_t(k)])];
  Shape shape{n};
  if (axis) {
    shape = x.shape();
    shape[size_t(normalized)] = n;
  }
  Tensor y = Tensor::for_overwrite(x.dtype(), shape);
  gather_slices(x, s, indices, y);
  std::vector<Tensor> outputs;
  outputs.push_back(std::move(y));
  outputs.push_back(int64_tensor({n}, indices));
  outputs.push_back(int64_tensor({s.count}, inverse));
  outputs.push_back(int64_tensor({n}, out_counts));
  return outputs;
}

namespace {

struct Corners {
  float y1, x1, y2, x2;
};
Corners corners_of(const Tensor& boxes, int64_t at, bool center_point_box) {
  const float* b = boxes.data<float>() + at * 4;
  if (center_point_box) {  // [x_center, y_center, width, height]
    return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// Whether a and b overlap by more than `threshold` (intersection over union); boxes with
// no area overlap nothing.
bool overlaps(const Corners& a, const Corners& b, float threshold) {
  const float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return false;
  const float h = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float w = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float intersection = h * w;
  return intersection / (area_a + area_b - intersection) > threshold;
}

}  // namespace

Result<Tensor> non_max_suppression(const Tensor& boxes, const Tensor& scores, const NmsParams& p) {
  if (boxes.dtype() != DType::kF32 || scores.dtype() != DType::kF32)
    return unsupported(fmt::format("boxes {} and scores {}: only f32 is supported", dtype_name(boxes.dtype()),
                                   dtype_name(scores.dtype())));
  if (boxes.rank() != 3 || boxes.shape()[2] != 4 || scores.rank() != 3 || scores.shape()[0] != boxes.shape()[0] ||
      scores.shape()[2] != boxes.shape()[1])
    return invalid_argument(fmt::format("boxes {} and scores {} are not [batches, boxes, 4] and [batches, classes, boxes]",
                                        shape_to_string(boxes.shape()), shape_to_string(scores.shape())));
  const int64_t batches = boxes.shape()[0], classes = scores.shape()[1], count = boxes.shape()[1];
  const int64_t limit = std::min(std::max<int64_t>(p.max_boxes_per_class, 0), count);
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const float* score = scores.data<float>() + (b * classes + c) * count;
      std::vector<int64_t> candidates;
      for (int64_t i = 0; i < count; ++i)
        if (!p.score_threshold || score[i] > *p.score_threshold) candidates.push_back(i);
      std::stable_sort(candidates.begin(), candidates.end(), [&](int64_t i, int64_t j) { return score[i] > score[j]; });
      std::vector<Corners> kept;
      for (int64_t i : candidates) {
        if (int64_t(kept.size()) >= limit) break;
        const Corners box = corners_of(boxes, b * count + i, p.center_point_box);
        if (std::any_of(kept.begin(), kept.end(), [&](const Corners& k) { return overlaps(k, box, p.iou_threshold); }))
          continue;
        kept.push_back(box);
        rows.insert(rows.end(), {b, c, i});
      }
    }
  return int64_tensor({int64_t(rows.size() / 3), 3}, rows);
}

void register_data_dependent_ops(std::vector<OpSchema>& ops) {
  ops.push_back({"NonZero", infer_nonzero, {}});
  ops.push_back({"Compress", infer_compress, {}});
  ops.push_back({"Unique", infer_unique, {}});
  ops.push_back({"NonMaxSuppression", infer_nms, {}});
}

}  // namespace strider
