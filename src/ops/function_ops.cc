#include "ops/function_ops.h"

#include "base/shape.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "base/checked_math.h"
#include "base/float16.h"
#include "base/onnx_types.h"
#include "ops/mel_weights.h"
#include "strider/printable.h"

namespace strider {
namespace {

// Parses "ab,bc->ac" (or implicit output) over operands of the given ranks.
Result<std::pair<std::vector<std::string>, std::string>> parse_einsum(const std::string& equation,
                                                                       const std::vector<int64_t>& ranks,
                                                                       const std::string& node) {
  std::string spec;
  for (char c : equation)
    if (c != ' ') spec += c;
  const size_t arrow = spec.find("->");
  const std::string lhs = spec.substr(0, arrow);
  std::vector<std::string> terms;
  int64_t ellipsis_dims = 0;
  for (size_t start = 0, i = 0; start <= lhs.size(); start = i + 1) {
    i = std::min(lhs.find(',', start), lhs.size());
    std::string raw = lhs.substr(start, i - start);
    terms.emplace_back();
    if (terms.size() > ranks.size()) return invalid_model(fmt::format("node '{}': Einsum has more terms than inputs", node));
    const int64_t rank = ranks[terms.size() - 1];
    const size_t dots = raw.find("...");
    const int64_t named = int64_t(raw.size()) - (dots == std::string::npos ? 0 : 3);
    if (named > rank || (dots == std::string::npos && named != rank))
      return invalid_model(fmt::format("node '{}': Einsum term '{}' does not fit rank {}", node, printable(raw), rank));
    std::string ellipsis;
    for (int64_t e = rank - named; e > 0; --e) ellipsis += char('0' + (e - 1));
    ellipsis_dims = std::max<int64_t>(ellipsis_dims, rank - named);
    terms.back() = dots == std::string::npos ? raw : raw.substr(0, dots) + ellipsis + raw.substr(dots + 3);
    for (char c : terms.back())
      if (!std::isalnum(static_cast<unsigned char>(c)))
        return invalid_model(fmt::format("node '{}': '{}' in an Einsum term", node, printable(std::string(1, c))));
  }
  if (terms.size() != ranks.size()) return invalid_model(fmt::format("node '{}': Einsum has {} terms for {} inputs", node, terms.size(), ranks.size()));
  std::string out;
  if (arrow != std::string::npos) {
    out = spec.substr(arrow + 2);
    std::string ellipsis;
    for (int64_t e = ellipsis_dims; e > 0; --e) ellipsis += char('0' + (e - 1));
    if (size_t dots = out.find("..."); dots != std::string::npos) out = out.substr(0, dots) + ellipsis + out.substr(dots + 3);
  } else {  // implicit: the ellipsis, then the letters that appear once, alphabetically
    std::map<char, int> count;
    for (const std::string& t : terms)
      for (char c : t) ++count[c];
    for (int64_t e = ellipsis_dims; e > 0; --e) out += char('0' + (e - 1));
    for (const auto& [c, n] : count)
      if (n == 1 && std::isalpha(static_cast<unsigned char>(c))) out += c;
  }
  return std::make_pair(std::move(terms), out);
}

Status infer_einsum(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(EinsumParams p, resolve_einsum(ctx));
  Shape shape;
  for (char letter : p.output) shape.push_back(p.sizes.at(letter));
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

Status infer_same_as_input(InferContext& ctx) {
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::ok();
}

Status infer_rotary_embedding(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(resolve_rotary_embedding(ctx).status());
  return infer_same_as_input(ctx);
}

Status infer_lp_normalization(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(resolve_lp_normalization(ctx).status());
  return infer_same_as_input(ctx);
}

Status infer_one_hot(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(OneHotParams p, resolve_one_hot(ctx));
  Shape shape = ctx.input_shape(0);
  shape.insert(shape.begin() + p.axis, p.depth);
  ctx.set_output(0, ctx.input_dtype(2), std::move(shape));
  return Status::ok();
}

Status infer_loss(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(LossParams p, resolve_loss(ctx));
  Shape per_element = ctx.input_shape(1);
  ctx.set_output(0, ctx.input_dtype(0), p.reduction == "none" ? per_element : Shape{});
  if (ctx.has_output(1)) ctx.set_output(1, ctx.input_dtype(0), ctx.input_shape(0));  // SCE's log_prob
  return Status::ok();
}

// The output shape a params struct holds, with input 0's dtype.
template <typename Params, Result<Params> (*resolve)(const NodeInputs&)>
Status infer_shaped(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(Params p, resolve(ctx));
  ctx.set_output(0, ctx.input_dtype(0), p.out);
  return Status::ok();
}

Status infer_reverse_sequence(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(resolve_reverse_sequence(ctx).status());
  return infer_same_as_input(ctx);
}

Status infer_eye_like(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(EyeLikeParams p, resolve_eye_like(ctx));
  ctx.set_output(0, p.dtype, ctx.input_shape(0));
  return Status::ok();
}

// MelWeightMatrix (ops/mel_weights.h) is a constant: every input must be known when the
// session is made (speech front ends pass constants), and the matrix is folded there.
Status infer_mel_weight_matrix(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> bins, ctx.constant_ints(0, "num_mel_bins"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> length, ctx.constant_ints(1, "dft_length"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> rate, ctx.constant_ints(2, "sample_rate"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<double> low, ctx.constant_floats(3, "lower_edge_hertz"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<double> high, ctx.constant_floats(4, "upper_edge_hertz"));
  if (bins.size() != 1 || length.size() != 1 || rate.size() != 1 || low.size() != 1 || high.size() != 1)
    return ctx.error("its inputs must be scalars");
  STRIDER_ASSIGN_OR_RETURN(int64_t code, ctx.attributes().get_int("output_datatype", 1));
  std::optional<DType> dtype = dtype_from_onnx_code(int(code));
  if (!dtype || !is_floating(*dtype)) return ctx.error("output_datatype {} is not a floating type strider has", code);
  // The ONNX definition computes the edges from float32 inputs.
  STRIDER_ASSIGN_OR_RETURN(std::vector<double> weights,
                           mel::weight_matrix(bins[0], length[0], rate[0], double(float(low[0])), double(float(high[0]))));
  Tensor matrix(*dtype, {length[0] / 2 + 1, bins[0]});
  for (size_t i = 0; i < weights.size(); ++i) {
    switch (*dtype) {
      case DType::kF64: matrix.data<double>()[i] = weights[i]; break;
      case DType::kF16: matrix.data<f16>()[i] = f16::from_float(float(weights[i])); break;
      case DType::kBF16: matrix.data<bf16>()[i] = bf16::from_float(float(weights[i])); break;
      case DType::kF32: matrix.data<float>()[i] = float(weights[i]); break;
      default: return ctx.error("output_datatype {} is not f16, bf16, f32 or f64", dtype_name(*dtype));
    }
  }
  ctx.set_output_constant(0, std::move(matrix));
  return Status::ok();
}

Status infer_hardmax(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(resolve_hardmax(ctx).status());
  return infer_same_as_input(ctx);
}

Status infer_lrn(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(resolve_lrn(ctx).status());
  return infer_same_as_input(ctx);
}

Status infer_window_function(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(WindowParams p, resolve_window_function(ctx));
  ctx.set_output(0, p.dtype, Shape{p.size});
  return Status::ok();
}

Status require_4d(const NodeInputs& node) {
  if (node.input_rank(0) != 4) return node.error("input {} must be [N, C, H, W]", shape_to_string(node.input_shape(0)));
  return Status::ok();
}

Result<int64_t> positive_block(const NodeInputs& node) {
  STRIDER_ASSIGN_OR_RETURN(int64_t block, node.attributes().get_int("blocksize", 0));
  if (block < 1 || block > (int64_t(1) << 20))
    return node.error("blocksize {} must be between 1 and {}", block, int64_t(1) << 20);
  return block;
}

}  // namespace

Result<BlockParams> resolve_depth_to_space(const NodeInputs& node) {
  STRIDER_RETURN_IF_ERROR(require_4d(node));
  BlockParams p;
  STRIDER_ASSIGN_OR_RETURN(p.block, positive_block(node));
  STRIDER_ASSIGN_OR_RETURN(std::string mode, node.attributes().get_string("mode", "DCR"));
  if (mode != "DCR" && mode != "CRD") return node.error("mode '{}' is not DCR or CRD", printable(mode));
  p.crd = mode == "CRD";
  const Shape& x = node.input_shape(0);
  const int64_t b = p.block;
  if (x[1] % (b * b)) return node.error("channels {} are not a multiple of blocksize^2 = {}", x[1], b * b);
  p.out = {x[0], x[1] / (b * b), x[2] * b, x[3] * b};
  return p;
}

Result<BlockParams> resolve_space_to_depth(const NodeInputs& node) {
  STRIDER_RETURN_IF_ERROR(require_4d(node));
  BlockParams p;
  STRIDER_ASSIGN_OR_RETURN(p.block, positive_block(node));
  const Shape& x = node.input_shape(0);
  const int64_t b = p.block;
  if (x[2] % b || x[3] % b) return node.error("height {} and width {} must be multiples of blocksize {}", x[2], x[3], b);
  p.out = {x[0], x[1] * b * b, x[2] / b, x[3] / b};
  return p;
}

Result<CenterCropPadParams> resolve_center_crop_pad(const NodeInputs& node) {
  CenterCropPadParams p;
  STRIDER_ASSIGN_OR_RETURN(p.sizes, node.constant_ints(1, "shape"));
  const int64_t rank = node.input_rank(0);
  std::vector<int64_t> every_axis(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) every_axis[size_t(d)] = d;
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> axes, node.attributes().get_ints("axes", every_axis));
  if (axes.size() != p.sizes.size()) return node.error("shape has {} sizes for {} axes", p.sizes.size(), axes.size());
  p.out = node.input_shape(0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = 0;
    if (!normalize_axis(axes[i], rank, &axis)) return node.error("axis {} out of range", axes[i]);
    if (std::find(p.axes.begin(), p.axes.end(), axis) != p.axes.end()) return node.error("axis {} given twice", axes[i]);
    if (p.sizes[i] < 0 || p.sizes[i] > (int64_t(1) << 40)) return node.error("size {} of axis {} is out of range", p.sizes[i], axis);
    p.axes.push_back(axis);
    p.out[size_t(axis)] = p.sizes[i];
  }
  return p;
}

Result<MaxUnpoolParams> resolve_max_unpool(const NodeInputs& node) {
  const Shape& x = node.input_shape(0);
  if (x.size() < 3) return node.error("X {} must be [N, C, d1, ...]", shape_to_string(x));
  if (node.input_shape(1) != x || !is_integral(node.input_dtype(1)))
    return node.error("I must be integers of X's shape {}", shape_to_string(x));
  const size_t dims = x.size() - 2;
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, node.attributes().require_ints("kernel_shape"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> strides, node.attributes().get_ints("strides", std::vector<int64_t>(dims, 1)));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> pads, node.attributes().get_ints("pads", std::vector<int64_t>(2 * dims, 0)));
  if (kernel.size() != dims || strides.size() != dims || pads.size() != 2 * dims)
    return node.error("kernel_shape, strides and pads must have {}, {} and {} values", dims, dims, 2 * dims);
  MaxUnpoolParams p;
  p.unpooled = {x[0], x[1]};
  for (size_t d = 0; d < dims; ++d) {
    CheckedInt size = (CheckedInt(x[2 + d]) - 1) * strides[d] - pads[d] - pads[dims + d] + kernel[d];
    if (!size.ok() || size.value() < 0 || strides[d] < 1 || kernel[d] < 1)
      return node.error("kernel {}, stride {} and pads give no output size for dim {}", kernel[d], strides[d], d);
    p.unpooled.push_back(size.value());
  }
  p.out = p.unpooled;
  if (node.has_input(2)) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> shape, node.constant_ints(2, "output_shape"));
    if (shape.size() != x.size() || shape[0] != x[0] || shape[1] != x[1])
      return node.error("output_shape [{}] is not [N, C, ...] of X {}", fmt::join(shape, ", "), shape_to_string(x));
    for (size_t d = 2; d < x.size(); ++d)
      if (shape[d] < p.unpooled[d])
        return node.error("output_shape [{}] is smaller than the unpooled {}", fmt::join(shape, ", "),
                          shape_to_string(p.unpooled));
    p.out = shape;
  }
  for (int64_t d : p.out)
    if (d < 0 || d > (int64_t(1) << 40)) return node.error("output dim {} is out of range", d);
  if (!checked_element_count(p.out, 1)) return node.error("output {} is too large", shape_to_string(p.out));
  return p;
}

Result<Col2ImParams> resolve_col2im(const NodeInputs& node) {
  Col2ImParams p;
  STRIDER_ASSIGN_OR_RETURN(p.image, node.constant_ints(1, "image_shape"));
  STRIDER_ASSIGN_OR_RETURN(p.block, node.constant_ints(2, "block_shape"));
  const size_t dims = p.image.size();
  const Shape& x = node.input_shape(0);
  if (dims == 0 || p.block.size() != dims || x.size() != 3)
    return node.error("input {} with image_shape of {} and block_shape of {} dims", shape_to_string(x), dims, p.block.size());
  STRIDER_ASSIGN_OR_RETURN(p.strides, node.attributes().get_ints("strides", std::vector<int64_t>(dims, 1)));
  STRIDER_ASSIGN_OR_RETURN(p.dilations, node.attributes().get_ints("dilations", std::vector<int64_t>(dims, 1)));
  STRIDER_ASSIGN_OR_RETURN(p.pads, node.attributes().get_ints("pads", std::vector<int64_t>(2 * dims, 0)));
  if (p.strides.size() != dims || p.dilations.size() != dims || p.pads.size() != 2 * dims)
    return node.error("strides, dilations and pads must have {}, {} and {} values", dims, dims, 2 * dims);
  CheckedInt block_size = 1, places = 1;
  for (size_t d = 0; d < dims; ++d) {
    if (p.image[d] < 1 || p.block[d] < 1 || p.strides[d] < 1 || p.dilations[d] < 1 || p.pads[d] < 0 || p.pads[dims + d] < 0 ||
        p.image[d] > (int64_t(1) << 30) || p.block[d] > (int64_t(1) << 30) || p.dilations[d] > (int64_t(1) << 30) ||
        p.pads[d] > (int64_t(1) << 30) || p.pads[dims + d] > (int64_t(1) << 30))
      return node.error("dim {}: image {}, block {}, stride {}, dilation {} and pads {}, {} are out of range", d, p.image[d],
                        p.block[d], p.strides[d], p.dilations[d], p.pads[d], p.pads[dims + d]);
    const int64_t span = (p.block[d] - 1) * p.dilations[d] + 1, room = p.image[d] + p.pads[d] + p.pads[dims + d];
    if (span > room) return node.error("dim {}: the block spans {} of {} padded pixels", d, span, room);
    p.blocks.push_back((room - span) / p.strides[d] + 1);
    block_size = block_size * p.block[d];
    places = places * p.blocks.back();
  }
  if (!block_size.ok() || !places.ok() || x[1] % block_size.value() != 0 || x[2] != places.value())
    return node.error("input {} is not [N, C x {} block elements, {} block places]", shape_to_string(x),
                      block_size.ok() ? block_size.value() : -1, places.ok() ? places.value() : -1);
  p.channels = x[1] / block_size.value();
  p.out = {x[0], p.channels};
  p.out.insert(p.out.end(), p.image.begin(), p.image.end());
  return p;
}

Result<ReverseSequenceParams> resolve_reverse_sequence(const NodeInputs& node) {
  ReverseSequenceParams p;
  STRIDER_ASSIGN_OR_RETURN(p.batch_axis, node.attributes().get_int("batch_axis", 1));
  STRIDER_ASSIGN_OR_RETURN(p.time_axis, node.attributes().get_int("time_axis", 0));
  const Shape& x = node.input_shape(0);
  if (x.size() < 2) return node.error("input {} must have rank 2 or more", shape_to_string(x));
  if ((p.batch_axis != 0 && p.batch_axis != 1) || (p.time_axis != 0 && p.time_axis != 1) || p.batch_axis == p.time_axis)
    return node.error("batch_axis {} and time_axis {} must be 0 and 1", p.batch_axis, p.time_axis);
  if (node.input_shape(1) != Shape{x[size_t(p.batch_axis)]} || !is_integral(node.input_dtype(1)))
    return node.error("sequence_lens must be [{}] integers", x[size_t(p.batch_axis)]);
  return p;
}

Result<EyeLikeParams> resolve_eye_like(const NodeInputs& node) {
  EyeLikeParams p;
  if (node.input_rank(0) != 2) return node.error("input {} must be 2-D", shape_to_string(node.input_shape(0)));
  p.dtype = node.input_dtype(0);
  if (node.attributes().has("dtype")) {
    STRIDER_ASSIGN_OR_RETURN(int64_t code, node.attributes().get_int("dtype", 0));
    std::optional<DType> d = dtype_from_onnx_code(int(code));
    if (!d) return node.error("dtype {} is not one strider has", code);
    p.dtype = *d;
  }
  STRIDER_ASSIGN_OR_RETURN(p.k, node.attributes().get_int("k", 0));
  return p;
}

Result<HardmaxParams> resolve_hardmax(const NodeInputs& node) {
  HardmaxParams p;
  p.coerce = node.opset() < 13;
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, node.attributes().get_int("axis", p.coerce ? 1 : -1));
  if (!is_floating(node.input_dtype(0))) return node.error("input must be floating");
  if (node.input_rank(0) < 1 || !normalize_axis(axis, node.input_rank(0), &p.axis)) return node.error("axis {} out of range", axis);
  return p;
}

