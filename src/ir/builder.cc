#include "ir/builder.h"

#include <fmt/format.h>

#include "base/check.h"

namespace strider {

GraphBuilder::GraphBuilder(int opset) { graph_.opsets()[""] = opset; }

std::string GraphBuilder::fresh_name(const std::string& base) {
  return fmt::format("{}.{}", base, counter_++);
}

ValueId GraphBuilder::input(const std::string& name, DType dtype, Shape shape) {
  auto id = graph_.add_value(name);
  STRIDER_CHECK(id.is_ok(), "{}", id.status().to_string());
  Value& v = graph_.value(*id);
  v.has_type = v.has_shape = true;
  v.dtype = dtype;
  v.shape = std::move(shape);
  graph_.inputs().push_back(*id);
  return *id;
}

ValueId GraphBuilder::constant(const std::string& name, Tensor value) {
  auto id = graph_.add_value(name);
  STRIDER_CHECK(id.is_ok(), "{}", id.status().to_string());
  Value& v = graph_.value(*id);
  v.has_type = v.has_shape = true;
  v.dtype = value.dtype();
  v.shape = value.shape();
  v.constant = std::make_shared<const Tensor>(std::move(value));
  return *id;
}

ValueId GraphBuilder::op(const std::string& op_type, std::vector<ValueId> inputs,
                         AttributeMap attributes, const std::string& name) {
  return ops(op_type, std::move(inputs), 1, std::move(attributes), name)[0];
}

std::vector<ValueId> GraphBuilder::ops(const std::string& op_type, std::vector<ValueId> inputs,
                                       int num_outputs, AttributeMap attributes,
                                       const std::string& name) {
  Node node;
  node.name = name.empty() ? fresh_name(op_type) : name;
  node.op_type = op_type;
  node.opset = graph_.opsets()[""];
  node.inputs = std::move(inputs);
  node.attributes = std::move(attributes);
  for (int i = 0; i < num_outputs; ++i) {
    auto id = graph_.add_value(fmt::format("{}:{}", node.name, i));
    STRIDER_CHECK(id.is_ok(), "{}", id.status().to_string());
    node.outputs.push_back(*id);
  }
  std::vector<ValueId> outputs = node.outputs;
  auto added = graph_.add_node(std::move(node));
  STRIDER_CHECK(added.is_ok(), "{}", added.status().to_string());
  return outputs;
}

void GraphBuilder::output(ValueId value) { graph_.outputs().push_back(value); }

AttributeMap int_attribute(const std::string& name, int64_t value) {
  AttributeMap a;
  a.set_int(name, value);
  return a;
}

AttributeMap ints_attribute(const std::string& name, std::vector<int64_t> values) {
  AttributeMap a;
  a.set_ints(name, std::move(values));
  return a;
}

Tensor i64_tensor(std::vector<int64_t> values) {
  return Tensor::from_values<int64_t>(DType::kI64, {int64_t(values.size())}, values);
}

}  // namespace strider
