#include "ops/attention.h"

#include <cmath>

#include "base/onnx_types.h"

namespace strider {
namespace {

Status check_past(const NodeInputs& node, size_t i, const AttentionParams& p, int64_t head) {
  const Shape& s = node.input_shape(i);
  if (s.size() != 4 || s[0] != p.batch || s[1] != p.kv_heads || s[3] != head)
    return node.error("input {} is {}, expected [{}, {}, past, {}]", i, shape_to_string(s), p.batch, p.kv_heads, head);
  return Status::ok();
}

// The sizes of Q, K and V, 3-D or 4-D.
Status resolve_sizes(const NodeInputs& node, AttentionParams& p) {
  const Shape &q = node.input_shape(0), &k = node.input_shape(1), &v = node.input_shape(2);
  if (q.size() != k.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4))
    return node.error("Q, K and V must all be 3-D or all 4-D, got {}, {}, {}", shape_to_string(q), shape_to_string(k),
                      shape_to_string(v));
  p.three_d = q.size() == 3;
  p.batch = q[0];
  if (k[0] != p.batch || v[0] != p.batch) return node.error("Q, K and V have different batch sizes");
  if (p.three_d) {
    STRIDER_ASSIGN_OR_RETURN(p.q_heads, node.attributes().require_int("q_num_heads"));
    STRIDER_ASSIGN_OR_RETURN(p.kv_heads, node.attributes().require_int("kv_num_heads"));
    if (p.q_heads < 1 || p.kv_heads < 1 || q[2] % p.q_heads || k[2] % p.kv_heads || v[2] % p.kv_heads)
      return node.error("hidden sizes {}, {}, {} do not split into {} and {} heads", q[2], k[2], v[2], p.q_heads, p.kv_heads);
    p.q_len = q[1];
    p.kv_len = k[1];
    p.head = q[2] / p.q_heads;
    p.v_head = v[2] / p.kv_heads;
    if (k[2] / p.kv_heads != p.head) return node.error("Q and K have different head sizes");
    if (v[1] != p.kv_len) return node.error("K and V have different sequence lengths");
  } else {
    p.q_heads = q[1];
    p.kv_heads = k[1];
    p.q_len = q[2];
    p.kv_len = k[2];
    p.head = q[3];
    p.v_head = v[3];
    if (k[3] != p.head || v[1] != p.kv_heads || v[2] != p.kv_len)
      return node.error("K {} and V {} do not match Q {}", shape_to_string(k), shape_to_string(v), shape_to_string(q));
  }
  if (p.kv_heads < 1 || p.q_heads % p.kv_heads)
    return node.error("{} query heads are not a multiple of {} key/value heads", p.q_heads, p.kv_heads);
  return Status::ok();
}

Status resolve_attributes(const NodeInputs& node, AttentionParams& p) {
  const AttributeMap& a = node.attributes();
  STRIDER_ASSIGN_OR_RETURN(int64_t causal, a.get_int("is_causal", 0));
  p.causal = causal != 0;
  STRIDER_ASSIGN_OR_RETURN(p.softcap, a.get_float("softcap", 0.0f));
  STRIDER_ASSIGN_OR_RETURN(p.qk_mode, a.get_int("qk_matmul_output_mode", 0));
  if (p.qk_mode < 0 || p.qk_mode > 3) return node.error("qk_matmul_output_mode {} is not 0-3", p.qk_mode);
  const float default_scale = 1.0f / std::sqrt(float(p.head));
  STRIDER_ASSIGN_OR_RETURN(p.scale, a.get_float("scale", default_scale));
  if (a.has("softmax_precision")) {
    STRIDER_ASSIGN_OR_RETURN(int64_t code, a.require_int("softmax_precision"));
    std::optional<DType> t = dtype_from_onnx_code(int(code));
    if (!t || !is_floating(*t)) return node.error("softmax_precision {} is not a floating type", code);
    if (*t != node.input_dtype(0)) p.softmax_dtype = t;
  }
  return Status::ok();
}

Status infer_attention(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(AttentionParams p, resolve_attention(ctx));
  const DType t = ctx.input_dtype(0);
  if (p.three_d) ctx.set_output(0, t, {p.batch, p.q_len, p.q_heads * p.v_head});
  else ctx.set_output(0, t, {p.batch, p.q_heads, p.q_len, p.v_head});
  if (ctx.has_output(1)) ctx.set_output(1, t, {p.batch, p.kv_heads, p.total(), p.head});
  if (ctx.has_output(2)) ctx.set_output(2, t, {p.batch, p.kv_heads, p.total(), p.v_head});
  if (ctx.has_output(3)) ctx.set_output(3, t, {p.batch, p.q_heads, p.q_len, p.total()});
  return Status::ok();
}

}  // namespace

Result<AttentionParams> resolve_attention(const NodeInputs& node) {
  AttentionParams p;
  STRIDER_RETURN_IF_ERROR(resolve_sizes(node, p));
  STRIDER_RETURN_IF_ERROR(resolve_attributes(node, p));
  const DType t = node.input_dtype(0);
  if (!is_floating(t) || node.input_dtype(1) != t || node.input_dtype(2) != t)
    return node.error("Q, K and V must have one floating dtype");
  p.has_nonpad = node.num_inputs() > 6 && node.has_input(6);
  if (p.has_nonpad && (node.input_dtype(6) != DType::kI64 || node.input_shape(6) != Shape{p.batch}))
    return node.error("nonpad_kv_seqlen must be i64[{}]", p.batch);
  p.has_past = node.has_input(4);
  if (p.has_past != node.has_input(5)) return node.error("past_key and past_value come together");
  if (p.has_past) {
    STRIDER_RETURN_IF_ERROR(check_past(node, 4, p, p.head));
    p.past = node.input_shape(4)[2];
    STRIDER_RETURN_IF_ERROR(check_past(node, 5, p, p.v_head));
    if (node.input_shape(5)[2] != p.past) return node.error("past_key and past_value have different lengths");
  }
  p.has_mask = node.has_input(3);
  if (p.has_mask) {
    const Shape& m = node.input_shape(3);
    DType mt = node.input_dtype(3);
    if (mt != DType::kBool && mt != t) return node.error("attn_mask is {}, expected bool or {}", dtype_name(mt), dtype_name(t));
    if (m.empty() || m.size() > 4 || m.back() > p.total())
      return node.error("attn_mask {} does not broadcast to [{}, {}, {}, {}]", shape_to_string(m), p.batch, p.q_heads,
                        p.q_len, p.total());
  }
  return p;
}

void register_attention_ops(std::vector<OpSchema>& ops) { ops.push_back({"Attention", infer_attention, {}}); }

}  // namespace strider