Result<LrnParams> resolve_lrn(const NodeInputs& node) {
  LrnParams p;
  STRIDER_ASSIGN_OR_RETURN(p.alpha, node.attributes().get_float("alpha", 1e-4f));
  STRIDER_ASSIGN_OR_RETURN(p.beta, node.attributes().get_float("beta", 0.75f));
  STRIDER_ASSIGN_OR_RETURN(p.bias, node.attributes().get_float("bias", 1.0f));
  STRIDER_ASSIGN_OR_RETURN(p.size, node.attributes().get_int("size", 0));
  if (p.size < 1 || p.size > (int64_t(1) << 20))
    return node.error("size {} must be between 1 and {}", p.size, int64_t(1) << 20);
  if (node.input_rank(0) < 3) return node.error("input {} must be [N, C, d1, ...]", shape_to_string(node.input_shape(0)));
  if (!is_floating(node.input_dtype(0))) return node.error("input must be floating");
  return p;
}

Result<LpPoolParams> resolve_lp_pool(const NodeInputs& node) {
  LpPoolParams p;
  STRIDER_ASSIGN_OR_RETURN(p.p, node.attributes().get_int("p", 2));
  if (p.p < 1 || p.p > 64) return node.error("p {} must be in [1, 64]", p.p);
  const Shape& x = node.input_shape(0);
  if (x.size() < 3) return node.error("input {} must be [N, C, d1, ...]", shape_to_string(x));
  if (!is_floating(node.input_dtype(0))) return node.error("input must be floating");
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, node.attributes().get_ints("kernel_shape", {}));
  STRIDER_ASSIGN_OR_RETURN(int64_t ceil_mode, node.attributes().get_int("ceil_mode", 0));
  const std::vector<int64_t> spatial(x.begin() + 2, x.end());
  STRIDER_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(node, spatial, kernel, ceil_mode != 0));
  p.out = {x[0], x[1]};
  p.out.insert(p.out.end(), g.output.begin(), g.output.end());
  for (int64_t k : kernel) p.window_volume *= k;
  return p;
}

