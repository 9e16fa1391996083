#include "ops/signature.h"

#include <fmt/format.h>
#include <onnx/defs/schema.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <string_view>

#include "base/onnx_types.h"
#include "strider/printable.h"

namespace strider {
namespace {

// onnx::OpSchema by another name: in a unity batch strider::OpSchema (ops/op_registry.h)
// is in scope too.
using OnnxSchema = onnx::OpSchema;

// The newest ai.onnx opset this libonnx has schemas for (17 for Debian's 1.12).
int libonnx_max_opset() {
  static const int max = [] {
    const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    auto it = ranges.find(onnx::ONNX_DOMAIN);
    return it == ranges.end() ? 0 : it->second.second;
  }();
  return max;
}

// Inputs later opsets added to ops libonnx 1.12 knows (the axes input of the reductions
// and of Pad at 18, DFT's dft_length and axis at 20): {op, since, inputs at most}.
struct NewerArity {
  std::string_view op;
  int since;
  int max_inputs;
};
constexpr NewerArity kNewerArity[] = {
    {"DFT", 20, 3},        {"Pad", 18, 4},          {"ReduceL1", 18, 2},        {"ReduceL2", 18, 2},
    {"ReduceLogSum", 18, 2}, {"ReduceLogSumExp", 18, 2}, {"ReduceMax", 18, 2},   {"ReduceMean", 18, 2},
    {"ReduceMin", 18, 2},  {"ReduceProd", 18, 2},   {"ReduceSumSquare", 18, 2},
};

// Ops ONNX defined after opset 17, which libonnx 1.12 has no schema for, written from the
// ONNX operator definitions: how many inputs (the first `required` must be present) and
// outputs, the attributes with their kinds, and each input's element types as ONNX
// constrains them ("T=float": type parameter T, a float type; inputs naming one parameter
// take one type; a class alone binds nothing). Fuzzing found what checking input 0 alone
// let through: an int32 DeformConv bias reached the kernels as floats.
struct AttributeSpec {
  std::string_view name;
  Attribute::Kind kind;
};
struct AddedOp {
  std::string_view op;
  int since;
  int required, max_inputs, max_outputs;
  std::array<AttributeSpec, 7> attributes;
  std::array<std::string_view, 7> input_types;
};
constexpr AddedOp kAddedOps[] = {
    {"Mish", 18, 1, 1, 1, {}, {"T=float"}},
    {"BitwiseAnd", 18, 2, 2, 1, {}, {"T=integer", "T=integer"}},
    {"BitwiseOr", 18, 2, 2, 1, {}, {"T=integer", "T=integer"}},
    {"BitwiseXor", 18, 2, 2, 1, {}, {"T=integer", "T=integer"}},
    {"BitwiseNot", 18, 1, 1, 1, {}, {"T=integer"}},
    {"CenterCropPad", 18, 2, 2, 1, {{{"axes", Attribute::Kind::kInts}}}, {"T=any", "index"}},
    {"CumProd", 26, 2, 2, 1, {{{"exclusive", Attribute::Kind::kInt}, {"reverse", Attribute::Kind::kInt}}},
     {"T=numeric", "index"}},
    {"GroupNormalization", 18, 3, 3, 1,
     {{{"epsilon", Attribute::Kind::kFloat}, {"num_groups", Attribute::Kind::kInt}, {"stash_type", Attribute::Kind::kInt}}},
     {"T=float", "T=float", "T=float"}},
    // The scale has a type parameter of its own (V).
    {"RMSNormalization", 23, 2, 2, 1,
     {{{"axis", Attribute::Kind::kInt}, {"epsilon", Attribute::Kind::kFloat}, {"stash_type", Attribute::Kind::kInt}}},
     {"T=float", "V=float"}},
    {"Gelu", 20, 1, 1, 1, {{{"approximate", Attribute::Kind::kString}}}, {"T=float"}},
    {"AffineGrid", 20, 2, 2, 1, {{{"align_corners", Attribute::Kind::kInt}}}, {"T=float", "int64"}},
    {"DeformConv", 19, 3, 5, 1,
     {{{"dilations", Attribute::Kind::kInts}, {"group", Attribute::Kind::kInt}, {"kernel_shape", Attribute::Kind::kInts},
       {"offset_group", Attribute::Kind::kInt}, {"pads", Attribute::Kind::kInts}, {"strides", Attribute::Kind::kInts}}},
     {"T=float", "T=float", "T=float", "T=float", "T=float"}},
    {"Col2Im", 18, 3, 3, 1,
     {{{"dilations", Attribute::Kind::kInts}, {"pads", Attribute::Kind::kInts}, {"strides", Attribute::Kind::kInts}}},
     {"T=any", "int64", "int64"}},
    {"Swish", 24, 1, 1, 1, {{{"alpha", Attribute::Kind::kFloat}}}, {"T=float"}},
    // SwiGLU's ONNX version is newer still; accepted from 24, where Swish, its body, exists.
    {"SwiGLU", 24, 2, 2, 1, {{{"alpha", Attribute::Kind::kFloat}}}, {"T=float", "T=float"}},
    {"RotaryEmbedding", 23, 3, 4, 1,
     {{{"interleaved", Attribute::Kind::kInt}, {"num_heads", Attribute::Kind::kInt},
       {"rotary_embedding_dim", Attribute::Kind::kInt}}},
     {"T=float", "T=float", "T=float", "int64"}},
    // Q and K (and past_key) are T1, V (and past_value) T2; the mask is bool or a float type
    // (its shape function says which); input 6 (nonpad_kv_seqlen) is opset 24's.
    {"Attention", 23, 3, 7, 4,
     {{{"is_causal", Attribute::Kind::kInt}, {"kv_num_heads", Attribute::Kind::kInt}, {"q_num_heads", Attribute::Kind::kInt},
       {"qk_matmul_output_mode", Attribute::Kind::kInt}, {"scale", Attribute::Kind::kFloat},
       {"softcap", Attribute::Kind::kFloat}, {"softmax_precision", Attribute::Kind::kInt}}},
     {"T1=float", "T1=float", "T2=float", "any", "T1=float", "T2=float", "int64"}},
};

// Whether `dtype` is of an input_types class ("float", "integer", ...).
bool in_type_class(std::string_view type_class, DType dtype) {
  if (type_class == "float") return is_floating(dtype);
  if (type_class == "integer") return is_integral(dtype);
  if (type_class == "numeric") return is_floating(dtype) || is_integral(dtype);
  if (type_class == "index") return dtype == DType::kI32 || dtype == DType::kI64;
  if (type_class == "int64") return dtype == DType::kI64;
  return type_class == "any";
}

const AddedOp* find_added_op(std::string_view op) {
  for (const AddedOp& a : kAddedOps)
    if (a.op == op) return &a;
  return nullptr;
}

// Each present input's element type against its class, and inputs of one type parameter
// against each other.
Status check_added_input_types(const Graph& graph, const Node& node, const AddedOp& spec) {
  std::map<std::string_view, size_t> first_of_parameter;
  for (size_t i = 0; i < node.inputs.size() && i < spec.input_types.size(); ++i) {
    if (node.inputs[i] == kNoValue || spec.input_types[i].empty()) continue;
    const Value& v = graph.value(node.inputs[i]);
    if (!v.has_type) continue;
    std::string_view types = spec.input_types[i], parameter;
    if (size_t eq = types.find('='); eq != std::string_view::npos) {
      parameter = types.substr(0, eq);
      types = types.substr(eq + 1);
    }
    if (!in_type_class(types, v.dtype))
      return invalid_model(fmt::format("{} input {} ('{}') is {}, which {}-{} does not take there ({} types only)",
                                       describe_node(node), i, printable(v.name), dtype_name(v.dtype), spec.op,
                                       spec.since, types));
    if (parameter.empty()) continue;
    auto [it, first] = first_of_parameter.emplace(parameter, i);
    DType bound = graph.value(node.inputs[it->second]).dtype;
    if (!first && bound != v.dtype)
      return invalid_model(fmt::format("{} input {} is {} but input {} is {}; {}-{} takes one type for both",
                                       describe_node(node), i, dtype_name(v.dtype), it->second, dtype_name(bound),
                                       spec.op, spec.since));
  }
  return Status::ok();
}

Status check_added_op(const Graph& graph, const Node& node, const AddedOp& spec) {
  std::string desc = describe_node(node);
  if (node.opset < spec.since)
    return invalid_model(fmt::format("{}: the op does not exist at opset {} (ONNX defines it from opset {})", desc,
                                     node.opset, spec.since));
  int inputs = int(node.inputs.size()), outputs = int(node.outputs.size());
  if (inputs < spec.required || inputs > spec.max_inputs)
    return invalid_model(fmt::format("{} has {} inputs; {}-{} takes {} to {}", desc, inputs, spec.op, spec.since,
                                     spec.required, spec.max_inputs));
  if (outputs < 1 || outputs > spec.max_outputs || node.outputs[0] == kNoValue)
    return invalid_model(fmt::format("{} has {} outputs; {}-{} produces 1 to {}", desc, outputs, spec.op, spec.since,
                                     spec.max_outputs));
  for (int i = 0; i < spec.required; ++i)
    if (node.inputs[size_t(i)] == kNoValue)
      return invalid_model(fmt::format("{} omits input {}, which {}-{} requires", desc, i, spec.op, spec.since));
  for (const auto& [attribute_name, value] : node.attributes.all()) {
    const std::string& name = attribute_name;  // clang 14 cannot capture a structured binding
    auto it = std::find_if(spec.attributes.begin(), spec.attributes.end(), [&](const AttributeSpec& a) { return a.name == name; });
    if (it == spec.attributes.end() || it->name.empty())
      return invalid_model(fmt::format("{} has attribute '{}', which {}-{} does not define", desc, printable(name), spec.op,
                                       spec.since));
    if (it->kind != value.kind)
      return invalid_model(fmt::format("{} attribute '{}' is {}, but {}-{} takes {}", desc, name,
                                       attribute_kind_name(value.kind), spec.op, spec.since, attribute_kind_name(it->kind)));
  }
  return check_added_input_types(graph, node, spec);
}

// The first opset that defines `op` (libonnx knows it at some version).
int oldest_version(const std::string& op) {
  for (int v = 1; v <= libonnx_max_opset(); ++v)
    if (const OnnxSchema* s = onnx::OpSchemaRegistry::Schema(op, v, onnx::ONNX_DOMAIN)) return s->SinceVersion();
  return 0;
}

int max_inputs_at(const OnnxSchema& schema, const Node& node) {
  int max = schema.max_input();
  if (node.opset > libonnx_max_opset())
    for (const NewerArity& n : kNewerArity)
      if (n.op == node.op_type && node.opset >= n.since) max = std::max(max, n.max_inputs);
  return max;
}

// How ONNX's schemas name a tensor of `dtype`: "tensor(float8e4m3fn)" for FLOAT8E4M3FN.
std::string onnx_tensor_type(DType dtype) {
  std::string name(onnx_type_name(onnx_type_code(dtype)));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return fmt::format("tensor({})", name);
}

// Whether a formal parameter takes `dtype`. For a node newer than the schema, later opsets'
// widening is allowed for within a kind: bf16 (22), float8 (19) and float4 (23) where the
// list had a float type, int4 (21) and int2 (25) where it had an integer, bool for
// ReduceMax and ReduceMin (20). The quantizers crossed kinds (float8 data and zero points at
// 19) and are left to their shape functions. What stays refused is a new kind: an integer
// Mean at opset 18 (fuzzing found one overflowing the CPU's conversion back from f64).
bool takes(const OnnxSchema::FormalParameter& param, DType dtype, const Node& node, bool newer_than_schema) {
  bool any_float = false, any_integer = false, any_bool = false;
  for (const std::string* t : param.GetTypes()) {
    if (t == nullptr) continue;
    for (DType listed : kAllDTypes) {
      if (*t != onnx_tensor_type(listed)) continue;
      if (listed == dtype) return true;
      any_float |= is_floating(listed);
      any_integer |= is_integral(listed);
      any_bool |= listed == DType::kBool;
    }
  }
  if (!newer_than_schema) return false;
  const std::string& op = node.op_type;
  if (op == "QuantizeLinear" || op == "DequantizeLinear") return true;
  if (is_floating(dtype)) return any_float;
  if (is_integral(dtype)) return any_integer;
  return any_bool || op == "ReduceMax" || op == "ReduceMin";
}

int count_present(const std::vector<ValueId>& ids) {
  return int(std::count_if(ids.begin(), ids.end(), [](ValueId v) { return v != kNoValue; }));
}

// Input and output counts, and required inputs that are omitted.
Status check_arity(const OnnxSchema& schema, const Node& node) {
  std::string desc = describe_node(node);
  int inputs = int(node.inputs.size()), outputs = int(node.outputs.size());
  int max_in = max_inputs_at(schema, node);
  auto plural = [](int n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); };
  auto range = [](int lo, int hi) {
    if (hi == std::numeric_limits<int>::max()) return fmt::format("at least {}", lo);
    return lo == hi ? fmt::format("{}", lo) : fmt::format("{} to {}", lo, hi);
  };
  std::string op = fmt::format("{}-{}", printable(node.op_type), schema.SinceVersion());
  if (inputs < schema.min_input() || inputs > max_in)
    return invalid_model(fmt::format("{} has {}; {} takes {}", desc, plural(inputs, "input"), op,
                                     range(schema.min_input(), max_in)));
  if (outputs < schema.min_output() || outputs > schema.max_output())
    return invalid_model(fmt::format("{} has {}; {} produces {}", desc, plural(outputs, "output"), op,
                                     range(schema.min_output(), schema.max_output())));
  const auto& formals = schema.inputs();
  for (size_t i = 0; i < node.inputs.size() && i < formals.size(); ++i) {
    const auto& f = formals[i];
    if (f.GetOption() == OnnxSchema::Single && node.inputs[i] == kNoValue)
      return invalid_model(fmt::format("{} omits input {} ('{}'), which {} requires", desc, i, f.GetName(), op));
  }
  if (!formals.empty() && formals.back().GetOption() == OnnxSchema::Variadic) {
    std::vector<ValueId> tail(node.inputs.begin() + std::min(node.inputs.size(), formals.size() - 1), node.inputs.end());
    if (count_present(tail) != int(tail.size()))
      return invalid_model(fmt::format("{} omits one of its '{}' inputs; {} cannot take an omitted one there", desc,
                                       formals.back().GetName(), op));
    if (count_present(tail) < formals.back().GetMinArity())
      return invalid_model(fmt::format("{} has {} '{}' inputs; {} takes at least {}", desc, count_present(tail),
                                       formals.back().GetName(), op, formals.back().GetMinArity()));
  }
  const auto& formal_outputs = schema.outputs();
  for (size_t i = 0; i < node.outputs.size() && i < formal_outputs.size(); ++i)
    if (formal_outputs[i].GetOption() == OnnxSchema::Single && node.outputs[i] == kNoValue)
      return invalid_model(fmt::format("{} omits output {} ('{}'), which {} always produces", desc, i,
                                       formal_outputs[i].GetName(), op));
  if (count_present(node.outputs) == 0 && outputs > 0)
    return invalid_model(fmt::format("{} omits every output", desc));
  return Status::ok();
}

Attribute::Kind kind_of(onnx::AttributeProto::AttributeType type) {
  using AP = onnx::AttributeProto;
  switch (type) {
    case AP::INT: return Attribute::Kind::kInt;
    case AP::FLOAT: return Attribute::Kind::kFloat;
    case AP::STRING: return Attribute::Kind::kString;
    case AP::INTS: return Attribute::Kind::kInts;
    case AP::FLOATS: return Attribute::Kind::kFloats;
    case AP::STRINGS: return Attribute::Kind::kStrings;
    case AP::TENSOR: return Attribute::Kind::kTensor;
    default: return Attribute::Kind::kGraph;
  }
}

bool known_kind(onnx::AttributeProto::AttributeType type) {
  using AP = onnx::AttributeProto;
  return type == AP::INT || type == AP::FLOAT || type == AP::STRING || type == AP::INTS || type == AP::FLOATS ||
         type == AP::STRINGS || type == AP::TENSOR || type == AP::GRAPH;
}

Status check_attributes(const OnnxSchema& schema, const Node& node, bool newer_than_schema) {
  std::string desc = describe_node(node);
  for (const auto& [name, attr] : schema.attributes())
    if (attr.required && !node.attributes.has(name))
      return invalid_model(fmt::format("{} lacks attribute '{}', which {}-{} requires", desc, name,
                                       printable(node.op_type), schema.SinceVersion()));
  for (const auto& [name, value] : node.attributes.all()) {
    auto it = schema.attributes().find(name);
    if (it == schema.attributes().end()) {
      if (newer_than_schema) continue;  // a later version of the op may define it
      return invalid_model(fmt::format("{} has attribute '{}', which {}-{} does not define", desc, printable(name),
                                       printable(node.op_type), schema.SinceVersion()));
    }
    if (!known_kind(it->second.type) || kind_of(it->second.type) == value.kind) continue;
    // An empty list carries no kind of its own in ONNX: ints and floats read alike.
    bool empty_list = (value.kind == Attribute::Kind::kInts && value.ints.empty()) ||
                      (value.kind == Attribute::Kind::kFloats && value.floats.empty());
    bool list_wanted = kind_of(it->second.type) == Attribute::Kind::kInts ||
                       kind_of(it->second.type) == Attribute::Kind::kFloats;
    if (empty_list && list_wanted) continue;
    return invalid_model(fmt::format("{} attribute '{}' is {}, but {}-{} takes {}", desc, name,
                                     attribute_kind_name(value.kind), printable(node.op_type), schema.SinceVersion(),
                                     attribute_kind_name(kind_of(it->second.type))));
  }
  return Status::ok();
}

// Where libonnx 1.12's schema binds an input to another input's type parameter and ONNX's
// definition does not: GridSample-16's grid is T2 (float types) beside X's T1, but that
// schema says T1, which refused an f32 X with an f16 grid. The op's shape function checks
// the input's type instead.
bool libonnx_binds_wrongly(const Node& node, size_t input) { return node.op_type == "GridSample" && input == 1; }

// Element types of the typed inputs, and inputs bound to one type parameter agreeing.
Status check_input_types(const Graph& graph, const OnnxSchema& schema, const Node& node, bool newer_than_schema) {
  const auto& formals = schema.inputs();
  if (formals.empty()) return Status::ok();
  std::map<std::string, std::pair<DType, size_t>> bound;  // type parameter -> (dtype, first input)
  std::map<std::string, bool> is_parameter;
  for (const auto& c : schema.typeConstraintParams()) is_parameter[c.type_param_str] = true;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue) continue;
    const Value& v = graph.value(node.inputs[i]);
    if (!v.has_type) continue;
    // Inputs past the schema's own: a variadic tail, or (a newer opset) inputs the older
    // schema does not know, whose types its shape function checks.
    if (i >= formals.size() && formals.back().GetOption() != OnnxSchema::Variadic) continue;
    const auto& f = formals[std::min(i, formals.size() - 1)];
    if (!takes(f, v.dtype, node, newer_than_schema))
      return invalid_model(fmt::format("{} input {} ('{}') is {}, which {}-{} does not take there", describe_node(node),
                                       i, printable(v.name), dtype_name(v.dtype), printable(node.op_type),
                                       schema.SinceVersion()));
    bool homogeneous = f.GetOption() != OnnxSchema::Variadic || f.GetIsHomogeneous();
    if (!is_parameter.count(f.GetTypeStr()) || !homogeneous || libonnx_binds_wrongly(node, i)) continue;
    auto [it, first] = bound.emplace(f.GetTypeStr(), std::make_pair(v.dtype, i));
    if (!first && it->second.first != v.dtype)
      return invalid_model(fmt::format("{} input {} is {} but input {} is {}; {}-{} takes one type for both",
                                       describe_node(node), i, dtype_name(v.dtype), it->second.second,
                                       dtype_name(it->second.first), printable(node.op_type), schema.SinceVersion()));
  }
  return Status::ok();
}

}  // namespace

