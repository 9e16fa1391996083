// Helpers for the reference interpreter's tests: tensors from literal values, seeded random
// tensors (never all ones or zeros), and one-node graphs run through evaluate_reference.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "reference/reference.h"

namespace strider::testing {

// Tensor::from_values, except that an empty tensor copies nothing (memcpy from the null
// data() of an empty vector is undefined behaviour).
template <typename T>
Tensor tensor_of(DType dtype, Shape shape, const std::vector<T>& values) {
  if (values.empty()) return Tensor(dtype, std::move(shape));
  return Tensor::from_values<T>(dtype, std::move(shape), values);
}

inline Tensor f32(Shape shape, const std::vector<float>& values) {
  return tensor_of<float>(DType::kF32, std::move(shape), values);
}
inline Tensor f64(Shape shape, const std::vector<double>& values) {
  return tensor_of<double>(DType::kF64, std::move(shape), values);
}
inline Tensor i64(Shape shape, const std::vector<int64_t>& values) {
  return tensor_of<int64_t>(DType::kI64, std::move(shape), values);
}
inline Tensor i32(Shape shape, const std::vector<int32_t>& values) {
  return tensor_of<int32_t>(DType::kI32, std::move(shape), values);
}
inline Tensor u8(Shape shape, const std::vector<uint8_t>& values) {
  return tensor_of<uint8_t>(DType::kU8, std::move(shape), values);
}
inline Tensor boolean(Shape shape, const std::vector<uint8_t>& values) {
  return tensor_of<uint8_t>(DType::kBool, std::move(shape), values);
}

// Uniform values in [low, high) from a fixed seed.
inline Tensor random_f32(Shape shape, uint32_t seed, float low = -2.0f, float high = 2.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(low, high);
  Tensor t(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(engine);
  return t;
}

inline std::vector<double> doubles(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_double(i));
  return v;
}

// One node of `op_type` reading `inputs` (nullopt = an omitted optional input) as graph
// inputs; returns its outputs, or the evaluation's error.
inline Result<std::vector<RefTensor>> run_op(const std::string& op_type,
                                             const std::vector<std::optional<Tensor>>& inputs,
                                             AttributeMap attributes = {}, int opset = 17,
                                             int num_outputs = 1) {
  GraphBuilder b(opset);
  std::vector<ValueId> ids;
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      ids.push_back(kNoValue);
      continue;
    }
    std::string name = "in" + std::to_string(i);
    ids.push_back(b.input(name, inputs[i]->dtype(), inputs[i]->shape()));
    feeds.emplace(name, *inputs[i]);
  }
  std::vector<ValueId> outputs =
      b.ops(op_type, ids, num_outputs, std::move(attributes), "the_node");
  for (ValueId o : outputs) b.output(o);
  STRIDER_ASSIGN_OR_RETURN(ReferenceResult result, evaluate_reference(b.build(), feeds));
  return std::move(result.outputs);
}

// The single output of a one-node graph; fails the test on error.
inline RefTensor run_one(const std::string& op_type,
                         const std::vector<std::optional<Tensor>>& inputs,
                         AttributeMap attributes = {}, int opset = 17) {
  auto result = run_op(op_type, inputs, std::move(attributes), opset);
  EXPECT_TRUE(result.is_ok()) << result.status().to_string();
  if (!result.is_ok()) return RefTensor{};
  return result->at(0);
}

inline std::vector<double> values_of(const RefTensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_double(i));
  return v;
}

// Element-by-element comparison with a tolerance relative to the expected magnitude.
inline void expect_near_all(const std::vector<double>& actual, const std::vector<double>& expected,
                            double tolerance = 1e-12) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance * std::max(1.0, std::abs(expected[i])))
        << "element " << i;
}

inline AttributeMap attrs(std::initializer_list<std::pair<const char*, int64_t>> ints) {
  AttributeMap a;
  for (const auto& [name, value] : ints) a.set_int(name, value);
  return a;
}

}  // namespace strider::testing
