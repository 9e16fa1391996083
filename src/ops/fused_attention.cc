// FusedAttention: its encoding on the node, validation, and shape function (registered in
// op_registry.cc under the strider domain).
#include "ops/fused_attention.h"

#include <fmt/format.h>

#include <limits>

#include "base/shape.h"
#include "ops/op_registry.h"

namespace strider {

int FusedAttentionParams::step_inputs() const {
  int n = 0;
  for (const ScoreStep& s : steps) n += step_reads_operand(s.kind) ? 1 : 0;
  return n;
}

std::string describe_fused_attention(const FusedAttentionParams& p) {
  std::string s = "q @ kt";
  int operand = kAttnFirstStepInput;
  for (const ScoreStep& step : p.steps) {
    switch (step.kind) {
      case ScoreStepKind::kMul: s = fmt::format("({}) * {}", s, step.value); break;
      case ScoreStepKind::kDiv: s = fmt::format("({}) / {}", s, step.value); break;
      case ScoreStepKind::kAdd: s = fmt::format("({}) + x{}", s, operand++); break;
      case ScoreStepKind::kKeepWhere: s = fmt::format("where(x{}, {}, {})", operand++, s, step.value); break;
      case ScoreStepKind::kFillWhere: s = fmt::format("where(x{}, {}, {})", operand++, step.value, s); break;
    }
  }
  return fmt::format("softmax({}){} @ v{}", s, p.zero_invalid_rows ? " (undefined rows 0)" : "",
                     p.kv_repeat > 1 ? fmt::format(" ({} query heads a key head)", p.kv_repeat) : "");
}

void write_fused_attention(const FusedAttentionParams& p, Node* node) {
  std::vector<int64_t> kinds;
  std::vector<float> values;
  for (const ScoreStep& s : p.steps) {
    kinds.push_back(int64_t(s.kind));
    values.push_back(s.value);
  }
  node->attributes.set_ints("steps", std::move(kinds));
  node->attributes.set_floats("step_values", std::move(values));
  node->attributes.set_int("zero_invalid_rows", p.zero_invalid_rows ? 1 : 0);
  if (p.kv_repeat > 1) node->attributes.set_int("kv_repeat", p.kv_repeat);
  node->attributes.set_string("expression", describe_fused_attention(p));
}

Result<FusedAttentionParams> read_fused_attention(const Node& node) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> kinds, node.attributes.get_ints("steps", {}));
  STRIDER_ASSIGN_OR_RETURN(std::vector<float> values, node.attributes.get_floats("step_values", {}));
  STRIDER_ASSIGN_OR_RETURN(int64_t zero_rows, node.attributes.get_int("zero_invalid_rows", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t kv_repeat, node.attributes.get_int("kv_repeat", 1));
  if (kv_repeat < 1 || kv_repeat > (int64_t(1) << 20))
    return invalid_model(fmt::format("node '{}': kv_repeat {} is not a head count", node.name, kv_repeat));
  if (kinds.size() > size_t(kMaxScoreSteps) || values.size() != kinds.size())
    return invalid_model(fmt::format("node '{}': malformed attention score program ({} steps, {} values)", node.name,
                                     kinds.size(), values.size()));
  FusedAttentionParams p;
  p.zero_invalid_rows = zero_rows != 0;
  p.kv_repeat = kv_repeat;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k] < 0 || kinds[k] >= kScoreStepKinds)
      return invalid_model(fmt::format("node '{}': unknown attention score step {}", node.name, kinds[k]));
    p.steps.push_back({ScoreStepKind(kinds[k]), values[k]});
  }
  const size_t wanted = size_t(kAttnFirstStepInput + p.step_inputs());
  if (node.inputs.size() != wanted)
    return invalid_model(fmt::format("node '{}': FusedAttention has {} inputs, its steps need {}", node.name,
                                     node.inputs.size(), wanted));
  return p;
}

namespace {

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

Status infer_fused_attention(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(FusedAttentionParams p, read_fused_attention(ctx.node()));
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) return ctx.error("input {} is omitted", i);
  const Shape &q = ctx.input_shape(kAttnQ), &kt = ctx.input_shape(kAttnKt), &v = ctx.input_shape(kAttnV);
  if (q.size() < 2 || kt.size() < 2 || v.size() < 2) return ctx.error("Q, Kt and V need rank 2 or more");
  const DType t = ctx.input_dtype(kAttnQ);
  if (!is_floating(t) || ctx.input_dtype(kAttnKt) != t || ctx.input_dtype(kAttnV) != t)
    return ctx.error("Q, Kt and V need one floating dtype");
  if (q.back() != kt[kt.size() - 2] || kt.back() != v[v.size() - 2])
    return ctx.error("Q {}, Kt {} and V {} do not multiply", shape_to_string(q), shape_to_string(kt), shape_to_string(v));
  // Grouped heads: Kt's and V's heads dim counts kv_repeat query heads each.
  Shape kt_batch = batch_of(kt), v_batch = batch_of(v), batch;
  if (p.kv_repeat > 1) {
    if (kt_batch.empty() || v_batch.empty()) return ctx.error("grouped heads (kv_repeat) need Kt and V with a heads dim");
    for (Shape* heads : {&kt_batch, &v_batch}) {
      if (heads->back() < 0 || heads->back() > std::numeric_limits<int64_t>::max() / p.kv_repeat)
        return ctx.error("{} key heads repeated {} times overflow", heads->back(), p.kv_repeat);
      heads->back() *= p.kv_repeat;
    }
  }
  if (!broadcast_shapes(batch_of(q), kt_batch, &batch) || !broadcast_shapes(Shape(batch), v_batch, &batch))
    return ctx.error("the batch dims of Q, Kt and V do not broadcast");
  Shape scores = batch;
  scores.push_back(q[q.size() - 2]);
  scores.push_back(kt.back());
  int input = kAttnFirstStepInput;
  for (const ScoreStep& step : p.steps) {
    if (!step_reads_operand(step.kind)) continue;
    const DType wanted = step.kind == ScoreStepKind::kAdd ? t : DType::kBool;
    Shape joined;
    if (ctx.input_dtype(size_t(input)) != wanted || !broadcast_shapes(scores, ctx.input_shape(size_t(input)), &joined) ||
        joined != scores)
      return ctx.error("step operand {} ({} {}) does not fit the scores {}", input,
                       dtype_name(ctx.input_dtype(size_t(input))), shape_to_string(ctx.input_shape(size_t(input))),
                       shape_to_string(scores));
    ++input;
  }
  Shape out = batch;
  out.push_back(q[q.size() - 2]);
  out.push_back(v.back());
  ctx.set_output(0, t, std::move(out));
  return Status::ok();
}

}  // namespace

OpSchema fused_attention_schema() { return {kFusedAttentionOp, infer_fused_attention, {}, {}, {}}; }

}  // namespace strider
