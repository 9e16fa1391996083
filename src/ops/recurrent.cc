#include "ops/recurrent.h"

#include <fmt/format.h>

#include "strider/printable.h"

namespace strider {
namespace {

// The alpha and beta an activation takes when the model gives none (ONNX's defaults), and
// whether it takes them at all.
struct ActivationDefaults {
  std::string_view op;
  int takes;  // 0, 1 (alpha) or 2 (alpha, beta)
  float alpha, beta;
};
constexpr ActivationDefaults kActivations[] = {
    {"Sigmoid", 0, 0, 0},         {"Tanh", 0, 0, 0},         {"Relu", 0, 0, 0},           {"Softsign", 0, 0, 0},
    {"Softplus", 0, 0, 0},        {"LeakyRelu", 1, 0.01f, 0}, {"ThresholdedRelu", 1, 1.0f, 0}, {"Elu", 1, 1.0f, 0},
    {"HardSigmoid", 2, 0.2f, 0.5f}, {"ScaledTanh", 2, 1.0f, 1.0f}, {"Affine", 2, 1.0f, 0.0f},
};

Status resolve_activations(const NodeInputs& node, RecurrentParams& p) {
  const int per_direction = p.cell == RecurrentCell::kLstm ? 3 : p.cell == RecurrentCell::kGru ? 2 : 1;
  std::vector<std::string> names;
  if (const Attribute* a = node.attributes().find("activations")) {
    if (a->kind != Attribute::Kind::kStrings) return node.error("activations must be strings");
    names = a->strings;
  } else {
    const std::vector<std::string> defaults = p.cell == RecurrentCell::kLstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                              : p.cell == RecurrentCell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                              : std::vector<std::string>{"Tanh"};
    for (int64_t d = 0; d < p.directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  if (int64_t(names.size()) != per_direction * p.directions)
    return node.error("{} activations for {} direction(s); {} takes {} each", names.size(), p.directions, node.node().op_type,
                      per_direction);
  STRIDER_ASSIGN_OR_RETURN(std::vector<float> alphas, node.attributes().get_floats("activation_alpha", {}));
  STRIDER_ASSIGN_OR_RETURN(std::vector<float> betas, node.attributes().get_floats("activation_beta", {}));
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const ActivationDefaults* known = nullptr;
    for (const ActivationDefaults& a : kActivations)
      if (a.op == name) known = &a;
    if (!known) return unsupported(fmt::format("activation '{}'", printable(name)));
    RecurrentActivation act{name, known->alpha, known->beta};
    if (known->takes >= 1 && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (known->takes >= 2 && next_beta < betas.size()) act.beta = betas[next_beta++];
    p.activations.push_back(act);
  }
  return Status::ok();
}

// Input i, when present, must have `shape`.
Status expect_shape(const NodeInputs& node, size_t i, const Shape& shape, std::string_view name) {
  if (node.has_input(i) && node.input_shape(i) != shape)
    return node.error("{} is {}, expected {}", name, shape_to_string(node.input_shape(i)), shape_to_string(shape));
  return Status::ok();
}

Status infer_recurrent(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(RecurrentParams p, resolve_recurrent(ctx));
  const DType t = ctx.input_dtype(0);
  const Shape y = p.layout == 0 ? Shape{p.steps, p.directions, p.batch, p.hidden} : Shape{p.batch, p.steps, p.directions, p.hidden};
  const Shape state = p.layout == 0 ? Shape{p.directions, p.batch, p.hidden} : Shape{p.batch, p.directions, p.hidden};
  if (ctx.has_output(0)) ctx.set_output(0, t, y);
  if (ctx.has_output(1)) ctx.set_output(1, t, state);
  if (ctx.has_output(2)) ctx.set_output(2, t, state);
  return Status::ok();
}

}  // namespace

Result<RecurrentParams> resolve_recurrent(const NodeInputs& node) {
  RecurrentParams p;
  const std::string& op = node.node().op_type;
  p.cell = op == "LSTM" ? RecurrentCell::kLstm : op == "GRU" ? RecurrentCell::kGru : RecurrentCell::kRnn;
  p.gates = p.cell == RecurrentCell::kLstm ? 4 : p.cell == RecurrentCell::kGru ? 3 : 1;
  if (!is_floating(node.input_dtype(0))) return node.error("X must be floating");
  STRIDER_ASSIGN_OR_RETURN(std::string direction, node.attributes().get_string("direction", "forward"));
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return node.error("direction '{}' is not forward, reverse or bidirectional", printable(direction));
  p.directions = direction == "bidirectional" ? 2 : 1;
  p.reverse_only = direction == "reverse";
  STRIDER_ASSIGN_OR_RETURN(p.hidden, node.attributes().get_int("hidden_size", 0));
  STRIDER_ASSIGN_OR_RETURN(p.layout, node.attributes().get_int("layout", 0));
  if (p.layout != 0 && p.layout != 1) return node.error("layout {} is not 0 or 1", p.layout);
  const Shape& x = node.input_shape(0);
  if (x.size() != 3) return node.error("X {} must be 3-D", shape_to_string(x));
  p.steps = p.layout == 0 ? x[0] : x[1];
  p.batch = p.layout == 0 ? x[1] : x[0];
  p.input = x[2];
  const Shape& w = node.input_shape(1);
  if (p.hidden <= 0 && w.size() == 3) p.hidden = w[1] / p.gates;
  // Bounded like every size (2^52), so that gates x hidden and its double cannot overflow.
  if (p.hidden <= 0 || p.hidden > (int64_t(1) << 52)) return node.error("hidden_size {} is not in [1, 2^52]", p.hidden);
  const int64_t rows = p.gates * p.hidden;
  STRIDER_RETURN_IF_ERROR(expect_shape(node, 1, {p.directions, rows, p.input}, "W"));
  STRIDER_RETURN_IF_ERROR(expect_shape(node, 2, {p.directions, rows, p.hidden}, "R"));
  STRIDER_RETURN_IF_ERROR(expect_shape(node, 3, {p.directions, 2 * rows}, "B"));
  STRIDER_RETURN_IF_ERROR(expect_shape(node, 4, {p.batch}, "sequence_lens"));
  const Shape state = p.layout == 0 ? Shape{p.directions, p.batch, p.hidden} : Shape{p.batch, p.directions, p.hidden};
  STRIDER_RETURN_IF_ERROR(expect_shape(node, 5, state, "initial_h"));
  p.has_bias = node.has_input(3);
  p.has_lengths = node.has_input(4);
  p.has_initial_h = node.has_input(5);
  if (p.has_lengths && !is_integral(node.input_dtype(4))) return node.error("sequence_lens must be integers");
  for (size_t i : {size_t(1), size_t(2), size_t(3), size_t(5)})
    if (node.has_input(i) && node.input_dtype(i) != node.input_dtype(0)) return node.error("input {} differs from X in dtype", i);
  if (p.cell == RecurrentCell::kLstm) {
    STRIDER_RETURN_IF_ERROR(expect_shape(node, 6, state, "initial_c"));
    STRIDER_RETURN_IF_ERROR(expect_shape(node, 7, {p.directions, 3 * p.hidden}, "P"));
    p.has_initial_c = node.has_input(6);
    p.has_peepholes = node.has_input(7);
    STRIDER_ASSIGN_OR_RETURN(int64_t input_forget, node.attributes().get_int("input_forget", 0));
    p.input_forget = input_forget != 0;
  }
  if (p.cell == RecurrentCell::kGru) {
    STRIDER_ASSIGN_OR_RETURN(int64_t lbr, node.attributes().get_int("linear_before_reset", 0));
    p.linear_before_reset = lbr != 0;
  }
  p.has_clip = node.attributes().has("clip");
  STRIDER_ASSIGN_OR_RETURN(p.clip, node.attributes().get_float("clip", 0.0f));
  if (p.has_clip && !(p.clip > 0)) return node.error("clip {} must be positive", p.clip);
  STRIDER_RETURN_IF_ERROR(resolve_activations(node, p));
  return p;
}

void register_recurrent_ops(std::vector<OpSchema>& ops) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) ops.push_back({op, infer_recurrent, {}});
}

}  // namespace strider
