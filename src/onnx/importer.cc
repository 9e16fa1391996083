#include "onnx/importer.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <functional>
#include <limits>
#include <queue>
#include <set>
#include <unordered_map>

#include "base/checked_math.h"
#include "base/memory_budget.h"
#include "strider/printable.h"
#include "onnx/attribute_proto.h"
#include "onnx/file_io.h"
#include "onnx/tensor_proto.h"

namespace strider {
namespace {

std::string normalize_domain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

// Protobuf accepts many truncated or random buffers; a model without these is not one.
std::string why_not_a_model(const onnx::ModelProto& model) {
  if (model.ir_version() <= 0) return "it has no ir_version";
  if (!model.has_graph()) return "it has no graph";
  if (model.opset_import_size() == 0) return "it imports no opset";
  if (model.graph().output_size() == 0) return "its graph has no outputs";
  return {};
}

// How deep graph attributes may nest (an If in a Loop body is 2): deeper is refused before
// it is read, so a hostile model cannot recurse the importer off its stack.
constexpr int kMaxSubgraphDepth = 16;

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string base_dir, const ImportOptions& options)
      : model_(model),
        graph_proto_(model.graph()),
        base_dir_(std::move(base_dir)),
        options_(options),
        constant_bytes_(&own_constant_bytes_) {}

  // A graph attribute's body, inside `parent` (whose values it may read by name).
  Importer(const onnx::GraphProto& body, Importer& parent)
      : model_(parent.model_),
        graph_proto_(body),
        base_dir_(parent.base_dir_),
        options_(parent.options_),
        parent_(&parent),
        depth_(parent.depth_ + 1),
        constant_bytes_(parent.constant_bytes_) {}

  Result<Graph> run() {
    STRIDER_RETURN_IF_ERROR(import_opsets());
    return import_graph();
  }

  Result<Subgraph> run_subgraph() {
    graph_.opsets() = parent_->graph_.opsets();
    STRIDER_ASSIGN_OR_RETURN(Graph graph, import_graph());
    return Subgraph{std::move(graph), std::move(outer_)};
  }

 private:
  Result<Graph> import_graph() {
    STRIDER_RETURN_IF_ERROR(import_initializers());
    STRIDER_RETURN_IF_ERROR(import_inputs());
    STRIDER_RETURN_IF_ERROR(name_nodes());
    STRIDER_ASSIGN_OR_RETURN(std::vector<int> order, node_order());
    for (int index : order) STRIDER_RETURN_IF_ERROR(import_node(index));
    STRIDER_RETURN_IF_ERROR(import_outputs());
    return std::move(graph_);
  }

  std::string describe_node(int index) const {
    return fmt::format("node '{}' ({})", printable(node_names_[size_t(index)]),
                       printable(graph_proto_.node(index).op_type()));
  }

  Status reserve_constant(const onnx::TensorProto& proto, const std::string& what);
  Status import_opsets();
  Status import_initializers();
  Status import_inputs();
  Status set_input_type(Value& value, const onnx::ValueInfoProto& info);
  Status name_nodes();
  Result<std::vector<int>> node_order();
  Status import_node(int index);
  Status import_attributes(const onnx::NodeProto& proto, const std::string& desc, Node& node);
  Status import_outputs();
  // The value named `name` here, or (in a body) an outer reference to an enclosing graph's
  // value, added here as a value with no producer; nullopt if no scope has it.
  std::optional<ValueId> lookup(const std::string& name);

  const onnx::ModelProto& model_;
  const onnx::GraphProto& graph_proto_;
  std::string base_dir_;
  ImportOptions options_;
  Importer* parent_ = nullptr;  // the enclosing graph's importer, for a body
  int depth_ = 0;
  Graph graph_;
  std::set<std::string> initializer_names_;
  int64_t own_constant_bytes_ = 0;
  int64_t* constant_bytes_;  // the whole model's, bodies included
  std::vector<std::string> node_names_;
  std::vector<std::string> outer_;  // a body's outer references, in first-use order
};

std::optional<ValueId> Importer::lookup(const std::string& name) {
  if (std::optional<ValueId> id = graph_.find_value(name)) return id;
  if (parent_ == nullptr || !parent_->lookup(name)) return std::nullopt;
  Result<ValueId> id = graph_.add_value(name);
  if (!id.is_ok()) return std::nullopt;
  outer_.push_back(name);
  return *id;
}