namespace {
// attribute `name` with one entry per spatial dim, `fallback` each when absent.
Result<std::vector<int64_t>> per_spatial(const NodeInputs& node, const std::string& name, size_t dims, int64_t fallback,
                                         int64_t minimum) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> v, node.attributes().get_ints(name, std::vector<int64_t>(dims, fallback)));
  if (v.size() != dims) return node.error("{} has {} entries for {} spatial dims", name, v.size(), dims);
  for (int64_t e : v)
    if (e < minimum || e > (int64_t(1) << 32)) return node.error("{} entry {} is out of range", name, e);
  return v;
}
}  // namespace

Result<DeformConvParams> resolve_deform_conv(const NodeInputs& node) {
  DeformConvParams p;
  const Shape& x = node.input_shape(0);
  const Shape& w = node.input_shape(1);
  const Shape& offset = node.input_shape(2);
  if (x.size() != 4 || w.size() != 4) return node.error("X {} and W {} must be 4-D (DeformConv is 2-D here)", shape_to_string(x), shape_to_string(w));
  if (!is_floating(node.input_dtype(0)) || node.input_dtype(1) != node.input_dtype(0) || node.input_dtype(2) != node.input_dtype(0))
    return node.error("X, W and offset must be of one floating type");
  STRIDER_ASSIGN_OR_RETURN(p.group, node.attributes().get_int("group", 1));
  STRIDER_ASSIGN_OR_RETURN(p.offset_group, node.attributes().get_int("offset_group", 1));
  if (p.group < 1 || p.offset_group < 1 || x[1] % p.group != 0 || x[1] % p.offset_group != 0 || w[0] % p.group != 0 ||
      w[1] != x[1] / p.group)
    return node.error("group {} and offset_group {} do not divide X {} and W {}", p.group, p.offset_group, shape_to_string(x),
                      shape_to_string(w));
  p.kernel = {w[2], w[3]};
  if (node.attributes().has("kernel_shape")) {
    STRIDER_ASSIGN_OR_RETURN(p.kernel, per_spatial(node, "kernel_shape", 2, 0, 1));
  }
  if (p.kernel != std::vector<int64_t>{w[2], w[3]}) return node.error("kernel_shape does not match W {}", shape_to_string(w));
  STRIDER_ASSIGN_OR_RETURN(p.strides, per_spatial(node, "strides", 2, 1, 1));
  STRIDER_ASSIGN_OR_RETURN(p.dilations, per_spatial(node, "dilations", 2, 1, 1));
  STRIDER_ASSIGN_OR_RETURN(p.pads, node.attributes().get_ints("pads", {0, 0, 0, 0}));
  if (p.pads.size() != 4) return node.error("pads has {} entries, not 4", p.pads.size());
  p.out = {x[0], w[0]};
  for (size_t d = 0; d < 2; ++d) {
    if (p.pads[d] < 0 || p.pads[2 + d] < 0 || p.pads[d] > (int64_t(1) << 32) || p.pads[2 + d] > (int64_t(1) << 32))
      return node.error("pads entry out of range");
    const int64_t span = (p.kernel[d] - 1) * p.dilations[d] + 1, room = x[2 + d] + p.pads[d] + p.pads[2 + d];
    if (span > room) return node.error("the kernel spans {} of {} padded pixels", span, room);
    p.out.push_back((room - span) / p.strides[d] + 1);
  }
  const int64_t taps = p.kernel[0] * p.kernel[1];
  if (offset != Shape{x[0], p.offset_group * 2 * taps, p.out[2], p.out[3]})
    return node.error("offset {} is not [N, {}, {}, {}]", shape_to_string(offset), p.offset_group * 2 * taps, p.out[2], p.out[3]);
  // B and mask of X's type too (ONNX binds all five to T; past libonnx's opsets the
  // signature check cannot say so: a fuzzed int32 B reached the reference's float reads).
  for (size_t k : {size_t(3), size_t(4)})
    if (node.has_input(k) && node.input_dtype(k) != node.input_dtype(0))
      return node.error("{} is {}, not X's {}", k == 3 ? "B" : "mask", dtype_name(node.input_dtype(k)), dtype_name(node.input_dtype(0)));
  p.has_bias = node.has_input(3);
  if (p.has_bias && node.input_shape(3) != Shape{w[0]}) return node.error("B {} is not [{}]", shape_to_string(node.input_shape(3)), w[0]);
  p.has_mask = node.has_input(4);
  if (p.has_mask && node.input_shape(4) != Shape{x[0], p.offset_group * taps, p.out[2], p.out[3]})
    return node.error("mask {} is not [N, {}, {}, {}]", shape_to_string(node.input_shape(4)), p.offset_group * taps, p.out[2], p.out[3]);
  if (!checked_element_count(Shape{p.out[0], p.out[1], p.out[2], p.out[3], w[1], taps}, 1))
    return node.error("the convolution is too large");
  return p;
}

