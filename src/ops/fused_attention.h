// FusedAttention (domain "strider"): softmax(scores(Q @ Kt)) @ V as one node, for the
// attention patterns that the fusion pass (passes/fuse_attention.h) finds: the unfused form
// torch exports (MatMul, Div or Mul by a scale, a mask added or filled in with Where,
// Softmax, MatMul) and the body that Attention-23 expands to. The [.., Sq, T] scores and
// probabilities are never stored.
//
//   inputs: Q [.., Sq, D], Kt [.., D, T], V [.., T, Dv], then one operand per step that
//           reads one (a bias, or a condition), each broadcastable to [.., Sq, T];
//   output: [.., Sq, Dv]; the batch dims (..) of Q, Kt and V broadcast as MatMul's do.
//
// Grouped-query attention: with kv_repeat = r > 1 each head of Kt and V (their dim -3)
// serves r consecutive heads of Q (query head h reads key head h / r): the pass absorbs
// torch's repeat_kv (Unsqueeze, Expand, Reshape, whose Reshape is a copy: the Expand's
// stride 0 does not merge), so the keys and values are read in place.
//
// Kt is the keys already transposed, as the graph's MatMul reads it (a Transpose view of
// K): a kernel reads it through its strides, so nothing is copied to transpose it.
//
// Each score starts as the dot product q_i . kt_j (f32 accumulation for every storage type)
// and goes through the steps in order (ScoreStep), then a softmax over j in f32, then the
// weighted sum of V's rows. A row whose softmax is undefined (every score -inf, or a NaN
// or +inf among them, where the unfused softmax gives NaN everywhere) gives NaN, or 0 when
// the pattern guarded it (Where(IsNaN(p), 0, p), Attention's fully masked rows).
//
// On the node: `steps` (ScoreStepKind codes), `step_values` (one float per step),
// `zero_invalid_rows` and `kv_repeat` (1 where absent); `nodes` names what was fused, `expression` spells it out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ops/attention_math.h"
#include "strider/status.h"

namespace strider {

inline constexpr std::string_view kFusedAttentionOp = "FusedAttention";

// The fixed operands before the steps' own.
enum FusedAttentionInput : int { kAttnQ = 0, kAttnKt = 1, kAttnV = 2, kAttnFirstStepInput = 3 };

struct FusedAttentionParams {
  std::vector<ScoreStep> steps;  // at most kMaxScoreSteps
  bool zero_invalid_rows = false;
  int64_t kv_repeat = 1;  // query heads per head of Kt and V (grouped-query attention)
  // The step reading node input kAttnFirstStepInput + k is the k-th step that reads one.
  int step_inputs() const;
};

// The sizes of one attention a device weighs before it is fused (Device::fuses_attention):
// `batch` is every dim of the output before its last two (batch elements times heads).
struct AttentionShape {
  DType dtype = DType::kF32;
  int64_t batch = 1, q_len = 0, keys = 0, head = 0, v_head = 0;
};

// "softmax(((q @ kt) / 0.125) + x3) @ v" for inspect and errors.
std::string describe_fused_attention(const FusedAttentionParams& p);

// Writes the params' attributes on `node`; reads and validates them (step kinds, counts,
// the node's inputs matching the steps), naming what is wrong.
void write_fused_attention(const FusedAttentionParams& p, Node* node);
Result<FusedAttentionParams> read_fused_attention(const Node& node);

struct OpSchema;
OpSchema fused_attention_schema();

}  // namespace strider
