#include "ops/function_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

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

}  // namespace

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
}

}  // namespace strider