Result<ConvTransposeParams> resolve_conv_transpose(const NodeInputs& node) {
  ConvTransposeParams p;
  const Shape& x = node.input_shape(0);
  const Shape& w = node.input_shape(1);
  if (x.size() < 3 || w.size() != x.size())
    return node.error("X {} and W {} must be [N, C, d1...] and [C, M / group, k1...]", shape_to_string(x), shape_to_string(w));
  if (!is_floating(node.input_dtype(0))) return node.error("X must be floating");
  const size_t dims = x.size() - 2;
  STRIDER_ASSIGN_OR_RETURN(p.group, node.attributes().get_int("group", 1));
  if (p.group < 1 || w[0] != x[1] || x[1] % p.group != 0)
    return node.error("W {} and group {} do not fit X {}'s channels", shape_to_string(w), p.group, shape_to_string(x));
  if (node.has_input(2) && node.input_shape(2) != Shape{w[1] * p.group}) return node.error("B must be [{}]", w[1] * p.group);
  p.kernel.assign(w.begin() + 2, w.end());
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, per_spatial(node, "kernel_shape", dims, 0, 0));
  for (size_t i = 0; i < dims; ++i)
    if (kernel[i] != 0 && kernel[i] != p.kernel[i]) return node.error("kernel_shape does not match W {}", shape_to_string(w));
  STRIDER_ASSIGN_OR_RETURN(p.strides, per_spatial(node, "strides", dims, 1, 1));
  STRIDER_ASSIGN_OR_RETURN(p.dilations, per_spatial(node, "dilations", dims, 1, 1));
  STRIDER_ASSIGN_OR_RETURN(p.output_padding, per_spatial(node, "output_padding", dims, 0, 0));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> pads, per_spatial(node, "pads", 2 * dims, 0, 0));
  STRIDER_ASSIGN_OR_RETURN(std::string auto_pad, node.attributes().get_string("auto_pad", "NOTSET"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> output_shape, node.attributes().get_ints("output_shape", {}));
  if (output_shape.size() == dims + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (!output_shape.empty() && output_shape.size() != dims) return node.error("output_shape has {} entries", output_shape.size());
  p.out = {x[0], w[1] * p.group};
  for (size_t i = 0; i < dims; ++i) {
    if (p.output_padding[i] >= std::max(p.strides[i], p.dilations[i]))
      return node.error("output_padding {} must be below the stride or the dilation", p.output_padding[i]);
    const int64_t full = p.strides[i] * (x[i + 2] - 1) + p.output_padding[i] + (p.kernel[i] - 1) * p.dilations[i] + 1;
    int64_t begin = pads[i], end = pads[i + dims];
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (!output_shape.empty() || same) {
      const int64_t total = full - (output_shape.empty() ? x[i + 2] * p.strides[i] : output_shape[i]);
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);  // floor(total / 2), as ONNX writes it
      begin = auto_pad == "SAME_UPPER" ? half : total - half;
      end = total - begin;
    } else if (auto_pad == "VALID") {
      begin = end = 0;
    } else if (auto_pad != "NOTSET") {
      return node.error("auto_pad '{}' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", printable(auto_pad));
    }
    p.pads_begin.push_back(begin);
    p.pads_end.push_back(end);
    p.out.push_back(full - begin - end);
    if (p.out.back() < 1) return node.error("spatial dim {} of the output would be {}", i, p.out.back());
  }
  return p;
}

