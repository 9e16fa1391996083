// RNN, GRU and LSTM unrolled over their static sequence length (ops/recurrent.h has their
// meaning): one MatMul of every step's input with W^T (and the biases) up front, then per
// step a MatMul of the hidden state with R^T and the cell's elementwise gates, which the
// fusion pass folds into a few kernels. With sequence_lens a step past a batch entry's
// length keeps its state and outputs zeros; the reverse direction runs over each entry's
// sequence reversed within its length.
#include <fmt/format.h>

#include <limits>

#include "base/onnx_types.h"
#include "ops/recurrent.h"
#include "passes/body_writer.h"

namespace strider::expansion {
namespace {

class Unroller {
 public:
  Unroller(BodyWriter& w, const Graph& g, const Node& node, RecurrentParams p)
      : w_(w), node_(node), p_(std::move(p)), t_(g.value(node.inputs[0]).dtype) {}

  Status run();

 private:
  Result<ValueId> scalar(float v) { return w_.floats(t_, {}, {v}); }
  Result<ValueId> slice(ValueId x, int64_t axis, int64_t start, int64_t end) {
    STRIDER_ASSIGN_OR_RETURN(ValueId s, w_.ints({start}));
    STRIDER_ASSIGN_OR_RETURN(ValueId e, w_.ints({end}));
    STRIDER_ASSIGN_OR_RETURN(ValueId a, w_.ints({axis}));
    return w_.op("Slice", {x, s, e, a});
  }
  Result<ValueId> take(ValueId x, int64_t index) {  // x[index] along axis 0, that axis dropped
    STRIDER_ASSIGN_OR_RETURN(ValueId i, w_.constant(Tensor::from_values<int64_t>(DType::kI64, {}, std::vector<int64_t>{index})));
    return w_.op("Gather", {x, i}, int_attr("axis", 0));
  }
  Result<ValueId> unsqueeze(ValueId x, int64_t axis) {
    STRIDER_ASSIGN_OR_RETURN(ValueId a, w_.ints({axis}));
    return w_.op("Unsqueeze", {x, a});
  }
  Result<ValueId> gate(ValueId gates, int64_t k) { return slice(gates, 1, k * p_.hidden, (k + 1) * p_.hidden); }
  Result<ValueId> activate(int64_t direction, int k, ValueId x);
  Result<ValueId> reversed_in_time(ValueId x);  // [T, B, ...]: each entry's steps reversed
  Result<ValueId> masked(ValueId step_mask, ValueId fresh, ValueId kept) {
    if (step_mask == kNoValue) return fresh;
    return w_.op("Where", {step_mask, fresh, kept});
  }
  Status direction(int64_t d, ValueId x, std::vector<ValueId>& ys, std::vector<ValueId>& hs, std::vector<ValueId>& cs);
  Result<ValueId> initial_state(size_t input, int64_t d);
  Result<ValueId> step(int64_t d, ValueId xw, ValueId rt, ValueId h, ValueId* c, const std::vector<ValueId>& extras);

