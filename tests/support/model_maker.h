// ModelMaker: a small fluent builder of ONNX ModelProtos for tests that need models no
// exporter would write (hostile sizes, wrong arity, forged names). Attributes and
// initializers go on the node or graph directly; nothing is validated here, on purpose.
//
//   ModelMaker m(17);
//   m.input("x", kFloat, {kHuge, 4}).init_i64("i", {1}, {0});
//   m.node("Gather", {"x", "i"}, {"y"}).attr("axis", 0);
//   m.output("y").save(dir.file("model.onnx"));
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace strider::testing {

inline constexpr int kFloat = onnx::TensorProto::FLOAT;
inline constexpr int kInt64 = onnx::TensorProto::INT64;

class ModelMaker {
 public:
  explicit ModelMaker(int opset = 17) : model_(make_model(opset)) {}

  ModelMaker& input(const std::string& name, int elem, const std::vector<Dim>& dims);
  ModelMaker& output(const std::string& name, int elem = kFloat);
  // A node; attr() calls that follow apply to it.
  ModelMaker& node(const std::string& op_type, const std::vector<std::string>& inputs,
                   const std::vector<std::string>& outputs, const std::string& name = "");
  ModelMaker& domain(const std::string& domain);
  ModelMaker& attr(const std::string& name, int64_t value);
  ModelMaker& attr(const std::string& name, const std::vector<int64_t>& values);
  ModelMaker& attr(const std::string& name, float value);
  ModelMaker& attr(const std::string& name, const std::string& value);
  ModelMaker& attr_tensor(const std::string& name, const onnx::TensorProto& value);
  // A GRAPH attribute (If's branches, Loop's and Scan's body): another maker's graph.
  ModelMaker& attr_graph(const std::string& name, const onnx::GraphProto& body);
  // Initializers in raw_data.
  ModelMaker& init_i64(const std::string& name, const std::vector<int64_t>& dims,
                       const std::vector<int64_t>& values);
  ModelMaker& init_f32(const std::string& name, const std::vector<int64_t>& dims,
                       const std::vector<float>& values);
  // An initializer whose bytes live in `location` (relative to the model's folder).
  ModelMaker& init_external(const std::string& name, int elem, const std::vector<int64_t>& dims,
                            const std::string& location, int64_t offset = -1, int64_t length = -1);

  onnx::ModelProto& proto() { return model_; }
  onnx::GraphProto* graph() { return model_.mutable_graph(); }
  void save(const std::string& path) const;

 private:
  onnx::ModelProto model_;
  onnx::NodeProto* last_ = nullptr;
};

onnx::TensorProto tensor_i64(const std::vector<int64_t>& dims, const std::vector<int64_t>& values,
                             const std::string& name = "");
onnx::TensorProto tensor_f32(const std::vector<int64_t>& dims, const std::vector<float>& values,
                             const std::string& name = "");

}  // namespace strider::testing
