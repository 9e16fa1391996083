// GraphBuilder: makes IR graphs in C++ without ONNX files (tests, planner intent tests).
//
//   GraphBuilder b;                       // ai.onnx opset 17 unless given
//   ValueId x = b.input("x", DType::kF32, {2, 8});
//   ValueId w = b.constant("w", weights);  // a Tensor
//   ValueId y = b.op("MatMul", {x, w});
//   auto halves = b.ops("Split", {y}, 2, attrs);
//   b.output(halves[1]);
//   Graph g = b.build();
//
// Misuse (unknown value ids) is a programming error in the test and aborts.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace strider {

class GraphBuilder {
 public:
  explicit GraphBuilder(int opset = 17);

  ValueId input(const std::string& name, DType dtype, Shape shape);
  ValueId constant(const std::string& name, Tensor value);
  // A node with one output; returns it.
  ValueId op(const std::string& op_type, std::vector<ValueId> inputs, AttributeMap attributes = {},
             const std::string& name = "");
  // A node with `num_outputs` outputs.
  std::vector<ValueId> ops(const std::string& op_type, std::vector<ValueId> inputs,
                           int num_outputs, AttributeMap attributes = {},
                           const std::string& name = "");
  void output(ValueId value);
  Graph build() { return std::move(graph_); }
  Graph& graph() { return graph_; }

 private:
  std::string fresh_name(const std::string& base);
  Graph graph_;
  int counter_ = 0;
};

// Terse pieces for building test nodes: one-attribute maps and a 1-D i64 tensor.
AttributeMap int_attribute(const std::string& name, int64_t value);
AttributeMap ints_attribute(const std::string& name, std::vector<int64_t> values);
Tensor i64_tensor(std::vector<int64_t> values);

}  // namespace strider