Status check_model_opsets(const Graph& graph) {
  auto it = graph.opsets().find("");
  if (it != graph.opsets().end() && it->second > kMaxKnownOpset)
    return unsupported(fmt::format("the model imports ai.onnx opset {}; strider knows opsets up to {}", it->second,
                                   kMaxKnownOpset));
  return Status::ok();
}

bool has_onnx_signature(std::string_view op_type) {
  if (find_added_op(op_type)) return true;
  return onnx::OpSchemaRegistry::Schema(std::string(op_type), libonnx_max_opset(), onnx::ONNX_DOMAIN) != nullptr;
}

Status check_node_signature(const Graph& graph, const Node& node) {
  if (!node.domain.empty()) return Status::ok();
  if (const AddedOp* added = find_added_op(node.op_type)) return check_added_op(graph, node, *added);
  const OnnxSchema* schema = onnx::OpSchemaRegistry::Schema(node.op_type, node.opset, onnx::ONNX_DOMAIN);
  const OnnxSchema* newest = onnx::OpSchemaRegistry::Schema(node.op_type, libonnx_max_opset(), onnx::ONNX_DOMAIN);
  if (schema == nullptr && newest != nullptr)
    return invalid_model(fmt::format("{}: the op does not exist at opset {} (ONNX defines it from opset {})",
                                     describe_node(node), node.opset, oldest_version(node.op_type)));
  // An op libonnx does not know at all: every op strider registers has a schema (a test
  // says so), so only an unsupported op gets here, and check_ops_known has refused it.
  if (schema == nullptr) return Status::ok();
  // Before opset 7 many ops had other semantics (legacy broadcast and consumed_inputs
  // attributes, Reshape's shape as an attribute); strider implements what opset 7 and
  // later define, and an op version that was current then (Not-1) is still fine.
  if (node.opset < kOldestImplementedOpset && newest && newest->SinceVersion() > schema->SinceVersion())
    return unsupported(fmt::format("{}: opset {} gives {}-{}, a legacy version; strider implements ops as opset {} "
                                   "and later define them",
                                   describe_node(node), node.opset, printable(node.op_type), schema->SinceVersion(),
                                   kOldestImplementedOpset));
  bool newer_than_schema = node.opset > libonnx_max_opset();
  STRIDER_RETURN_IF_ERROR(check_arity(*schema, node));
  STRIDER_RETURN_IF_ERROR(check_attributes(*schema, node, newer_than_schema));
  return check_input_types(graph, *schema, node, newer_than_schema);
}

}  // namespace strider
