// Helpers for the strider_onnx tests: temporary folders, seeded random tensors and small
// ModelProtos built in C++ (no Python at test time).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "strider/tensor.h"

namespace strider::testing {

// A fresh folder under the system temp dir, removed with everything in it at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Whether the group `index` of `count` (say, the cases of one model) belongs to this process.
// ctest runs a binary registered with strider_add_test(... SHARD_BY_GROUP) as shards that
// each get whole groups (STRIDER_TEST_SHARDS / STRIDER_TEST_SHARD_INDEX), so what a group
// loads once (a model, its float64 reference) is loaded by one process, not by every shard
// as gtest's case-by-case sharding did. Without those variables every group is here.
bool group_in_this_shard(size_t index);

// Seeded random values spanning the dtype (negatives, fractions, both bool values).
Tensor random_tensor(DType dtype, Shape shape, uint32_t seed);
// Same dtype, shape and bytes.
bool same_tensor(const Tensor& a, const Tensor& b);

// A committed seed model (models/seed/NAME/model.onnx) and the input of its first test data
// set; a test fails (gtest's ADD_FAILURE) and gets an empty graph if either does not load.
struct SeedModel {
  Graph graph;
  Tensor input;
};
SeedModel load_seed_model(const std::string& name);

// The TensorProto holding `t` in its typed field (float_data, int32_data, ...), not raw_data.
onnx::TensorProto typed_proto(const Tensor& t, const std::string& name);

// A model with ir_version 8 importing ai.onnx `opset`; add inputs, nodes, outputs.
onnx::ModelProto make_model(int opset = 17);
// A graph input (or output) of ONNX element type `elem`; a dim is a value (>= 0), a
// dim_param name, or "" for a dim with neither.
struct Dim {
  Dim(int64_t v) : value(v) {}      // NOLINT(google-explicit-constructor)
  Dim(const char* p) : param(p) {}  // NOLINT(google-explicit-constructor)
  int64_t value = -1;
  std::string param;
};
onnx::ValueInfoProto* add_input(onnx::GraphProto* g, const std::string& name, int elem,
                                const std::vector<Dim>& dims);
onnx::ValueInfoProto* add_output(onnx::GraphProto* g, const std::string& name, int elem = 1);
onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op_type,
                          const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name = "");
std::vector<std::byte> serialize(const google::protobuf::MessageLite& message);
void write_bytes(const std::string& path, const std::vector<std::byte>& bytes);
void write_bytes(const std::string& path, const std::string& bytes);

}  // namespace strider::testing
