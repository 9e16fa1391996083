// Ops that move elements without computing: DepthToSpace, SpaceToDepth, CenterCropPad and
// ReverseSequence, each as the input index of every output element, from the ONNX operator
// definitions (the runtime expands them into reshapes, slices and gathers instead).
#include <fmt/format.h>

#include <algorithm>

#include "base/shape.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

// Each output element of `shape` from the input element `source(out_index)` (-1: zero).
template <typename Source>
RefTensor rearranged(const RefTensor& x, const Shape& shape, Source source) {
  RefTensor y = RefTensor::zeros(x.dtype, shape);
  for_each_index(shape, [&](int64_t flat, const std::vector<int64_t>& o) {
    const int64_t i = source(o);
    if (i >= 0) convert_element(x, i, y, flat);
  });
  return y;
}

int64_t flat_index(const Shape& shape, const std::vector<int64_t>& index) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

Result<int64_t> block_size(const OpContext& ctx, const RefTensor& x) {
  if (x.rank() != 4) return invalid_model(fmt::format("input {} must be [N, C, H, W]", describe(x)));
  STRIDER_ASSIGN_OR_RETURN(int64_t b, ctx.attributes().get_int("blocksize", 0));
  if (b < 1) return invalid_model("blocksize must be positive");
  return b;
}

// y[n, c, h, w] = x[n, channel, h / b, w / b], channel = ((h % b) * b + w % b) * C' + c
// (DCR) or c * b * b + (h % b) * b + w % b (CRD).
Result<OpOutputs> depth_to_space_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(int64_t b, block_size(ctx, *x));
  STRIDER_ASSIGN_OR_RETURN(std::string mode, ctx.attributes().get_string("mode", "DCR"));
  if (x->shape[1] % (b * b)) return invalid_model("channels are not a multiple of blocksize^2");
  const int64_t c_out = x->shape[1] / (b * b);
  const Shape out = {x->shape[0], c_out, x->shape[2] * b, x->shape[3] * b};
  return OpOutputs{rearranged(*x, out, [&](const std::vector<int64_t>& o) {
    const int64_t offset = (o[2] % b) * b + o[3] % b;
    const int64_t channel = mode == "CRD" ? o[1] * b * b + offset : offset * c_out + o[1];
    return flat_index(x->shape, {o[0], channel, o[2] / b, o[3] / b});
  })};
}

// y[n, (bh * b + bw) * C + c, h, w] = x[n, c, h * b + bh, w * b + bw].
Result<OpOutputs> space_to_depth_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(int64_t b, block_size(ctx, *x));
  if (x->shape[2] % b || x->shape[3] % b) return invalid_model("height and width must be multiples of blocksize");
  const int64_t c = x->shape[1];
  const Shape out = {x->shape[0], c * b * b, x->shape[2] / b, x->shape[3] / b};
  return OpOutputs{rearranged(*x, out, [&](const std::vector<int64_t>& o) {
    const int64_t block = o[1] / c, channel = o[1] % c;
    return flat_index(x->shape, {o[0], channel, o[2] * b + block / b, o[3] * b + block % b});
  })};
}

// Per axis: a crop starts (have - want) / 2 in; a pad puts (want - have) / 2 zeros first.
Result<OpOutputs> center_crop_pad_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input_data"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* shape_input, ctx.input(1, "shape"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, read_ints(*shape_input, "input 1 (shape)"));
  std::vector<int64_t> every(static_cast<size_t>(x->rank()));
  for (int64_t d = 0; d < x->rank(); ++d) every[size_t(d)] = d;
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axes_attr, ctx.attributes().get_ints("axes", every));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axes, normalized_axes(axes_attr, x->rank(), "attribute 'axes'"));
  if (axes.size() != sizes.size()) return invalid_model("shape and axes differ in length");
  Shape out = x->shape;
  std::vector<int64_t> shift(x->shape.size(), 0);  // input coordinate = output coordinate + shift
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = size_t(axes[i]);
    if (sizes[i] < 0) return invalid_model("negative size");
    shift[a] = x->shape[a] >= sizes[i] ? (x->shape[a] - sizes[i]) / 2 : -((sizes[i] - x->shape[a]) / 2);
    out[a] = sizes[i];
  }
  STRIDER_RETURN_IF_ERROR(checked_element_count(out, "output shape"));
  return OpOutputs{rearranged(*x, out, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> in(o.size());
    for (size_t d = 0; d < o.size(); ++d) {
      in[d] = o[d] + shift[d];
      if (in[d] < 0 || in[d] >= x->shape[d]) return int64_t(-1);
    }
    return flat_index(x->shape, in);
  })};
}

Result<OpOutputs> reverse_sequence_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "input"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* lens_input, ctx.input(1, "sequence_lens"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> lens, read_ints(*lens_input, "input 1 (sequence_lens)"));
  STRIDER_ASSIGN_OR_RETURN(int64_t batch_axis, ctx.attributes().get_int("batch_axis", 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t time_axis, ctx.attributes().get_int("time_axis", 0));
  if (x->rank() < 2 || batch_axis + time_axis != 1 || batch_axis * time_axis != 0)
    return invalid_model("batch_axis and time_axis must be 0 and 1 of an input of rank 2 or more");
  const size_t b = size_t(batch_axis), t = size_t(time_axis);
  if (int64_t(lens.size()) != x->shape[b]) return invalid_model("sequence_lens does not match the batch");
  for (int64_t len : lens)
    if (len < 0 || len > x->shape[t]) return invalid_argument(fmt::format("sequence length {} is outside [0, {}]", len, x->shape[t]));
  return OpOutputs{rearranged(*x, x->shape, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> in = o;
    const int64_t len = lens[size_t(o[b])];
    if (o[t] < len) in[t] = len - 1 - o[t];
    return flat_index(x->shape, in);
  })};
}

constexpr OpDefinition kRearrangeOps[] = {
    {"DepthToSpace", 1, 27, depth_to_space_op},
    {"SpaceToDepth", 1, 27, space_to_depth_op},
    {"CenterCropPad", 18, 27, center_crop_pad_op},
    {"ReverseSequence", 10, 27, reverse_sequence_op},
};

}  // namespace

std::span<const OpDefinition> rearrange_op_definitions() { return kRearrangeOps; }

}  // namespace strider::ref