Result<DftParams> resolve_dft(const NodeInputs& node) {
  DftParams p;
  const Shape& x = node.input_shape(0);
  const int64_t rank = int64_t(x.size());
  if (rank < 2 || (x.back() != 1 && x.back() != 2)) return node.error("input {} must be [..., 1] or [..., 2]", shape_to_string(x));
  if (!is_floating(node.input_dtype(0))) return node.error("input must be floating");
  p.complex_input = x.back() == 2;
  STRIDER_ASSIGN_OR_RETURN(int64_t inverse, node.attributes().get_int("inverse", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t onesided, node.attributes().get_int("onesided", 0));
  p.inverse = inverse != 0;
  p.onesided = onesided != 0;
  int64_t axis = 1;
  if (node.opset() >= 20) {
    axis = -2;
    if (node.has_input(2)) {
      STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> a, node.constant_ints(2, "axis"));
      if (a.size() != 1) return node.error("axis must be a scalar");
      axis = a[0];
    }
  } else {
    STRIDER_ASSIGN_OR_RETURN(axis, node.attributes().get_int("axis", 1));
  }
  if (!normalize_axis(axis, rank, &p.axis) || p.axis == rank - 1 || p.axis == 0)
    return node.error("axis {} must be a signal dim (not the batch or the last)", axis);
  const int64_t n = x[size_t(p.axis)];
  p.length = p.inverse && p.onesided ? 2 * (n - 1) : n;
  if (node.has_input(1)) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> l, node.constant_ints(1, "dft_length"));
    if (l.size() != 1) return node.error("dft_length must be a scalar");
    p.length = l[0];
  }
  if (p.length < 1 || p.length > (int64_t(1) << 24)) return node.error("dft_length {} is not in [1, 2^24]", p.length);
  if (p.inverse && p.onesided) {
    p.bins = p.length;
    p.used = std::min(n, p.length / 2 + 1);
  } else {
    p.bins = p.onesided ? p.length / 2 + 1 : p.length;
    p.used = std::min(n, p.length);
  }
  p.out = x;
  p.out[size_t(p.axis)] = p.bins;
  p.out.back() = p.inverse && p.onesided ? 1 : 2;
  return p;
}

