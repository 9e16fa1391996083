// The op registry: for every supported ONNX op, its shape-and-dtype function and its
// traits. Kernels are not here: each device declares its own (src/hal/*).
//
// Shape inference is our own (not libonnx's): every value must have a static shape when a
// session is created, so a shape function may read the values of constant inputs (the
// `shape` of Reshape, the `sizes` of Resize) and must fail with a message naming the
// node and the field when it cannot determine a shape.
#pragma once

#include <fmt/format.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

// A read-only view of one node and its inputs: what shape functions and kernels both use to
// resolve a node's parameters (Slice's starts, Split's sizes, ...).
class NodeInputs {
 public:
  NodeInputs(const Graph& graph, const Node& node) : graph_(graph), node_(node) {}

  const Graph& graph() const { return graph_; }
  const Node& node() const { return node_; }
  const AttributeMap& attributes() const { return node_.attributes; }
  int opset() const { return node_.opset; }

  size_t num_inputs() const { return node_.inputs.size(); }
  size_t num_outputs() const { return node_.outputs.size(); }
  bool has_input(size_t i) const { return node_.input(i) != kNoValue; }
  bool has_output(size_t i) const { return i < num_outputs() && node_.outputs[i] != kNoValue; }
  // Input i, or an empty value with no type for an omitted or missing input: never throws
  // (signatures are checked first, so a shape function that reads one has a bug of its
  // own, which then fails on the empty value's shape instead of crashing).
  const Value& input(size_t i) const {
    static const Value kAbsent;
    return has_input(i) ? graph_.value(node_.inputs[i]) : kAbsent;
  }
  DType input_dtype(size_t i) const { return input(i).dtype; }
  const Shape& input_shape(size_t i) const { return input(i).shape; }
  int64_t input_rank(size_t i) const { return int64_t(input(i).shape.size()); }
  // The value of input i if it is a constant, else nullptr.
  const Tensor* input_constant(size_t i) const {
    return has_input(i) ? input(i).constant.get() : nullptr;
  }
  // The value of input i read as integers (any integer dtype), or an error naming the
  // input when it is not a constant: static shapes need it at session creation.
  Result<std::vector<int64_t>> constant_ints(size_t i, std::string_view what) const;
  Result<std::vector<double>> constant_floats(size_t i, std::string_view what) const;

  // An INVALID_MODEL status; the caller adds the node's name.
  template <typename... Args>
  Status error(fmt::format_string<Args...> format, Args&&... args) const {
    return invalid_model(fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  const Graph& graph_;
  const Node& node_;
};

// What a shape function sees: the node's inputs, and setters for its outputs. Errors it
// returns are prefixed with the node by the caller.
class InferContext : public NodeInputs {
 public:
  InferContext(Graph& graph, NodeId node)
      : NodeInputs(graph, graph.node(node)), mutable_graph_(graph) {}

  void set_output(size_t i, DType dtype, Shape shape);
  // Output i's shape as set so far (for a fused op that checks operands against it).
  const Shape& output_shape(size_t i) const { return mutable_graph_.value(node().outputs[i]).shape; }
  // For outputs known from shapes alone (Shape, Size, Constant): sets type and constant.
  void set_output_constant(size_t i, Tensor value);

 private:
  Graph& mutable_graph_;
};

using InferFn = Status (*)(InferContext&);

// How an op's output can be a view of its input (no kernel, no copy) when the planner
// lowers it: the view is computed from the input's view by the TensorView algebra.
enum class ViewKind : uint8_t {
  kNone,
  kSameElements,  // Identity, Reshape, Flatten, Squeeze, Unsqueeze: reshape_view of the input
  kTranspose,     // permute_view
  kSlice,         // slice_view per axis (negative steps too)
  kSplit,         // one slice_view per output
  kExpand,        // broadcast_view (stride 0)
  kGather,        // a scalar constant index: one position of the axis, the axis dropped
};

// What the planner may do with a node of this op (docs/MEMORY_MODEL.md rule 6).
struct OpTraits {
  ViewKind view = ViewKind::kNone;
  // Elementwise: output element i depends only on input elements i, so the output may be
  // written over an input of the same sizes and strides that dies here.
  bool in_place = false;
};

struct OpSchema {
  std::string_view op_type;
  InferFn infer = nullptr;
  // Float inputs that are parameters, not data, and so keep f32 when the session computes
  // in bf16 (Resize's roi and scales).
  std::vector<int> float_parameter_inputs;
  // Inputs whose values decide output shapes (Reshape's shape, Slice's bounds): with
  // static shapes they must be known when the session is created.
  std::vector<int> shape_inputs;
  OpTraits traits;
};

// The domain of the ops strider's planner inserts (never read from a model's nodes).
inline constexpr std::string_view kStriderDomain = "strider";

// nullptr when strider does not know the op: the default domain ("" or "ai.onnx"), and
// strider's own ops in kStriderDomain.
const OpSchema* find_op_schema(std::string_view domain, std::string_view op_type);
// Every op type the registry knows, sorted.
std::vector<std::string_view> registered_op_types();

// Registration, one call per op family file (ops/*.cc); the registry calls them all.
void register_elementwise_ops(std::vector<OpSchema>& ops);
void register_tensor_ops(std::vector<OpSchema>& ops);
void register_nn_ops(std::vector<OpSchema>& ops);
void register_resize_ops(std::vector<OpSchema>& ops);
void register_grid_ops(std::vector<OpSchema>& ops);  // GridSample, AffineGrid (grid_sample.cc)
void register_roi_align_ops(std::vector<OpSchema>& ops);  // roi_align.cc
// strider's FusedElementwise (ops/fused_elementwise.h).
OpSchema fused_elementwise_schema();
OpSchema fused_conv_schema();
OpSchema fused_gated_conv_schema();
OpSchema fused_matmul_schema();
OpSchema fused_attention_schema();  // ops/fused_attention.h
OpSchema fused_map_group_schema();  // ops/fused_map_group.h

}  // namespace strider