// Sizes are checked before the bytes are read, so weights beyond the budget are never
// loaded (a 2^40-element initializer in external data would otherwise be read first).
Status Importer::reserve_constant(const onnx::TensorProto& proto, const std::string& what) {
  std::optional<DType> dtype = dtype_from_onnx(proto.data_type());
  if (!dtype) return Status::ok();  // tensor_from_proto names the type it refuses
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  std::optional<int64_t> count = checked_element_count(dims, dtype_size(*dtype));
  if (!count) return Status::ok();  // and the dims it refuses
  *constant_bytes_ += *count * dtype_size(*dtype);
  if (*constant_bytes_ > options_.max_constant_bytes)
    return resource_exhausted(fmt::format("{}: the initializers need more than the memory budget of {} ({} bytes)",
                                          what, format_bytes(options_.max_constant_bytes),
                                          options_.max_constant_bytes));
  return Status::ok();
}

Status Importer::import_opsets() {
  for (const auto& opset : model_.opset_import()) {
    std::string domain = normalize_domain(opset.domain());
    if (opset.version() <= 0 || opset.version() > std::numeric_limits<int>::max())
      return invalid_model(fmt::format("opset_import of domain '{}' has version {}", printable(opset.domain()),
                                       opset.version()));
    auto [it, inserted] = graph_.opsets().emplace(domain, int(opset.version()));
    if (!inserted && it->second != int(opset.version()))
      return invalid_model(fmt::format("opset_import lists domain '{}' twice (versions {} and {})",
                                       printable(opset.domain()), it->second, opset.version()));
  }
  return Status::ok();
}

Status Importer::import_initializers() {
  if (graph_proto_.sparse_initializer_size() > 0)
    return unsupported(fmt::format("sparse initializer '{}' is not supported",
                                   graph_proto_.sparse_initializer(0).values().name()));
  for (const auto& proto : graph_proto_.initializer()) {
    if (proto.name().empty()) return invalid_model("an initializer has no name");
    std::string what = fmt::format("initializer '{}'", printable(proto.name()));
    STRIDER_RETURN_IF_ERROR(reserve_constant(proto, what));
    STRIDER_ASSIGN_OR_RETURN(Tensor tensor, tensor_from_proto(proto, base_dir_, what));
    STRIDER_ASSIGN_OR_RETURN(ValueId id, graph_.add_value(proto.name()));
    Value& v = graph_.value(id);
    v.has_type = v.has_shape = true;
    v.dtype = tensor.dtype();
    v.shape = tensor.shape();
    v.constant = std::make_shared<const Tensor>(std::move(tensor));
    initializer_names_.insert(proto.name());
  }
  return Status::ok();
}

Status Importer::import_inputs() {
  for (const auto& info : graph_proto_.input()) {
    if (info.name().empty()) return invalid_model("a graph input has no name");
    if (initializer_names_.count(info.name())) continue;  // IR < 4: a constant, not an input
    Result<ValueId> id = graph_.add_value(info.name());
    if (!id.is_ok()) return invalid_model(fmt::format("graph input '{}' is listed twice", printable(info.name())));
    // A body's formal inputs may leave their type out (the node's operands give it).
    if (parent_ == nullptr || info.type().value_case() != onnx::TypeProto::VALUE_NOT_SET)
      STRIDER_RETURN_IF_ERROR(set_input_type(graph_.value(*id), info));
    graph_.inputs().push_back(*id);
  }
  return Status::ok();
}

