// RNN, GRU and LSTM in float64, step by step from the ONNX operator definitions: gates in
// W's row order (LSTM i, o, f, c; GRU z, r, h), sequence_lens freezing the state and
// zeroing Y past each entry's length, the reverse direction starting at each entry's last
// step. The runtime unrolls them into MatMuls and gates instead (passes/expand_recurrent.cc).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/checked_math.h"
#include "ops/recurrent.h"
#include "reference/op_support.h"

namespace strider::ref {
namespace {

double activate(const RecurrentActivation& a, double x) {
  if (a.op == "Sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (a.op == "Tanh") return std::tanh(x);
  if (a.op == "Relu") return std::max(x, 0.0);
  if (a.op == "Softsign") return x / (1.0 + std::fabs(x));
  if (a.op == "Softplus") return std::log1p(std::exp(x));
  if (a.op == "LeakyRelu") return x >= 0 ? x : a.alpha * x;
  if (a.op == "ThresholdedRelu") return x > a.alpha ? x : 0.0;
  if (a.op == "Elu") return x >= 0 ? x : a.alpha * (std::exp(x) - 1.0);
  if (a.op == "HardSigmoid") return std::min(1.0, std::max(0.0, a.alpha * x + a.beta));
  if (a.op == "ScaledTanh") return a.alpha * std::tanh(a.beta * x);
  return a.alpha * x + a.beta;  // Affine
}

// The attributes, read here apart from the runtime's ops/recurrent.h so that the oracle
// does not share its reading of them.
Result<RecurrentParams> params_of(const OpContext& ctx, const RefTensor& x, const RefTensor& w) {
  RecurrentParams p;
  const std::string& op = ctx.node().op_type;
  p.cell = op == "LSTM" ? RecurrentCell::kLstm : op == "GRU" ? RecurrentCell::kGru : RecurrentCell::kRnn;
  p.gates = p.cell == RecurrentCell::kLstm ? 4 : p.cell == RecurrentCell::kGru ? 3 : 1;
  const AttributeMap& a = ctx.attributes();
  STRIDER_ASSIGN_OR_RETURN(std::string direction, a.get_string("direction", "forward"));
  p.directions = direction == "bidirectional" ? 2 : 1;
  p.reverse_only = direction == "reverse";
  STRIDER_ASSIGN_OR_RETURN(p.layout, a.get_int("layout", 0));
  if (x.rank() != 3 || w.rank() != 3) return invalid_model("X and W must be 3-D");
  STRIDER_ASSIGN_OR_RETURN(p.hidden, a.get_int("hidden_size", w.shape[1] / p.gates));
  p.steps = x.shape[p.layout == 0 ? 0 : 1];
  p.batch = x.shape[p.layout == 0 ? 1 : 0];
  p.input = x.shape[2];
  p.has_clip = a.has("clip");
  STRIDER_ASSIGN_OR_RETURN(p.clip, a.get_float("clip", 0.0f));
  STRIDER_ASSIGN_OR_RETURN(int64_t input_forget, a.get_int("input_forget", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t lbr, a.get_int("linear_before_reset", 0));
  p.input_forget = p.cell == RecurrentCell::kLstm && input_forget != 0;
  p.linear_before_reset = p.cell == RecurrentCell::kGru && lbr != 0;
  std::vector<std::string> names;
  if (const Attribute* list = a.find("activations")) names = list->strings;
  const int per = p.cell == RecurrentCell::kLstm ? 3 : p.cell == RecurrentCell::kGru ? 2 : 1;
  if (names.empty())
    for (int64_t d = 0; d < p.directions; ++d)
      for (int k = 0; k < per; ++k) names.push_back(k == 0 && p.cell != RecurrentCell::kRnn ? "Sigmoid" : "Tanh");
  if (int64_t(names.size()) != per * p.directions) return invalid_model("wrong number of activations");
  STRIDER_ASSIGN_OR_RETURN(std::vector<float> alphas, a.get_floats("activation_alpha", {}));
  STRIDER_ASSIGN_OR_RETURN(std::vector<float> betas, a.get_floats("activation_beta", {}));
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    RecurrentActivation act{name, 0, 0};
    int takes = 0;
    if (name == "LeakyRelu") act.alpha = 0.01f, takes = 1;
    else if (name == "ThresholdedRelu" || name == "Elu") act.alpha = 1.0f, takes = 1;
    else if (name == "HardSigmoid") act.alpha = 0.2f, act.beta = 0.5f, takes = 2;
    else if (name == "ScaledTanh") act.alpha = 1.0f, act.beta = 1.0f, takes = 2;
    else if (name == "Affine") act.alpha = 1.0f, takes = 2;
    else if (name != "Sigmoid" && name != "Tanh" && name != "Relu" && name != "Softsign" && name != "Softplus")
      return unsupported(fmt::format("activation '{}'", name));
    if (takes >= 1 && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (takes >= 2 && next_beta < betas.size()) act.beta = betas[next_beta++];
    p.activations.push_back(act);
  }
  return p;
}

Result<OpOutputs> recurrent_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* w, ctx.input(1, "W"));
  STRIDER_ASSIGN_OR_RETURN(RecurrentParams p, params_of(ctx, *x, *w));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* r, ctx.input(2, "R"));
  const RefTensor *bias = ctx.optional_input(3), *lens = ctx.optional_input(4), *h0 = ctx.optional_input(5);
  const RefTensor *c0 = p.cell == RecurrentCell::kLstm ? ctx.optional_input(6) : nullptr;
  const RefTensor *peep = p.cell == RecurrentCell::kLstm ? ctx.optional_input(7) : nullptr;
  const int64_t T = p.steps, B = p.batch, I = p.input, H = p.hidden, G = p.gates, D = p.directions;
  const int per = p.cell == RecurrentCell::kLstm ? 3 : p.cell == RecurrentCell::kGru ? 2 : 1;
  // The operands' sizes, as the runtime's shape function checks them (a hostile model must
  // not make the loops below read past them).
  // (The expected counts are multiplied with overflow checks: hidden_size is the model's.)
  auto expect = [](const RefTensor* t, std::initializer_list<int64_t> dims, std::string_view what) -> Status {
    std::optional<int64_t> elements = strider::checked_element_count(std::vector<int64_t>(dims), 1);
    if (t == nullptr || (elements && t->num_elements() == *elements)) return Status::ok();
    return invalid_model(fmt::format("{} has {} elements, not the {} the other operands imply", what,
                                     t ? t->num_elements() : 0, elements ? fmt::format("{}", *elements) : "too many"));
  };
  STRIDER_RETURN_IF_ERROR(expect(w, {D, G, H, I}, "W"));
  STRIDER_RETURN_IF_ERROR(expect(r, {D, G, H, H}, "R"));
  STRIDER_RETURN_IF_ERROR(expect(bias, {D, 2, G, H}, "B"));
  STRIDER_RETURN_IF_ERROR(expect(lens, {B}, "sequence_lens"));
  STRIDER_RETURN_IF_ERROR(expect(h0, {D, B, H}, "initial_h"));
  STRIDER_RETURN_IF_ERROR(expect(c0, {D, B, H}, "initial_c"));
  STRIDER_RETURN_IF_ERROR(expect(peep, {D, 3, H}, "P"));
  if (lens && lens->is_floating()) return invalid_model("sequence_lens must be integer");
  for (const RefTensor* t : {x, w, r, bias, h0, c0, peep})
    if (t && !t->is_floating()) return invalid_model("X, W, R, B, initial_h, initial_c and P must be floating");
  auto xs = [&](int64_t t, int64_t b, int64_t i) { return x->floats[size_t(p.layout == 0 ? (t * B + b) * I + i : (b * T + t) * I + i)]; };
  auto state_at = [&](int64_t d, int64_t b, int64_t j) { return size_t(p.layout == 0 ? (d * B + b) * H + j : (b * D + d) * H + j); };
  RefTensor y = RefTensor::zeros(x->dtype, p.layout == 0 ? Shape{T, D, B, H} : Shape{B, T, D, H});
  RefTensor yh = RefTensor::zeros(x->dtype, p.layout == 0 ? Shape{D, B, H} : Shape{B, D, H}), yc = yh;
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = p.reverse_only || d == 1;
    auto act = [&](int k, double v) {
      if (p.has_clip) v = std::min(std::max(v, -double(p.clip)), double(p.clip));
      return activate(p.activations[size_t(d * per + k)], v);
    };
    for (int64_t b = 0; b < B; ++b) {
      // A length past the sequence runs it whole, a negative one not at all, as the
      // runtime's step masks do (ONNX requires lengths in [0, T]).
      const int64_t len = lens ? std::clamp<int64_t>(lens->ints[size_t(b)], 0, T) : T;
      std::vector<double> h(static_cast<size_t>(H), 0.0), c(static_cast<size_t>(H), 0.0);
      for (int64_t j = 0; j < H; ++j) {
        if (h0) h[size_t(j)] = h0->floats[state_at(d, b, j)];
        if (c0) c[size_t(j)] = c0->floats[state_at(d, b, j)];
      }
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reverse ? len - 1 - s : s;
        // gate g row j: x W^T + Wb, and h R^T + Rb, kept apart (GRU's h gate needs them so)
        auto input_part = [&](int64_t g, int64_t j) {
          double v = bias ? bias->floats[size_t(d * 2 * G * H + g * H + j)] : 0.0;
          for (int64_t i = 0; i < I; ++i) v += xs(t, b, i) * w->floats[size_t((d * G * H + g * H + j) * I + i)];
          return v;
        };
        auto state_part = [&](int64_t g, int64_t j, const std::vector<double>& state) {
          double v = bias ? bias->floats[size_t(d * 2 * G * H + (G + g) * H + j)] : 0.0;
          for (int64_t k = 0; k < H; ++k) v += state[size_t(k)] * r->floats[size_t((d * G * H + g * H + j) * H + k)];
          return v;
        };
        std::vector<double> next(static_cast<size_t>(H)), next_c = c;
        if (p.cell == RecurrentCell::kRnn) {
          for (int64_t j = 0; j < H; ++j) next[size_t(j)] = act(0, input_part(0, j) + state_part(0, j, h));
        } else if (p.cell == RecurrentCell::kGru) {
          std::vector<double> z(static_cast<size_t>(H)), rr(static_cast<size_t>(H)), rh(static_cast<size_t>(H));
          for (int64_t j = 0; j < H; ++j) {
            z[size_t(j)] = act(0, input_part(0, j) + state_part(0, j, h));
            rr[size_t(j)] = act(0, input_part(1, j) + state_part(1, j, h));
            rh[size_t(j)] = rr[size_t(j)] * h[size_t(j)];
          }
          for (int64_t j = 0; j < H; ++j) {
            const double recurrent = p.linear_before_reset ? rr[size_t(j)] * state_part(2, j, h) : state_part(2, j, rh);
            const double candidate = act(1, input_part(2, j) + recurrent);
            next[size_t(j)] = (1 - z[size_t(j)]) * candidate + z[size_t(j)] * h[size_t(j)];
          }
        } else {
          auto pp = [&](int64_t k, int64_t j) { return peep ? peep->floats[size_t(d * 3 * H + k * H + j)] : 0.0; };
          for (int64_t j = 0; j < H; ++j) {
            const double i_gate = act(0, input_part(0, j) + state_part(0, j, h) + pp(0, j) * c[size_t(j)]);
            const double f_gate = p.input_forget ? 1 - i_gate : act(0, input_part(2, j) + state_part(2, j, h) + pp(2, j) * c[size_t(j)]);
            const double candidate = act(1, input_part(3, j) + state_part(3, j, h));
            next_c[size_t(j)] = f_gate * c[size_t(j)] + i_gate * candidate;
            const double o_gate = act(0, input_part(1, j) + state_part(1, j, h) + pp(1, j) * next_c[size_t(j)]);
            next[size_t(j)] = o_gate * act(2, next_c[size_t(j)]);
          }
        }
        h = next;
        c = next_c;
        for (int64_t j = 0; j < H; ++j)
          y.floats[size_t(p.layout == 0 ? ((t * D + d) * B + b) * H + j : ((b * T + t) * D + d) * H + j)] = h[size_t(j)];
      }
      for (int64_t j = 0; j < H; ++j) {
        yh.floats[state_at(d, b, j)] = h[size_t(j)];
        yc.floats[state_at(d, b, j)] = c[size_t(j)];
      }
    }
  }
  return OpOutputs{std::move(y), std::move(yh), std::move(yc)};
}

constexpr OpDefinition kRecurrentOps[] = {
    {"RNN", 7, 27, recurrent_op},
    {"GRU", 7, 27, recurrent_op},
    {"LSTM", 7, 27, recurrent_op},
};

}  // namespace

std::span<const OpDefinition> recurrent_op_definitions() { return kRecurrentOps; }

}  // namespace strider::ref