Result<StftParams> resolve_stft(const NodeInputs& node) {
  StftParams p;
  const Shape& x = node.input_shape(0);
  if (x.size() != 3 || (x[2] != 1 && x[2] != 2)) return node.error("signal {} must be [batch, length, 1|2]", shape_to_string(x));
  if (!is_floating(node.input_dtype(0))) return node.error("signal must be floating");
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> step, node.constant_ints(1, "frame_step"));
  if (step.size() != 1 || step[0] < 1) return node.error("frame_step must be one positive integer");
  p.step = step[0];
  p.windowed = node.has_input(2);
  int64_t length = 0;
  if (p.windowed) {
    if (node.input_rank(2) != 1 || node.input_dtype(2) != node.input_dtype(0)) return node.error("window must be 1-D of the signal's dtype");
    length = node.input_shape(2)[0];
  }
  if (node.has_input(3)) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> l, node.constant_ints(3, "frame_length"));
    if (l.size() != 1) return node.error("frame_length must be a scalar");
    if (p.windowed && l[0] != length) return node.error("frame_length {} differs from the window's {}", l[0], length);
    length = l[0];
  }
  if (length < 1 || length > x[1] || length > (int64_t(1) << 24))
    return node.error("frame length {} must be in [1, the signal's {}]", length, x[1]);
  STRIDER_ASSIGN_OR_RETURN(int64_t onesided, node.attributes().get_int("onesided", 1));
  p.frames = (x[1] - length) / p.step + 1;
  p.dft.axis = 2;
  p.dft.length = p.dft.used = length;
  p.dft.onesided = onesided != 0;
  p.dft.bins = p.dft.onesided ? length / 2 + 1 : length;
  p.dft.complex_input = x[2] == 2;
  p.out = {x[0], p.frames, p.dft.bins, 2};
  return p;
}