Status Importer::set_input_type(Value& value, const onnx::ValueInfoProto& info) {
  std::string what = fmt::format("graph input '{}'", printable(info.name()));
  const onnx::TypeProto& type = info.type();
  if (!type.has_tensor_type()) {
    if (type.value_case() == onnx::TypeProto::VALUE_NOT_SET)
      return invalid_model(fmt::format("{} has no type", what));
    const char* kind = type.has_sequence_type()        ? "a sequence"
                       : type.has_map_type()           ? "a map"
                       : type.has_optional_type()      ? "an optional"
                       : type.has_sparse_tensor_type() ? "a sparse tensor"
                                                       : "not a tensor";
    return unsupported(fmt::format("{} is {}; strider supports tensor inputs only", what, kind));
  }
  const auto& tensor_type = type.tensor_type();
  int elem = tensor_type.elem_type();
  if (elem == onnx::TensorProto::UNDEFINED)
    return invalid_model(fmt::format("{} has no element type", what));
  std::optional<DType> dtype = dtype_from_onnx(elem);
  if (!dtype)
    return unsupported(fmt::format("{} has element type {}, which strider does not support", what,
                                   onnx_type_name(elem)));
  value.has_type = true;
  value.dtype = *dtype;
  if (!tensor_type.has_shape()) return Status::ok();  // rank unknown
  value.has_shape = true;
  bool symbolic = false;
  std::vector<std::string> params;
  for (int d = 0; d < tensor_type.shape().dim_size(); ++d) {
    const auto& dim = tensor_type.shape().dim(d);
    if (dim.has_dim_value()) {
      if (dim.dim_value() < 0)
        return invalid_model(fmt::format("{} dim {} is {}", what, d, dim.dim_value()));
      value.shape.push_back(dim.dim_value());
      params.emplace_back();
    } else {
      value.shape.push_back(-1);
      params.push_back(dim.dim_param().empty() ? "?" : dim.dim_param());
      symbolic = true;
    }
  }
  if (symbolic) value.dim_params = std::move(params);
  // Known dims must describe a tensor (at most 2^52 bytes): [2^62, 4] wraps to 0 elements.
  Shape known;
  for (int64_t d : value.shape) known.push_back(std::max<int64_t>(d, 1));
  if (!checked_element_count(known, dtype_size(value.dtype)))
    return invalid_model(fmt::format("{} {}{} is too large (more than 2^52 bytes)", what, dtype_name(value.dtype),
                                     shape_to_string(value.shape)));
  return Status::ok();
}

Status Importer::name_nodes() {
  std::set<std::string> used;
  for (const auto& node : graph_proto_.node())
    if (!node.name().empty()) used.insert(node.name());
  for (int i = 0; i < graph_proto_.node_size(); ++i) {
    const auto& node = graph_proto_.node(i);
    if (node.op_type().empty()) return invalid_model(fmt::format("node {} has no op_type", i));
    std::string name = node.name();
    if (name.empty()) {
      std::string base = fmt::format("{}_{}", node.op_type(), i);
      name = base;
      for (int k = 1; used.count(name); ++k) name = fmt::format("{}_{}", base, k);
      used.insert(name);
    }
    node_names_.push_back(std::move(name));
  }
  return Status::ok();
}

// The model's order when it is topological; otherwise (sort_nodes) a stable topological
// order: among the nodes that are ready, the one earliest in the model goes first.
Result<std::vector<int>> Importer::node_order() {
  int n = graph_proto_.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const std::string& out : graph_proto_.node(i).output())
      if (!out.empty()) producer.emplace(out, i);
  std::vector<std::vector<int>> users(static_cast<size_t>(n));
  std::vector<int> pending(size_t(n), 0);
  bool in_order = true;
  for (int i = 0; i < n; ++i) {
    for (const std::string& in : graph_proto_.node(i).input()) {
      auto it = producer.find(in);
      if (in.empty() || it == producer.end()) continue;
      in_order = in_order && it->second < i;
      users[size_t(it->second)].push_back(i);
      ++pending[size_t(i)];
    }
  }
  std::vector<int> order;
  if (in_order || !options_.sort_nodes) {
    for (int i = 0; i < n; ++i) order.push_back(i);
    return order;
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i)
    if (pending[size_t(i)] == 0) ready.push(i);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int user : users[size_t(i)])
      if (--pending[size_t(user)] == 0) ready.push(user);
  }
  for (int i = 0; i < n; ++i)
    if (pending[size_t(i)] > 0)
      return invalid_model(
          fmt::format("{} is part of a cycle: its inputs depend on its outputs", describe_node(i)));
  return order;
}

Status Importer::import_node(int index) {
  const onnx::NodeProto& proto = graph_proto_.node(index);
  std::string desc = describe_node(index);
  Node node;
  node.name = node_names_[size_t(index)];
  node.op_type = proto.op_type();
  node.domain = normalize_domain(proto.domain());
  if (node.domain == "strider")  // strider's own ops are made by its passes, never read from a file
    return invalid_model(fmt::format("{} is in domain 'strider', which models may not use", desc));
  auto opset = graph_.opsets().find(node.domain);
  if (opset == graph_.opsets().end())
    return invalid_model(
        fmt::format("{} uses domain '{}', which the model does not import "
                    "(opset_import)",
                    desc, printable(proto.domain())));
  node.opset = opset->second;
  for (int k = 0; k < proto.input_size(); ++k) {
    const std::string& name = proto.input(k);
    std::optional<ValueId> id = name.empty() ? std::optional<ValueId>(kNoValue) : lookup(name);
    if (!id)
      return invalid_model(
          fmt::format("{} input {} '{}' is not produced by any earlier node, "
                      "graph input or initializer",
                      desc, k, printable(name)));
    node.inputs.push_back(*id);
  }
  for (int k = 0; k < proto.output_size(); ++k) {
    const std::string& name = proto.output(k);
    if (name.empty()) {
      node.outputs.push_back(kNoValue);
      continue;
    }
    Result<ValueId> id = graph_.add_value(name);
    if (!id.is_ok())
      return invalid_model(fmt::format("{} output {} '{}' is already defined", desc, k, printable(name)));
    node.outputs.push_back(*id);
  }
  STRIDER_RETURN_IF_ERROR(import_attributes(proto, desc, node));
  return graph_.add_node(std::move(node)).status();
}

