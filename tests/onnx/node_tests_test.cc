// Imports every model of the ONNX backend node tests and reads their tensor files. Only
// built when the folder existed at configure time (STRIDER_ONNX_NODE_TESTS_DIR).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "onnx/file_io.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"

#ifdef STRIDER_ONNX_NODE_TESTS_DIR
namespace strider {
namespace {
namespace fs = std::filesystem;

struct Counts {
  int models = 0, imported = 0, files_read = 0, files_skipped = 0;
  std::map<std::string, int> failures;  // by status code
};

// The declared dtype of a graph input/output, if it is a tensor strider supports.
std::optional<DType> declared_dtype(const onnx::ValueInfoProto& info) {
  if (!info.type().has_tensor_type()) return std::nullopt;
  return dtype_from_onnx(info.type().tensor_type().elem_type());
}

void check_tensor_file(const fs::path& file, const onnx::ValueInfoProto& info, Counts& counts) {
  std::optional<DType> dtype = declared_dtype(info);
  if (!dtype) {
    ++counts.files_skipped;
    return;
  }
  Result<Tensor> t = read_tensor_pb(file.string());
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype(), *dtype) << file;
  const auto& type = info.type().tensor_type();
  if (type.has_shape()) {
    ASSERT_EQ(t->rank(), type.shape().dim_size()) << file;
    for (int d = 0; d < type.shape().dim_size(); ++d) {
      if (type.shape().dim(d).has_dim_value()) {
        EXPECT_EQ(t->shape()[size_t(d)], type.shape().dim(d).dim_value()) << file << " dim " << d;
      }
    }
  }
  ++counts.files_read;
}

void check_data_sets(const fs::path& dir, const onnx::GraphProto& graph, Counts& counts) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_directory()) continue;
    for (int i = 0; i < graph.input_size(); ++i) {
      fs::path file = entry.path() / fmt::format("input_{}.pb", i);
      if (fs::exists(file)) check_tensor_file(file, graph.input(i), counts);
    }
    for (int i = 0; i < graph.output_size(); ++i) {
      fs::path file = entry.path() / fmt::format("output_{}.pb", i);
      if (fs::exists(file)) check_tensor_file(file, graph.output(i), counts);
    }
  }
}

TEST(OnnxNodeTests, EveryModelImportsOrFailsWithAStatus) {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(STRIDER_ONNX_NODE_TESTS_DIR))
    if (fs::exists(entry.path() / "model.onnx")) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  ASSERT_GT(dirs.size(), 500u);
  Counts counts;
  for (const fs::path& dir : dirs) {
    std::string path = (dir / "model.onnx").string();
    ++counts.models;
    Result<Graph> g = import_model_file(path);
    if (g.is_ok()) {
      ++counts.imported;
      EXPECT_FALSE(g->outputs().empty()) << path;
    } else {
      ++counts.failures[std::string(status_code_name(g.status().code()))];
      EXPECT_NE(g.status().code(), StatusCode::kInternal) << g.status().to_string();
      EXPECT_NE(g.status().code(), StatusCode::kNotFound) << g.status().to_string();
    }
    // The tensor files are checked against the declared types, whether or not import worked.
    auto bytes = onnx_io::read_file(path, path);
    ASSERT_TRUE(bytes.is_ok());
    onnx::ModelProto model;
    ASSERT_TRUE(model.ParseFromArray(bytes->data(), int(bytes->size()))) << path;
    check_data_sets(dir, model.graph(), counts);
  }
  std::cout << "onnx node tests: " << counts.models << " models, " << counts.imported
            << " imported";
  for (const auto& [code, n] : counts.failures) std::cout << ", " << n << " " << code;
  std::cout << "; tensor files: " << counts.files_read << " read, " << counts.files_skipped
            << " skipped (types strider lacks)\n";
  RecordProperty("imported", counts.imported);
  RecordProperty("files_read", counts.files_read);
}

}  // namespace
}  // namespace strider
#endif  // STRIDER_ONNX_NODE_TESTS_DIR