Result<WindowParams> resolve_window_function(const NodeInputs& node) {
  WindowParams p;
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> size, node.constant_ints(0, "size"));
  if (size.size() != 1 || size[0] < 0 || size[0] > (int64_t(1) << 32)) return node.error("size must be one non-negative integer");
  p.size = size[0];
  STRIDER_ASSIGN_OR_RETURN(int64_t periodic, node.attributes().get_int("periodic", 1));
  p.periodic = periodic != 0;
  STRIDER_ASSIGN_OR_RETURN(int64_t code, node.attributes().get_int("output_datatype", 1));
  std::optional<DType> d = dtype_from_onnx_code(int(code));
  if (!d) return node.error("output_datatype {} is not one strider has", code);
  p.dtype = *d;
  const std::string& op = node.node().op_type;
  if (op == "HannWindow") p.a0 = 0.5, p.a1 = 0.5;
  else if (op == "HammingWindow") p.a0 = 25.0 / 46.0, p.a1 = 1.0 - 25.0 / 46.0;
  else p.a0 = 0.42, p.a1 = 0.5, p.a2 = 0.08;  // BlackmanWindow
  return p;
}

Result<LossParams> resolve_loss(const NodeInputs& node) {
  LossParams p;
  STRIDER_ASSIGN_OR_RETURN(p.reduction, node.attributes().get_string("reduction", "mean"));
  if (p.reduction != "none" && p.reduction != "sum" && p.reduction != "mean")
    return node.error("reduction '{}' is not none, sum or mean", printable(p.reduction));
  p.has_ignore_index = node.attributes().has("ignore_index");
  STRIDER_ASSIGN_OR_RETURN(p.ignore_index, node.attributes().get_int("ignore_index", 0));
  const Shape& x = node.input_shape(0);
  if (!is_floating(node.input_dtype(0))) return node.error("input 0 is {}, expected a floating type", dtype_name(node.input_dtype(0)));
  if (x.size() < 2) return node.error("input 0 {} must be [N, C, d1, ...]", shape_to_string(x));
  const DType target = node.input_dtype(1);
  if (target != DType::kI64 && target != DType::kI32) return node.error("target is {}, expected int32 or int64", dtype_name(target));
  Shape expected = x;
  expected.erase(expected.begin() + 1);
  if (node.input_shape(1) != expected)
    return node.error("target {} must be input 0's shape without its class dim, {}", shape_to_string(node.input_shape(1)),
                      shape_to_string(expected));
  p.classes = x[1];
  p.has_weight = node.has_input(2);
  if (p.has_weight && (node.input_shape(2) != Shape{p.classes} || node.input_dtype(2) != node.input_dtype(0)))
    return node.error("weight {} must be [{}] of input 0's dtype", shape_to_string(node.input_shape(2)), p.classes);
  return p;
}

Result<RotaryParams> resolve_rotary_embedding(const NodeInputs& node) {
  RotaryParams p;
  const Shape& x = node.input_shape(0);
  if (!is_floating(node.input_dtype(0))) return node.error("input is {}, expected a floating type", dtype_name(node.input_dtype(0)));
  if (x.size() != 3 && x.size() != 4) return node.error("input {} must be 3-D or 4-D", shape_to_string(x));
  p.three_d = x.size() == 3;
  STRIDER_ASSIGN_OR_RETURN(int64_t interleaved, node.attributes().get_int("interleaved", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t heads, node.attributes().get_int("num_heads", 0));
  STRIDER_ASSIGN_OR_RETURN(p.rotary, node.attributes().get_int("rotary_embedding_dim", 0));
  p.interleaved = interleaved != 0;
  p.batch = x[0];
  if (p.three_d) {
    if (heads < 1 || x[2] % heads) return node.error("hidden size {} does not split into num_heads {}", x[2], heads);
    p.heads = heads;
    p.len = x[1];
    p.head = x[2] / heads;
  } else {
    p.heads = x[1];
    p.len = x[2];
    p.head = x[3];
  }
  if (p.rotary == 0) p.rotary = p.head;
  if (p.rotary < 2 || p.rotary > p.head || p.rotary % 2)
    return node.error("rotary_embedding_dim {} must be even and at most the head size {}", p.rotary, p.head);
  p.has_positions = node.has_input(3);
  const Shape& cos = node.input_shape(1);
  const Shape expected = p.has_positions ? Shape{cos.empty() ? 0 : cos[0], p.rotary / 2} : Shape{p.batch, p.len, p.rotary / 2};
  if (cos != expected || node.input_shape(2) != cos)
    return node.error("cos and sin caches are {} and {}, expected {}", shape_to_string(cos), shape_to_string(node.input_shape(2)),
                      shape_to_string(expected));
  if (p.has_positions && node.input_shape(3) != Shape{p.batch, p.len})
    return node.error("position_ids are {}, expected [{}, {}]", shape_to_string(node.input_shape(3)), p.batch, p.len);
  return p;
}

Result<LpNormParams> resolve_lp_normalization(const NodeInputs& node) {
  LpNormParams p;
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, node.attributes().get_int("axis", -1));
  STRIDER_ASSIGN_OR_RETURN(p.p, node.attributes().get_int("p", 2));
  if (!normalize_axis(axis, node.input_rank(0), &p.axis)) return node.error("axis {} out of range", axis);
  if (p.p != 1 && p.p != 2) return node.error("p {} is not 1 or 2", p.p);
  if (!is_floating(node.input_dtype(0))) return node.error("input must be floating");
  return p;
}