// The attributes; a GRAPH attribute's body is imported here (it may read this graph's
// values), and what the bodies read from outside becomes the node's implicit inputs.
Status Importer::import_attributes(const onnx::NodeProto& proto, const std::string& desc, Node& node) {
  for (const auto& attr : proto.attribute()) {
    STRIDER_ASSIGN_OR_RETURN(Attribute a, attribute_from_proto(attr, base_dir_, desc));
    if (node.attributes.has(attr.name()))
      return invalid_model(fmt::format("{} has attribute '{}' twice", desc, printable(attr.name())));
    if (attr.type() == onnx::AttributeProto::GRAPH || (attr.type() == onnx::AttributeProto::UNDEFINED && attr.has_g())) {
      if (depth_ + 1 > kMaxSubgraphDepth)
        return unsupported(fmt::format("{} attribute '{}': graphs nested more than {} deep", desc,
                                       printable(attr.name()), kMaxSubgraphDepth));
      Result<Subgraph> body = Importer(attr.g(), *this).run_subgraph();
      if (!body.is_ok()) return body.status().with_context(fmt::format("{} attribute '{}'", desc, printable(attr.name())));
      a.graph = std::make_shared<const Subgraph>(std::move(*body));
    }
    node.attributes.set(attr.name(), std::move(a));
  }
  for (const std::string& name : implicit_input_names(node)) {
    std::optional<ValueId> id = graph_.find_value(name);
    if (!id) return internal_error(fmt::format("{}: outer reference '{}' was not resolved", desc, printable(name)));
    node.inputs.push_back(*id);
  }
  return Status::ok();
}

Status Importer::import_outputs() {
  std::set<std::string> seen;
  for (const auto& info : graph_proto_.output()) {
    if (info.name().empty()) return invalid_model("a graph output has no name");
    if (!seen.insert(info.name()).second)
      return invalid_model(fmt::format("graph output '{}' is listed twice", printable(info.name())));
    std::optional<ValueId> id = lookup(info.name());
    if (!id)
      return invalid_model(
          fmt::format("graph output '{}' is not produced by any node, graph "
                      "input or initializer",
                      printable(info.name())));
    graph_.outputs().push_back(*id);
    Value declared;  // informational: a declaration strider cannot read is left out, not an error
    declared.name = info.name();
    if (!set_input_type(declared, info).is_ok()) declared = Value{info.name()};
    graph_.declared_outputs().push_back(std::move(declared));
  }
  return Status::ok();
}

}  // namespace

Result<Graph> import_model_file(const std::string& path, const ImportOptions& options) {
  std::string what = fmt::format("model '{}'", path);
  STRIDER_ASSIGN_OR_RETURN(auto bytes, onnx_io::read_file(path, what));
  return import_model_bytes(bytes, onnx_io::parent_folder(path), path, options);
}

Result<Graph> import_model_bytes(std::span<const std::byte> bytes, const std::string& base_dir,
                                 const std::string& what, const ImportOptions& options) {
  std::string context = fmt::format("model '{}'", what);
  if (bytes.size() > size_t(std::numeric_limits<int>::max()))
    return invalid_model(
        fmt::format("{}: {} bytes exceeds protobuf's 2 GiB limit (large "
                    "weights belong in external data)",
                    context, bytes.size()));
  onnx::ModelProto model;
  std::string reason;
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    reason = "(truncated or corrupt?)";
  else if (std::string why = why_not_a_model(model); !why.empty())
    reason = "(truncated or corrupt?): " + why;
  if (!reason.empty())
    return invalid_model(fmt::format("{}: not a valid ONNX ModelProto {}", context, reason));
  Result<Graph> graph = Importer(model, base_dir, options).run();
  if (!graph.is_ok()) return graph.status().with_context(context);
  return graph;
}

}  // namespace strider
