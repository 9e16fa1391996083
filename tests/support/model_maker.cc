#include "support/model_maker.h"

#include <cstring>

namespace strider::testing {

ModelMaker& ModelMaker::input(const std::string& name, int elem, const std::vector<Dim>& dims) {
  add_input(graph(), name, elem, dims);
  return *this;
}

ModelMaker& ModelMaker::output(const std::string& name, int elem) {
  add_output(graph(), name, elem);
  return *this;
}

ModelMaker& ModelMaker::node(const std::string& op_type, const std::vector<std::string>& inputs,
                             const std::vector<std::string>& outputs, const std::string& name) {
  last_ = add_node(graph(), op_type, inputs, outputs, name);
  return *this;
}

ModelMaker& ModelMaker::domain(const std::string& domain) {
  last_->set_domain(domain);
  return *this;
}

ModelMaker& ModelMaker::attr(const std::string& name, int64_t value) {
  auto* a = last_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
  return *this;
}

ModelMaker& ModelMaker::attr(const std::string& name, const std::vector<int64_t>& values) {
  auto* a = last_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
  return *this;
}

ModelMaker& ModelMaker::attr(const std::string& name, float value) {
  auto* a = last_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
  return *this;
}

ModelMaker& ModelMaker::attr(const std::string& name, const std::string& value) {
  auto* a = last_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
  return *this;
}

ModelMaker& ModelMaker::attr_tensor(const std::string& name, const onnx::TensorProto& value) {
  auto* a = last_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = value;
  return *this;
}

ModelMaker& ModelMaker::attr_graph(const std::string& name, const onnx::GraphProto& body) {
  auto* a = last_->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body;
  return *this;
}

onnx::TensorProto tensor_i64(const std::vector<int64_t>& dims, const std::vector<int64_t>& values,
                             const std::string& name) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(kInt64);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
  return t;
}

onnx::TensorProto tensor_f32(const std::vector<int64_t>& dims, const std::vector<float>& values,
                             const std::string& name) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(kFloat);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return t;
}

ModelMaker& ModelMaker::init_i64(const std::string& name, const std::vector<int64_t>& dims,
                                 const std::vector<int64_t>& values) {
  *graph()->add_initializer() = tensor_i64(dims, values, name);
  return *this;
}

ModelMaker& ModelMaker::init_f32(const std::string& name, const std::vector<int64_t>& dims,
                                 const std::vector<float>& values) {
  *graph()->add_initializer() = tensor_f32(dims, values, name);
  return *this;
}

ModelMaker& ModelMaker::init_external(const std::string& name, int elem, const std::vector<int64_t>& dims,
                                      const std::string& location, int64_t offset, int64_t length) {
  onnx::TensorProto* t = graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  for (int64_t d : dims) t->add_dims(d);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* key, const std::string& value) {
    auto* e = t->add_external_data();
    e->set_key(key);
    e->set_value(value);
  };
  add("location", location);
  if (offset >= 0) add("offset", std::to_string(offset));
  if (length >= 0) add("length", std::to_string(length));
  return *this;
}

void ModelMaker::save(const std::string& path) const { write_bytes(path, serialize(model_)); }

}  // namespace strider::testing