Result<OneHotParams> resolve_one_hot(const NodeInputs& node) {
  OneHotParams p;
  STRIDER_ASSIGN_OR_RETURN(std::vector<double> depth, node.constant_floats(1, "depth"));
  if (depth.size() != 1 || !(depth[0] >= 1) || depth[0] > double(int64_t(1) << 40))
    return node.error("depth must be one positive number");
  p.depth = int64_t(depth[0]);
  if (node.input_shape(2) != Shape{2}) return node.error("values must have 2 elements, [off, on]");
  if (node.input_dtype(0) == DType::kBool) return node.error("indices must be numeric");
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, node.attributes().get_int("axis", -1));
  if (!normalize_axis(axis, node.input_rank(0) + 1, &p.axis)) return node.error("axis {} out of range", axis);
  return p;
}

Result<EinsumParams> resolve_einsum(const NodeInputs& node) {
  STRIDER_ASSIGN_OR_RETURN(std::string equation, node.attributes().get_string("equation", ""));
  if (equation.empty()) return node.error("Einsum needs an equation");
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < node.num_inputs(); ++i) {
    if (!node.has_input(i)) return node.error("input {} is missing", i);
    if (node.input_dtype(i) != node.input_dtype(0)) return node.error("inputs of different dtypes");
    ranks.push_back(node.input_rank(i));
  }
  STRIDER_ASSIGN_OR_RETURN(auto parsed, parse_einsum(equation, ranks, node.node().name));
  EinsumParams p{std::move(parsed.first), std::move(parsed.second), {}};
  for (size_t i = 0; i < p.terms.size(); ++i) {
    const Shape& s = node.input_shape(i);
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t& known = p.sizes[p.terms[i][d]];
      if (known > 1 && s[d] > 1 && known != s[d])
        return node.error("index '{}' has sizes {} and {}", p.terms[i][d], known, s[d]);
      known = std::max(known, s[d]);
    }
  }
  for (char c : p.output)
    if (!p.sizes.count(c)) return node.error("output index '{}' is in no input", c);
  return p;
}

// SwiGLU: Swish(a, alpha) * b, a and b of one floating dtype, b broadcast to a.
Status infer_swiglu(InferContext& ctx) {
  if (!is_floating(ctx.input_dtype(0)) || ctx.input_dtype(1) != ctx.input_dtype(0))
    return ctx.error("a and b must have one floating dtype");
  Shape shape;
  if (!broadcast_shapes(ctx.input_shape(0), ctx.input_shape(1), &shape))
    return ctx.error("a {} and b {} do not broadcast", shape_to_string(ctx.input_shape(0)), shape_to_string(ctx.input_shape(1)));
  ctx.set_output(0, ctx.input_dtype(0), std::move(shape));
  return Status::ok();
}

void register_function_ops(std::vector<OpSchema>& ops) {
  ops.push_back({"SwiGLU", infer_swiglu, {}});
  ops.push_back({"Einsum", infer_einsum, {}});
  ops.push_back({"RotaryEmbedding", infer_rotary_embedding, {}});
  ops.push_back({"LpNormalization", infer_lp_normalization, {}});
  ops.push_back({"OneHot", infer_one_hot, {}, {1}});
  ops.push_back({"NegativeLogLikelihoodLoss", infer_loss, {}});
  ops.push_back({"SoftmaxCrossEntropyLoss", infer_loss, {}});
  ops.push_back({"DepthToSpace", infer_shaped<BlockParams, resolve_depth_to_space>, {}});
  ops.push_back({"SpaceToDepth", infer_shaped<BlockParams, resolve_space_to_depth>, {}});
  ops.push_back({"CenterCropPad", infer_shaped<CenterCropPadParams, resolve_center_crop_pad>, {}, {1}});
  ops.push_back({"ReverseSequence", infer_reverse_sequence, {}});
  ops.push_back({"MaxUnpool", infer_shaped<MaxUnpoolParams, resolve_max_unpool>, {}, {2}});
  ops.push_back({"Col2Im", infer_shaped<Col2ImParams, resolve_col2im>, {}, {1, 2}});
  ops.push_back({"DeformConv", infer_shaped<DeformConvParams, resolve_deform_conv>, {}});
  ops.push_back({"MelWeightMatrix", infer_mel_weight_matrix, {3, 4}, {0, 1, 2, 3, 4}});
  ops.push_back({"EyeLike", infer_eye_like, {}});
  ops.push_back({"Hardmax", infer_hardmax, {}});
  ops.push_back({"LRN", infer_lrn, {}});
  ops.push_back({"LpPool", infer_shaped<LpPoolParams, resolve_lp_pool>, {}});
  ops.push_back({"ConvTranspose", infer_shaped<ConvTransposeParams, resolve_conv_transpose>, {}});
  ops.push_back({"DFT", infer_shaped<DftParams, resolve_dft>, {}, {1, 2}});
  ops.push_back({"STFT", infer_shaped<StftParams, resolve_stft>, {}, {1, 3}});
  for (const char* window : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    ops.push_back({window, infer_window_function, {}, {0}});
}

}  // namespace strider
