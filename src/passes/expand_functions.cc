#include "passes/expand_functions.h"

#include <fmt/format.h>

#include <limits>

#include "ops/attention.h"
#include "ops/function_ops.h"
#include "base/onnx_types.h"
#include "passes/body_writer.h"

namespace strider {
namespace {
using namespace expansion;

ValueId output_of(const Node& node, size_t i) { return i < node.outputs.size() ? node.outputs[i] : kNoValue; }

// [B, S, H*D] -> [B, H, S, D] (a reshape and a transpose: views of the input).
Result<ValueId> split_heads(BodyWriter& w, ValueId x, const AttentionParams& p, int64_t heads, int64_t len, int64_t head) {
  STRIDER_ASSIGN_OR_RETURN(ValueId shape, w.ints({p.batch, len, heads, head}));
  STRIDER_ASSIGN_OR_RETURN(ValueId r, w.op("Reshape", {x, shape}));
  return w.op("Transpose", {r}, ints_attr("perm", {0, 2, 1, 3}));
}

// Key/value head h / G for query head h: [B, Hkv, T, D] -> [B, Hq, T, D].
Result<ValueId> repeat_heads(BodyWriter& w, ValueId x, const AttentionParams& p, int64_t head) {
  if (p.q_heads == p.kv_heads) return x;
  const int64_t group = p.q_heads / p.kv_heads;
  STRIDER_ASSIGN_OR_RETURN(ValueId axes, w.ints({2}));
  STRIDER_ASSIGN_OR_RETURN(ValueId u, w.op("Unsqueeze", {x, axes}));
  STRIDER_ASSIGN_OR_RETURN(ValueId wide, w.ints({p.batch, p.kv_heads, group, p.total(), head}));
  STRIDER_ASSIGN_OR_RETURN(ValueId e, w.op("Expand", {u, wide}));
  STRIDER_ASSIGN_OR_RETURN(ValueId shape, w.ints({p.batch, p.q_heads, p.total(), head}));
  return w.op("Reshape", {e, shape});
}

// nonpad_kv_seqlen's bias [B, 1, Sq|1, T]: 0 where batch b's key j is valid (j < nonpad[b]
// and, causal without a past, j - i + Sq <= nonpad[b]), -inf elsewhere.
Result<ValueId> padding_bias(BodyWriter& w, const Node& node, const AttentionParams& p, DType t) {
  const float inf = std::numeric_limits<float>::infinity();
  STRIDER_ASSIGN_OR_RETURN(ValueId per_batch, w.ints({p.batch, 1, 1, 1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId nonpad, w.op("Reshape", {node.inputs[6], per_batch}));
  std::vector<int64_t> key(size_t(p.total()));
  for (int64_t j = 0; j < p.total(); ++j) key[size_t(j)] = j;
  STRIDER_ASSIGN_OR_RETURN(ValueId keys, w.constant(Tensor::from_values<int64_t>(DType::kI64, {1, 1, 1, p.total()}, key)));
  STRIDER_ASSIGN_OR_RETURN(ValueId keep, w.op("Less", {keys, nonpad}));
  if (p.causal && !p.has_past) {
    STRIDER_RETURN_IF_ERROR(w.reserve(p.q_len * p.total(), DType::kI64, "the causal reach"));
    std::vector<int64_t> reach(size_t(p.q_len * p.total()));
    for (int64_t i = 0; i < p.q_len; ++i)
      for (int64_t j = 0; j < p.total(); ++j) reach[size_t(i * p.total() + j)] = j - i + p.q_len;
    STRIDER_ASSIGN_OR_RETURN(ValueId needs,
                             w.constant(Tensor::from_values<int64_t>(DType::kI64, {1, 1, p.q_len, p.total()}, reach)));
    STRIDER_ASSIGN_OR_RETURN(ValueId causal, w.op("LessOrEqual", {needs, nonpad}));
    STRIDER_ASSIGN_OR_RETURN(keep, w.op("And", {keep, causal}));
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId zero, w.floats(t, {}, {0.0f}));
  STRIDER_ASSIGN_OR_RETURN(ValueId minus_inf, w.floats(t, {}, {-inf}));
  return w.op("Where", {keep, zero, minus_inf});
}

// The additive bias [.., Sq, T]: the mask (bool as 0/-inf, padded to T) plus the causal
// triangle; kNoValue when there is neither.
Result<ValueId> attention_bias(BodyWriter& w, const Graph& g, const Node& node, const AttentionParams& p, DType t) {
  const float inf = std::numeric_limits<float>::infinity();
  ValueId bias = kNoValue;
  if (p.has_mask) {
    ValueId mask = node.inputs[3];
    const Shape m = g.value(mask).shape;
    const bool boolean = g.value(mask).dtype == DType::kBool;
    if (m.back() < p.total()) {
      std::vector<int64_t> pads(2 * m.size(), 0);
      pads.back() = p.total() - m.back();
      STRIDER_ASSIGN_OR_RETURN(ValueId pad_sizes, w.ints(pads));
      ValueId fill = kNoValue;
      if (boolean) {
        STRIDER_ASSIGN_OR_RETURN(fill, w.constant(Tensor(DType::kBool, {})));
      } else {
        STRIDER_ASSIGN_OR_RETURN(fill, w.floats(t, {}, {-inf}));
      }
      STRIDER_ASSIGN_OR_RETURN(mask, w.op("Pad", {mask, pad_sizes, fill}));
    }
    if (boolean) {
      STRIDER_ASSIGN_OR_RETURN(ValueId zero, w.floats(t, {}, {0.0f}));
      STRIDER_ASSIGN_OR_RETURN(ValueId minus_inf, w.floats(t, {}, {-inf}));
      STRIDER_ASSIGN_OR_RETURN(mask, w.op("Where", {mask, zero, minus_inf}));
    }
    bias = mask;
  }
  if (p.has_nonpad) {
    STRIDER_ASSIGN_OR_RETURN(ValueId padding, padding_bias(w, node, p, t));
    if (bias == kNoValue) {
      bias = padding;
    } else {
      STRIDER_ASSIGN_OR_RETURN(bias, w.op("Add", {bias, padding}));
    }
    if (!p.has_past) return bias;  // the causal part is in the padding bias
  }
  if (p.causal) {  // query i sees keys j <= past + i
    STRIDER_RETURN_IF_ERROR(w.reserve(p.q_len * p.total(), t, "the causal mask"));
    std::vector<float> triangle(size_t(p.q_len * p.total()), 0.0f);
    for (int64_t i = 0; i < p.q_len; ++i)
      for (int64_t j = p.past + i + 1; j < p.total(); ++j) triangle[size_t(i * p.total() + j)] = -inf;
    STRIDER_ASSIGN_OR_RETURN(ValueId causal, w.floats(t, {p.q_len, p.total()}, triangle));
    if (bias == kNoValue) return causal;
    return w.op("Add", {bias, causal});
  }
  return bias;
}

Result<ValueId> softcapped(BodyWriter& w, ValueId qk, const AttentionParams& p, DType t) {
  if (p.softcap <= 0) return qk;
  STRIDER_ASSIGN_OR_RETURN(ValueId cap, w.floats(t, {}, {p.softcap}));
  STRIDER_ASSIGN_OR_RETURN(ValueId scaled, w.op("Div", {qk, cap}));
  STRIDER_ASSIGN_OR_RETURN(ValueId bounded, w.op("Tanh", {scaled}));
  return w.op("Mul", {bounded, cap});
}

Result<ValueId> softmax_of(BodyWriter& w, ValueId s, const AttentionParams& p, DType t) {
  if (!p.softmax_dtype) return w.op("Softmax", {s}, int_attr("axis", -1));
  STRIDER_ASSIGN_OR_RETURN(ValueId wide, w.op("Cast", {s}, int_attr("to", onnx_type_code(*p.softmax_dtype))));
  STRIDER_ASSIGN_OR_RETURN(ValueId probs, w.op("Softmax", {wide}, int_attr("axis", -1)));
  return w.op("Cast", {probs}, int_attr("to", onnx_type_code(t)));
}

Status expand_attention(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(AttentionParams p, resolve_attention(NodeInputs(g, node)));
  const DType t = g.value(node.inputs[0]).dtype;
  BodyWriter w(g, node, budget);
  ValueId q = node.inputs[0], k = node.inputs[1], v = node.inputs[2];
  if (p.three_d) {
    STRIDER_ASSIGN_OR_RETURN(q, split_heads(w, q, p, p.q_heads, p.q_len, p.head));
    STRIDER_ASSIGN_OR_RETURN(k, split_heads(w, k, p, p.kv_heads, p.kv_len, p.head));
    STRIDER_ASSIGN_OR_RETURN(v, split_heads(w, v, p, p.kv_heads, p.kv_len, p.v_head));
  }
  const ValueId present_key = output_of(node, 1), present_value = output_of(node, 2);
  if (p.has_past) {
    STRIDER_ASSIGN_OR_RETURN(k, w.op("Concat", {node.inputs[4], k}, int_attr("axis", 2), present_key));
    STRIDER_ASSIGN_OR_RETURN(v, w.op("Concat", {node.inputs[5], v}, int_attr("axis", 2), present_value));
  } else {
    if (present_key != kNoValue) STRIDER_RETURN_IF_ERROR(w.op("Identity", {k}, {}, present_key).status());
    if (present_value != kNoValue) STRIDER_RETURN_IF_ERROR(w.op("Identity", {v}, {}, present_value).status());
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId keys, repeat_heads(w, k, p, p.head));
  STRIDER_ASSIGN_OR_RETURN(ValueId values, repeat_heads(w, v, p, p.v_head));
  STRIDER_ASSIGN_OR_RETURN(ValueId keys_t, w.op("Transpose", {keys}, ints_attr("perm", {0, 1, 3, 2})));
  STRIDER_ASSIGN_OR_RETURN(ValueId product, w.op("MatMul", {q, keys_t}));
  STRIDER_ASSIGN_OR_RETURN(ValueId scale, w.floats(t, {}, {p.scale}));
  STRIDER_ASSIGN_OR_RETURN(ValueId qk, w.op("Mul", {product, scale}));
  STRIDER_ASSIGN_OR_RETURN(qk, softcapped(w, qk, p, t));
  STRIDER_ASSIGN_OR_RETURN(ValueId bias, attention_bias(w, g, node, p, t));
  ValueId biased = qk;
  if (bias != kNoValue) {
    STRIDER_ASSIGN_OR_RETURN(biased, w.op("Add", {qk, bias}));
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId probs, softmax_of(w, biased, p, t));
  if (bias != kNoValue) {  // a fully masked row: softmax of -inf only is NaN; it attends to nothing
    STRIDER_ASSIGN_OR_RETURN(ValueId nan, w.op("IsNaN", {probs}));
    STRIDER_ASSIGN_OR_RETURN(ValueId zero, w.floats(t, {}, {0.0f}));
    STRIDER_ASSIGN_OR_RETURN(probs, w.op("Where", {nan, zero, probs}));
  }
  if (ValueId qk_out = output_of(node, 3); qk_out != kNoValue) {
    ValueId chosen = p.qk_mode == 3 ? probs : p.qk_mode == 2 ? biased : qk;
    STRIDER_RETURN_IF_ERROR(w.op("Identity", {chosen}, {}, qk_out).status());
  }
  if (!p.three_d) return w.op("MatMul", {probs, values}, {}, node.outputs[0]).status();
  STRIDER_ASSIGN_OR_RETURN(ValueId y, w.op("MatMul", {probs, values}));
  STRIDER_ASSIGN_OR_RETURN(ValueId merged, w.op("Transpose", {y}, ints_attr("perm", {0, 2, 1, 3})));
  STRIDER_ASSIGN_OR_RETURN(ValueId shape, w.ints({p.batch, p.q_len, p.q_heads * p.v_head}));
  return w.op("Reshape", {merged, shape}, {}, node.outputs[0]).status();
}

// ---- RotaryEmbedding, LpNormalization, OneHot (ops/function_ops.h) ------------------------

// Unsqueeze by the original node's opset (axes an attribute before 13).
Result<ValueId> unsqueeze(BodyWriter& w, int opset, ValueId x, std::vector<int64_t> axes) {
  if (opset < 13) return w.op("Unsqueeze", {x}, ints_attr("axes", std::move(axes)));
  STRIDER_ASSIGN_OR_RETURN(ValueId a, w.ints(std::move(axes)));
  return w.op("Unsqueeze", {x, a});
}

// x[..., start:end:step] along the last axis.
Result<ValueId> last_axis_slice(BodyWriter& w, ValueId x, int64_t start, int64_t end, int64_t step = 1) {
  STRIDER_ASSIGN_OR_RETURN(ValueId starts, w.ints({start}));
  STRIDER_ASSIGN_OR_RETURN(ValueId ends, w.ints({end}));
  STRIDER_ASSIGN_OR_RETURN(ValueId axes, w.ints({-1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId steps, w.ints({step}));
  return w.op("Slice", {x, starts, ends, axes, steps});
}

// The rotated first R elements of each head: (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2),
// x1 and x2 the halves or the even and odd elements.
Result<ValueId> rotated(BodyWriter& w, ValueId x, ValueId cos, ValueId sin, const RotaryParams& p, const Shape& rotated_shape) {
  const int64_t r = p.rotary;
  STRIDER_ASSIGN_OR_RETURN(ValueId x1, p.interleaved ? last_axis_slice(w, x, 0, r, 2) : last_axis_slice(w, x, 0, r / 2));
  STRIDER_ASSIGN_OR_RETURN(ValueId x2, p.interleaved ? last_axis_slice(w, x, 1, r, 2) : last_axis_slice(w, x, r / 2, r));
  STRIDER_ASSIGN_OR_RETURN(ValueId cos_x1, w.op("Mul", {cos, x1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId sin_x2, w.op("Mul", {sin, x2}));
  STRIDER_ASSIGN_OR_RETURN(ValueId sin_x1, w.op("Mul", {sin, x1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId cos_x2, w.op("Mul", {cos, x2}));
  STRIDER_ASSIGN_OR_RETURN(ValueId real, w.op("Sub", {cos_x1, sin_x2}));
  STRIDER_ASSIGN_OR_RETURN(ValueId imag, w.op("Add", {sin_x1, cos_x2}));
  if (!p.interleaved) return w.op("Concat", {real, imag}, int_attr("axis", -1));
  STRIDER_ASSIGN_OR_RETURN(ValueId re, unsqueeze(w, 23, real, {-1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId im, unsqueeze(w, 23, imag, {-1}));
  STRIDER_ASSIGN_OR_RETURN(ValueId pairs, w.op("Concat", {re, im}, int_attr("axis", -1)));
  STRIDER_ASSIGN_OR_RETURN(ValueId shape, w.ints(rotated_shape));
  return w.op("Reshape", {pairs, shape});
}

Status expand_rotary_embedding(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(RotaryParams p, resolve_rotary_embedding(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  ValueId x = node.inputs[0], cos = node.inputs[1], sin = node.inputs[2];
  if (p.has_positions) {
    STRIDER_ASSIGN_OR_RETURN(cos, w.op("Gather", {cos, node.inputs[3]}, int_attr("axis", 0)));
    STRIDER_ASSIGN_OR_RETURN(sin, w.op("Gather", {sin, node.inputs[3]}, int_attr("axis", 0)));
  }
  // 4-D works in [B, H, S, D], cos as [B, 1, S, R/2]; 3-D in [B, S, N, D], cos as [B, S, 1, R/2].
  const int64_t heads_axis = p.three_d ? 2 : 1;
  STRIDER_ASSIGN_OR_RETURN(cos, unsqueeze(w, node.opset, cos, {heads_axis}));
  STRIDER_ASSIGN_OR_RETURN(sin, unsqueeze(w, node.opset, sin, {heads_axis}));
  Shape heads = p.three_d ? Shape{p.batch, p.len, p.heads, p.head} : Shape{p.batch, p.heads, p.len, p.head};
  if (p.three_d) {
    STRIDER_ASSIGN_OR_RETURN(ValueId shape, w.ints(heads));
    STRIDER_ASSIGN_OR_RETURN(x, w.op("Reshape", {x, shape}));
  }
  Shape rotated_shape = heads;
  rotated_shape.back() = p.rotary;
  ValueId part = x;
  if (p.rotary < p.head) {
    STRIDER_ASSIGN_OR_RETURN(part, last_axis_slice(w, x, 0, p.rotary));
  }
  STRIDER_ASSIGN_OR_RETURN(ValueId out, rotated(w, part, cos, sin, p, rotated_shape));
  if (p.rotary < p.head) {
    STRIDER_ASSIGN_OR_RETURN(ValueId rest, last_axis_slice(w, x, p.rotary, p.head));
    STRIDER_ASSIGN_OR_RETURN(out, w.op("Concat", {out, rest}, int_attr("axis", -1)));
  }
  if (!p.three_d) return w.op("Identity", {out}, {}, node.outputs[0]).status();
  STRIDER_ASSIGN_OR_RETURN(ValueId shape, w.ints({p.batch, p.len, p.heads * p.head}));
  return w.op("Reshape", {out, shape}, {}, node.outputs[0]).status();
}

Status expand_lp_normalization(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(LpNormParams p, resolve_lp_normalization(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  const std::string reduce = p.p == 1 ? "ReduceL1" : "ReduceL2";
  AttributeMap keep = int_attr("keepdims", 1);
  ValueId norm = kNoValue;
  if (node.opset < 18) {
    keep.set_ints("axes", {p.axis});
    STRIDER_ASSIGN_OR_RETURN(norm, w.op(reduce, {node.inputs[0]}, keep));
  } else {
    STRIDER_ASSIGN_OR_RETURN(ValueId axes, w.ints({p.axis}));
    STRIDER_ASSIGN_OR_RETURN(norm, w.op(reduce, {node.inputs[0], axes}, keep));
  }
  // A vector whose norm is 0 stays 0 (0 / 0 would be NaN).
  const DType t = g.value(node.inputs[0]).dtype;
  STRIDER_ASSIGN_OR_RETURN(ValueId zero, w.floats(t, {}, {0.0f}));
  STRIDER_ASSIGN_OR_RETURN(ValueId one, w.floats(t, {}, {1.0f}));
  STRIDER_ASSIGN_OR_RETURN(ValueId vanishes, w.op("Equal", {norm, zero}));
  STRIDER_ASSIGN_OR_RETURN(ValueId divisor, w.op("Where", {vanishes, one, norm}));
  return w.op("Div", {node.inputs[0], divisor}, {}, node.outputs[0]).status();
}

// Equal(index, position) along the new axis, with negative indices counting from depth;
// an index outside [-depth, depth) matches no position (all values[0]).
Status expand_one_hot(Graph& g, const Node& node, MemoryBudget* budget) {
  STRIDER_ASSIGN_OR_RETURN(OneHotParams p, resolve_one_hot(NodeInputs(g, node)));
  BodyWriter w(g, node, budget);
  STRIDER_ASSIGN_OR_RETURN(ValueId index, w.op("Cast", {node.inputs[0]}, int_attr("to", onnx_type_code(DType::kI64))));
  STRIDER_ASSIGN_OR_RETURN(ValueId zero, w.ints({0}));
  STRIDER_ASSIGN_OR_RETURN(ValueId depth, w.ints({p.depth}));
  STRIDER_ASSIGN_OR_RETURN(ValueId negative, w.op("Less", {index, zero}));
  STRIDER_ASSIGN_OR_RETURN(ValueId wrapped, w.op("Add", {index, depth}));
  STRIDER_ASSIGN_OR_RETURN(index, w.op("Where", {negative, wrapped, index}));
  STRIDER_ASSIGN_OR_RETURN(index, unsqueeze(w, node.opset, index, {p.axis}));
  const int64_t rank = int64_t(g.value(node.inputs[0]).shape.size()) + 1;
  Shape positions_shape(size_t(rank), 1);
  positions_shape[size_t(p.axis)] = p.depth;
  STRIDER_RETURN_IF_ERROR(w.reserve(p.depth, DType::kI64, "the positions"));
  std::vector<int64_t> positions(size_t(p.depth));
  for (int64_t i = 0; i < p.depth; ++i) positions[size_t(i)] = i;
  STRIDER_ASSIGN_OR_RETURN(ValueId along, w.constant(Tensor::from_values<int64_t>(DType::kI64, positions_shape, positions)));
  STRIDER_ASSIGN_OR_RETURN(ValueId hot, w.op("Equal", {index, along}));
  STRIDER_ASSIGN_OR_RETURN(ValueId off_at, w.constant(Tensor::from_values<int64_t>(DType::kI64, {}, std::vector<int64_t>{0})));
  STRIDER_ASSIGN_OR_RETURN(ValueId on_at, w.constant(Tensor::from_values<int64_t>(DType::kI64, {}, std::vector<int64_t>{1})));
  STRIDER_ASSIGN_OR_RETURN(ValueId off, w.op("Gather", {node.inputs[2], off_at}, int_attr("axis", 0)));
  STRIDER_ASSIGN_OR_RETURN(ValueId on, w.op("Gather", {node.inputs[2], on_at}, int_attr("axis", 0)));
  return w.op("Where", {hot, on, off}, {}, node.outputs[0]).status();
}

// SwiGLU: Swish(a, alpha) * b (the fusion pass makes it one kernel).
Status expand_swiglu(Graph& g, const Node& node, MemoryBudget* budget) {
  BodyWriter w(g, node, budget);
  AttributeMap swish;
  STRIDER_ASSIGN_OR_RETURN(float alpha, node.attributes.get_float("alpha", 1.0f));
  swish.set_float("alpha", alpha);
  STRIDER_ASSIGN_OR_RETURN(ValueId gate, w.op("Swish", {node.inputs[0]}, swish));
  return w.op("Mul", {gate, node.inputs[1]}, {}, node.outputs[0]).status();
}

using Expander = Status (*)(Graph&, const Node&, MemoryBudget*);
struct FunctionOp {
  std::string_view op_type;
  Expander expand;
};
constexpr FunctionOp kFunctionOps[] = {
    {"Einsum", expand_einsum},
    {"Attention", expand_attention},
    {"RotaryEmbedding", expand_rotary_embedding},
    {"LpNormalization", expand_lp_normalization},
    {"OneHot", expand_one_hot},
    {"SwiGLU", expand_swiglu},
    {"NegativeLogLikelihoodLoss", expand_nll_loss},
    {"SoftmaxCrossEntropyLoss", expand_softmax_cross_entropy},
    {"QuantizeLinear", expand_quantize_linear},
    {"DequantizeLinear", expand_dequantize_linear},
    {"DynamicQuantizeLinear", expand_dynamic_quantize_linear},
    {"QLinearMatMul", expand_qlinear_matmul},
    {"QLinearConv", expand_qlinear_conv},
    {"ConvInteger", expand_conv_integer},
    {"MatMulInteger", expand_matmul_integer},
    {"RNN", expand_recurrent},
    {"GRU", expand_recurrent},
    {"LSTM", expand_recurrent},
    {"DepthToSpace", expand_depth_to_space},
    {"SpaceToDepth", expand_space_to_depth},
    {"CenterCropPad", expand_center_crop_pad},
    {"MaxUnpool", expand_max_unpool},
    {"ReverseSequence", expand_reverse_sequence},
    {"Hardmax", expand_hardmax},
    {"LRN", expand_lrn},
    {"LpPool", expand_lp_pool},
    {"EyeLike", expand_eye_like},
    {"ConvTranspose", expand_conv_transpose},
    {"Col2Im", expand_col2im},
    {"DFT", expand_dft},
    {"STFT", expand_stft},
    {"HannWindow", expand_window_function},
    {"HammingWindow", expand_window_function},
    {"BlackmanWindow", expand_window_function},
};

Expander expander_for(const Node& node) {
  if (!node.domain.empty() && node.domain != "ai.onnx") return nullptr;
  for (const FunctionOp& f : kFunctionOps)
    if (f.op_type == node.op_type) return f.expand;
  return nullptr;
}

}  // namespace

bool expands_as_function(const Node& node) { return expander_for(node) != nullptr; }

Result<int> expand_functions(Graph& graph, MemoryBudget* budget) {
  // Each body is appended after the graph's nodes while the node it replaces stays in place,
  // its outputs released for the body to write; then every body moves into its node's place
  // in one pass. A body reads only values defined before its node and its own.
  std::vector<AppendedBody> bodies;
  const NodeId original_count = graph.num_nodes();
  for (NodeId id = 0; id < original_count; ++id) {
    Expander expand = expander_for(graph.node(id));
    if (expand == nullptr) continue;
    const Node original = graph.node(id);
    graph.release_outputs(id);
    for (ValueId out : original.outputs)
      if (out != kNoValue) graph.value(out).has_type = graph.value(out).has_shape = false;
    const NodeId first = graph.num_nodes();
    STRIDER_RETURN_IF_ERROR(expand(graph, original, budget));
    bodies.push_back({id, first, graph.num_nodes()});
  }
  if (!bodies.empty()) STRIDER_RETURN_IF_ERROR(graph.replace_with_appended_bodies(bodies));
  return int(bodies.size());
}

}  // namespace strider
