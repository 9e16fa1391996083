// Conformance of the reference interpreter itself: every ONNX backend node test whose ops
// the reference implements is evaluated and compared with its expected outputs (numpy
// allclose with rtol 1e-3, atol 1e-5; integers and bools exactly). Built only when the
// node-test folder existed at configure time (STRIDER_ONNX_NODE_TESTS_DIR).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>

#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "reference/reference.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

constexpr double kRelativeTolerance = 1e-3;
constexpr double kAbsoluteTolerance = 1e-5;

enum class Outcome { kPass, kFail, kUnsupported };

struct CaseResult {
  Outcome outcome;
  std::string detail;  // why it failed or is unsupported
};

bool close_enough(double actual, double expected) {
  if (std::isnan(expected) || std::isnan(actual)) return std::isnan(expected) && std::isnan(actual);
  if (std::isinf(expected) || std::isinf(actual)) return actual == expected;
  return std::fabs(actual - expected) <=
         kAbsoluteTolerance + kRelativeTolerance * std::fabs(expected);
}

// An empty string when `actual` matches `expected`, else what differs.
std::string compare_output(const RefTensor& actual, const Tensor& expected, size_t index) {
  if (actual.dtype != expected.dtype())
    return fmt::format("output {}: dtype {} != expected {}", index, dtype_name(actual.dtype),
                       dtype_name(expected.dtype()));
  if (actual.shape != expected.shape())
    return fmt::format("output {}: shape {} != expected {}", index, shape_to_string(actual.shape),
                       shape_to_string(expected.shape()));
  Tensor narrowed = ref_to_tensor(actual, expected.dtype());
  for (int64_t i = 0; i < expected.num_elements(); ++i) {
    bool equal = is_floating(expected.dtype())
                     ? close_enough(narrowed.element_as_double(i), expected.element_as_double(i))
                     : narrowed.element_as_int(i) == expected.element_as_int(i);
    if (!equal)
      return fmt::format("output {} element {}: {} != expected {}", index, i,
                         narrowed.element_as_double(i), expected.element_as_double(i));
  }
  return "";
}

Result<std::map<std::string, Tensor>> read_inputs(const Graph& graph, const fs::path& data) {
  std::map<std::string, Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    STRIDER_ASSIGN_OR_RETURN(Tensor t,
                             read_tensor_pb((data / fmt::format("input_{}.pb", i)).string()));
    inputs.emplace(graph.value(graph.inputs()[i]).name, std::move(t));
  }
  return inputs;
}

CaseResult run_case(const fs::path& dir) {
  Result<Graph> graph = import_model_file((dir / "model.onnx").string());
  if (!graph.is_ok()) return {Outcome::kUnsupported, "import: " + graph.status().to_string()};
  for (NodeId n = 0; n < graph->num_nodes(); ++n)
    if (!reference_supports(graph->node(n)))
      return {Outcome::kUnsupported,
              fmt::format("op {} at opset {}", graph->node(n).op_type, graph->node(n).opset)};
  fs::path data = dir / "test_data_set_0";
  Result<std::map<std::string, Tensor>> inputs = read_inputs(*graph, data);
  if (!inputs.is_ok()) return {Outcome::kUnsupported, "inputs: " + inputs.status().to_string()};
  Result<ReferenceResult> result = evaluate_reference(*graph, *inputs);
  if (!result.is_ok()) {
    Outcome outcome =
        result.status().code() == StatusCode::kUnsupported ? Outcome::kUnsupported : Outcome::kFail;
    return {outcome, "evaluate: " + result.status().to_string()};
  }
  for (size_t i = 0; i < result->outputs.size(); ++i) {
    Result<Tensor> expected = read_tensor_pb((data / fmt::format("output_{}.pb", i)).string());
    if (!expected.is_ok())
      return {Outcome::kUnsupported, "outputs: " + expected.status().to_string()};
    std::string mismatch = compare_output(result->outputs[i], *expected, i);
    if (!mismatch.empty()) return {Outcome::kFail, mismatch};
  }
  return {Outcome::kPass, ""};
}

TEST(ReferenceConformance, EverySupportedNodeTestMatchesItsExpectedOutputs) {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(STRIDER_ONNX_NODE_TESTS_DIR))
    if (fs::exists(entry.path() / "model.onnx")) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  ASSERT_GT(dirs.size(), 500u);
  int pass = 0, fail = 0, unsupported = 0;
  std::string failures, unsupported_list;
  for (const fs::path& dir : dirs) {
    std::string name = dir.filename().string();
    CaseResult r = run_case(dir);
    if (r.outcome == Outcome::kPass) ++pass;
    if (r.outcome == Outcome::kUnsupported) {
      ++unsupported;
      unsupported_list += fmt::format("  {}: {}\n", name, r.detail);
    }
    if (r.outcome == Outcome::kFail) {
      ++fail;
      failures += fmt::format("  {}: {}\n", name, r.detail);
    }
  }
  // STRIDER_SHOW_UNSUPPORTED=1 lists why each unsupported case is.
  if (std::getenv("STRIDER_SHOW_UNSUPPORTED") != nullptr)
    std::cout << "unsupported:\n" << unsupported_list;
  std::cout << fmt::format("reference conformance: {} pass, {} fail, {} unsupported, of {}\n", pass,
                           fail, unsupported, dirs.size());
  EXPECT_TRUE(failures.empty()) << "failing cases:\n" << failures;
}

}  // namespace
}  // namespace strider
