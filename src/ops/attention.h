// Attention (opset 23): its parameters resolved once from a node, for shape inference, for
// the expansion into primitive ops (passes/expand_functions.h: no device has a fused
// kernel yet) and for messages. The float64 reference implements the op on its own.
//
//   Q [B, Hq, Sq, D] or [B, Sq, Hq*D] (then q_num_heads/kv_num_heads say the heads),
//   K [B, Hkv, Skv, D], V [B, Hkv, Skv, Dv] (or 3-D likewise), Hq a multiple of Hkv
//   (grouped-query attention: query head h reads key/value head h / (Hq / Hkv));
//   attn_mask broadcastable to [B, Hq, Sq, T] (bool: true keeps; float: added), its last
//   dim possibly shorter than T = past + Skv (padded with -inf / false);
//   past_key/past_value [B, Hkv, past, D|Dv], concatenated before the new keys (the present
//   outputs); nonpad_kv_seqlen (opset 24) [B]: batch b's keys from nonpad[b] on are padding.
//   is_causal: query i sees keys j <= past + i (without a past but with nonpad_kv_seqlen,
//   j <= i + nonpad[b] - Sq: the queries are the last of the valid keys). softcap > 0: c * tanh(qk / c)
//   before the mask. A query row whose keys are all masked attends to nothing: its
//   probabilities, and so its output, are 0 (not the NaN a softmax of -inf gives).
//   qk_matmul_output (output 3): the scaled (softcapped) QK^T (mode 0 and
//   1), with the mask added (2), or the softmax (3).
#pragma once

#include <optional>

#include "ops/op_registry.h"

namespace strider {

struct AttentionParams {
  bool three_d = false;
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, past = 0, head = 0, v_head = 0;
  int64_t total() const { return past + kv_len; }
  float scale = 0;  // resolved: 1/sqrt(head) unless given
  bool causal = false;
  float softcap = 0;
  int64_t qk_mode = 0;
  std::optional<DType> softmax_dtype;  // softmax_precision, when it differs from Q's dtype
  bool has_mask = false, has_past = false, has_nonpad = false;
};

Result<AttentionParams> resolve_attention(const NodeInputs& node);

void register_attention_ops(std::vector<OpSchema>& ops);

}  // namespace strider