  BodyWriter& w_;
  const Node& node_;
  RecurrentParams p_;
  DType t_;
  ValueId lengths_ = kNoValue;  // [B, 1] int64
};

Result<ValueId> Unroller::activate(int64_t direction, int k, ValueId x) {
  const int per = p_.cell == RecurrentCell::kLstm ? 3 : p_.cell == RecurrentCell::kGru ? 2 : 1;
  const RecurrentActivation& a = p_.activations[size_t(direction * per + k)];
  if (p_.has_clip) {
    STRIDER_ASSIGN_OR_RETURN(ValueId low, scalar(-p_.clip));
    STRIDER_ASSIGN_OR_RETURN(ValueId high, scalar(p_.clip));
    STRIDER_ASSIGN_OR_RETURN(x, w_.op("Clip", {x, low, high}));
  }
  AttributeMap attributes;
  if (a.op == "LeakyRelu" || a.op == "ThresholdedRelu" || a.op == "Elu") attributes.set_float("alpha", a.alpha);
  if (a.op == "HardSigmoid") attributes.set_float("alpha", a.alpha), attributes.set_float("beta", a.beta);
  if (a.op == "ScaledTanh" || a.op == "Affine") {  // alpha tanh(beta x), alpha x + beta
    STRIDER_ASSIGN_OR_RETURN(ValueId alpha, scalar(a.alpha));
    STRIDER_ASSIGN_OR_RETURN(ValueId beta, scalar(a.beta));
    if (a.op == "Affine") {
      STRIDER_ASSIGN_OR_RETURN(ValueId scaled, w_.op("Mul", {x, alpha}));
      return w_.op("Add", {scaled, beta});
    }
    STRIDER_ASSIGN_OR_RETURN(ValueId inner, w_.op("Mul", {x, beta}));
    STRIDER_ASSIGN_OR_RETURN(ValueId tanh, w_.op("Tanh", {inner}));
    return w_.op("Mul", {tanh, alpha});
  }
  return w_.op(a.op, {x}, attributes);
}

// index[t, b] = t < len[b] ? len[b] - 1 - t : t (all steps reversed without lengths).
Result<ValueId> Unroller::reversed_in_time(ValueId x) {
  if (lengths_ == kNoValue) {
    STRIDER_ASSIGN_OR_RETURN(ValueId s, w_.ints({-1}));
    STRIDER_ASSIGN_OR_RETURN(ValueId e, w_.ints({std::numeric_limits<int64_t>::min()}));
    STRIDER_ASSIGN_OR_RETURN(ValueId a, w_.ints({0}));
    STRIDER_ASSIGN_OR_RETURN(ValueId step, w_.ints({-1}));
    return w_.op("Slice", {x, s, e, a, step});
  }
  std::vector<int64_t> times(static_cast<size_t>(p_.steps));
  for (int64_t i = 0; i < p_.steps; ++i) times[size_t(i)] = i;
  STRIDER_ASSIGN_OR_RETURN(ValueId t, w_.constant(Tensor::from_values<int64_t>(DType::kI64, {p_.steps, 1, 1}, times)));
  STRIDER_ASSIGN_OR_RETURN(ValueId lens, unsqueeze(lengths_, 0));  // [1, B, 1]
  STRIDER_ASSIGN_OR_RETURN(ValueId one, w_.ints({1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId last, w_.op("Sub", {lens, one}));
  STRIDER_ASSIGN_OR_RETURN(ValueId back, w_.op("Sub", {last, t}));
  STRIDER_ASSIGN_OR_RETURN(ValueId inside, w_.op("Less", {t, lens}));
  STRIDER_ASSIGN_OR_RETURN(ValueId index, w_.op("Where", {inside, back, t}));
  STRIDER_ASSIGN_OR_RETURN(ValueId shape, w_.op("Shape", {x}));
  STRIDER_ASSIGN_OR_RETURN(index, w_.op("Expand", {index, shape}));
  return w_.op("GatherElements", {x, index}, int_attr("axis", 0));
}

// The node's initial state (input 5 or 6) of direction d as [B, H], or zeros.
Result<ValueId> Unroller::initial_state(size_t input, int64_t d) {
  if (node_.input(input) == kNoValue) return w_.floats(t_, {p_.batch, p_.hidden}, std::vector<float>(size_t(p_.batch * p_.hidden), 0.0f));
  ValueId s = node_.inputs[input];
  if (p_.layout == 1) {
    STRIDER_ASSIGN_OR_RETURN(s, w_.op("Transpose", {s}, ints_attr("perm", {1, 0, 2})));
  }
  return take(s, d);
}

// One step: the new hidden state from this step's x W^T + biases (`xw`, [B, G*H]) and the
// last state `h`; an LSTM's cell state `c` is updated in place. extras: LSTM's peepholes
// (i, o, f), or GRU's h rows of R^T and recurrence bias.
Result<ValueId> Unroller::step(int64_t d, ValueId xw, ValueId rt, ValueId h, ValueId* c, const std::vector<ValueId>& extras) {
  STRIDER_ASSIGN_OR_RETURN(ValueId hr, w_.op("MatMul", {h, rt}));
  STRIDER_ASSIGN_OR_RETURN(ValueId gates, w_.op("Add", {xw, hr}));
  if (p_.cell == RecurrentCell::kRnn) return activate(d, 0, gates);
  STRIDER_ASSIGN_OR_RETURN(ValueId one, scalar(1.0f));
  if (p_.cell == RecurrentCell::kGru) {
    STRIDER_ASSIGN_OR_RETURN(ValueId gz, gate(gates, 0));
    STRIDER_ASSIGN_OR_RETURN(ValueId gr, gate(gates, 1));
    STRIDER_ASSIGN_OR_RETURN(ValueId z, activate(d, 0, gz));
    STRIDER_ASSIGN_OR_RETURN(ValueId r, activate(d, 0, gr));
    STRIDER_ASSIGN_OR_RETURN(ValueId xh, gate(xw, 2));
    ValueId recurrent = kNoValue;
    if (p_.linear_before_reset) {  // r (h Rh^T + Rbh)
      STRIDER_ASSIGN_OR_RETURN(ValueId hh, gate(hr, 2));
      STRIDER_ASSIGN_OR_RETURN(hh, w_.op("Add", {hh, extras[1]}));
      STRIDER_ASSIGN_OR_RETURN(recurrent, w_.op("Mul", {r, hh}));
    } else {  // (r h) Rh^T, Rbh already in xw
      STRIDER_ASSIGN_OR_RETURN(ValueId rh, w_.op("Mul", {r, h}));
      STRIDER_ASSIGN_OR_RETURN(recurrent, w_.op("MatMul", {rh, extras[0]}));
    }
    STRIDER_ASSIGN_OR_RETURN(ValueId sum, w_.op("Add", {xh, recurrent}));
    STRIDER_ASSIGN_OR_RETURN(ValueId candidate, activate(d, 1, sum));
    STRIDER_ASSIGN_OR_RETURN(ValueId keep, w_.op("Sub", {one, z}));
    STRIDER_ASSIGN_OR_RETURN(ValueId fresh, w_.op("Mul", {keep, candidate}));
    STRIDER_ASSIGN_OR_RETURN(ValueId old, w_.op("Mul", {z, h}));
    return w_.op("Add", {fresh, old});
  }
  // LSTM: gates i, o, f, c.
  auto peephole = [&](ValueId g, size_t k, ValueId state) -> Result<ValueId> {
    if (extras.empty()) return g;
    STRIDER_ASSIGN_OR_RETURN(ValueId term, w_.op("Mul", {extras[k], state}));
    return w_.op("Add", {g, term});
  };
  STRIDER_ASSIGN_OR_RETURN(ValueId gi, gate(gates, 0));
  STRIDER_ASSIGN_OR_RETURN(ValueId go, gate(gates, 1));
  STRIDER_ASSIGN_OR_RETURN(ValueId gf, gate(gates, 2));
  STRIDER_ASSIGN_OR_RETURN(ValueId gc, gate(gates, 3));
  STRIDER_ASSIGN_OR_RETURN(gi, peephole(gi, 0, *c));
  STRIDER_ASSIGN_OR_RETURN(ValueId i, activate(d, 0, gi));
  ValueId f = kNoValue;
  if (p_.input_forget) {
    STRIDER_ASSIGN_OR_RETURN(f, w_.op("Sub", {one, i}));
  } else {
    STRIDER_ASSIGN_OR_RETURN(gf, peephole(gf, 2, *c));
    STRIDER_ASSIGN_OR_RETURN(f, activate(d, 0, gf));
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId candidate, activate(d, 1, gc));
  STRIDER_ASSIGN_OR_RETURN(ValueId kept, w_.op("Mul", {f, *c}));
  STRIDER_ASSIGN_OR_RETURN(ValueId added, w_.op("Mul", {i, candidate}));
  STRIDER_ASSIGN_OR_RETURN(*c, w_.op("Add", {kept, added}));
  STRIDER_ASSIGN_OR_RETURN(go, peephole(go, 1, *c));
  STRIDER_ASSIGN_OR_RETURN(ValueId o, activate(d, 0, go));
  STRIDER_ASSIGN_OR_RETURN(ValueId squashed, activate(d, 2, *c));
  return w_.op("Mul", {o, squashed});
}

Status Unroller::direction(int64_t d, ValueId x, std::vector<ValueId>& ys, std::vector<ValueId>& hs, std::vector<ValueId>& cs) {
  const bool reverse = p_.reverse_only || d == 1;
  const int64_t rows = p_.gates * p_.hidden;
  STRIDER_ASSIGN_OR_RETURN(ValueId wd, take(node_.inputs[1], d));
  STRIDER_ASSIGN_OR_RETURN(ValueId wt, w_.op("Transpose", {wd}, ints_attr("perm", {1, 0})));
  STRIDER_ASSIGN_OR_RETURN(ValueId rd, take(node_.inputs[2], d));
  STRIDER_ASSIGN_OR_RETURN(ValueId rt, w_.op("Transpose", {rd}, ints_attr("perm", {1, 0})));
  if (reverse) {
    STRIDER_ASSIGN_OR_RETURN(x, reversed_in_time(x));
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId xw, w_.op("MatMul", {x, wt}));  // [T, B, G*H]
  std::vector<ValueId> extras;
  if (p_.has_bias) {
    STRIDER_ASSIGN_OR_RETURN(ValueId bd, take(node_.inputs[3], d));
    STRIDER_ASSIGN_OR_RETURN(ValueId wb, slice(bd, 0, 0, rows));
    STRIDER_ASSIGN_OR_RETURN(ValueId rb, slice(bd, 0, rows, 2 * rows));
    if (p_.cell == RecurrentCell::kGru && p_.linear_before_reset) {  // Rbh goes inside r (...)
      STRIDER_ASSIGN_OR_RETURN(ValueId rbh, slice(rb, 0, 2 * p_.hidden, rows));
      STRIDER_ASSIGN_OR_RETURN(ValueId rb_zr, slice(rb, 0, 0, 2 * p_.hidden));
      STRIDER_ASSIGN_OR_RETURN(ValueId zeros, w_.floats(t_, {p_.hidden}, std::vector<float>(size_t(p_.hidden), 0.0f)));
      STRIDER_ASSIGN_OR_RETURN(rb, w_.op("Concat", {rb_zr, zeros}, int_attr("axis", 0)));
      extras = {kNoValue, rbh};
    }
    STRIDER_ASSIGN_OR_RETURN(ValueId bias, w_.op("Add", {wb, rb}));
    STRIDER_ASSIGN_OR_RETURN(xw, w_.op("Add", {xw, bias}));
  }
  if (p_.cell == RecurrentCell::kGru) {
    if (extras.empty()) {
      STRIDER_ASSIGN_OR_RETURN(ValueId zeros, w_.floats(t_, {p_.hidden}, std::vector<float>(size_t(p_.hidden), 0.0f)));
      extras = {kNoValue, zeros};
    }
    STRIDER_ASSIGN_OR_RETURN(extras[0], slice(rt, 1, 2 * p_.hidden, rows));  // Rh^T
  }
  if (p_.cell == RecurrentCell::kLstm && p_.has_peepholes) {
    STRIDER_ASSIGN_OR_RETURN(ValueId pd, take(node_.inputs[7], d));
    for (int64_t k = 0; k < 3; ++k) {
      STRIDER_ASSIGN_OR_RETURN(ValueId pk, slice(pd, 0, k * p_.hidden, (k + 1) * p_.hidden));
      extras.push_back(pk);
    }
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId h, initial_state(5, d));
  ValueId c = kNoValue;
  if (p_.cell == RecurrentCell::kLstm) {
    STRIDER_ASSIGN_OR_RETURN(c, initial_state(6, d));
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId zero, w_.floats(t_, {p_.batch, p_.hidden}, std::vector<float>(size_t(p_.batch * p_.hidden), 0.0f)));
  std::vector<ValueId> steps;
  for (int64_t s = 0; s < p_.steps; ++s) {
    STRIDER_ASSIGN_OR_RETURN(ValueId xw_s, take(xw, s));
    ValueId new_c = c;
    STRIDER_ASSIGN_OR_RETURN(ValueId new_h, step(d, xw_s, rt, h, &new_c, extras));
    ValueId inside = kNoValue;  // [B, 1]: this step is within the entry's length
    if (lengths_ != kNoValue) {
      STRIDER_ASSIGN_OR_RETURN(ValueId at, w_.ints({s}));
      STRIDER_ASSIGN_OR_RETURN(inside, w_.op("Less", {at, lengths_}));
    }
    STRIDER_ASSIGN_OR_RETURN(ValueId y, masked(inside, new_h, zero));
    STRIDER_ASSIGN_OR_RETURN(h, masked(inside, new_h, h));
    if (c != kNoValue) {
      STRIDER_ASSIGN_OR_RETURN(c, masked(inside, new_c, c));
    }
    STRIDER_ASSIGN_OR_RETURN(y, unsqueeze(y, 0));
    steps.push_back(y);
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId y, steps.size() == 1 ? w_.op("Identity", {steps[0]}) : w_.op("Concat", steps, int_attr("axis", 0)));
  if (reverse) {
    STRIDER_ASSIGN_OR_RETURN(y, reversed_in_time(y));
  }
  STRIDER_ASSIGN_OR_RETURN(y, unsqueeze(y, 1));  // [T, 1, B, H]
  ys.push_back(y);
  STRIDER_ASSIGN_OR_RETURN(h, unsqueeze(h, 0));
  hs.push_back(h);
  if (c != kNoValue) {
    STRIDER_ASSIGN_OR_RETURN(c, unsqueeze(c, 0));
    cs.push_back(c);
  }
  return Status::ok();
}

Status Unroller::run() {
  ValueId x = node_.inputs[0];
  if (p_.layout == 1) {
    STRIDER_ASSIGN_OR_RETURN(x, w_.op("Transpose", {x}, ints_attr("perm", {1, 0, 2})));
  }
  if (p_.has_lengths) {
    STRIDER_ASSIGN_OR_RETURN(ValueId lens, w_.op("Cast", {node_.inputs[4]}, int_attr("to", onnx_type_code(DType::kI64))));
    STRIDER_ASSIGN_OR_RETURN(lengths_, unsqueeze(lens, 1));
  }
  std::vector<ValueId> ys, hs, cs;
  for (int64_t d = 0; d < p_.directions; ++d) STRIDER_RETURN_IF_ERROR(direction(d, x, ys, hs, cs));
  auto join = [&](const std::vector<ValueId>& parts, int64_t axis, std::vector<int64_t> layout1_perm, size_t output) -> Status {
    if (output >= node_.outputs.size() || node_.outputs[output] == kNoValue) return Status::ok();
    STRIDER_ASSIGN_OR_RETURN(ValueId all, parts.size() == 1 ? w_.op("Identity", {parts[0]}) : w_.op("Concat", parts, int_attr("axis", axis)));
    if (p_.layout == 0) return w_.op("Identity", {all}, {}, node_.outputs[output]).status();
    return w_.op("Transpose", {all}, ints_attr("perm", std::move(layout1_perm)), node_.outputs[output]).status();
  };
  STRIDER_RETURN_IF_ERROR(join(ys, 1, {2, 0, 1, 3}, 0));
  STRIDER_RETURN_IF_ERROR(join(hs, 0, {1, 0, 2}, 1));
  return join(cs, 0, {1, 0, 2}, 2);
}

}  // namespace

Status expand_recurrent(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(RecurrentParams p, resolve_recurrent(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  w.at_least_opset(13);  // Slice, Unsqueeze and Split with their inputs
  STRIDER_RETURN_IF_ERROR(w.reserve(p.steps * p.batch * p.hidden * p.directions * 4, g.value(node.inputs[0]).dtype, "the unrolled steps"));
  return Unroller(w, g, node, std::move(p)).run();
}

}  // namespace strider::expansion
