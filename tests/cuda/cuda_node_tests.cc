// The ONNX backend node tests of the ops strider's own CUDA kernels implement, run on
// those kernels (dense device views) and compared with the expected outputs at the
// conformance runner's tolerance. A case counts when the CPU kernel takes it and
// matches it too (so a case the CPU itself does not pass is reported, not failed); one
// the CPU passes must pass on the GPU unless the device declines the node (cuda::declines:
// a dtype no CUDA kernel takes, such as Add over u16 or a Cast to float8, which a session
// places on the host). Without a GPU the test is skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>

#include "cuda_test_util.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cuda/cuda_kernels.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "ops/op_registry.h"

namespace strider::cuda_test {
namespace {

namespace fs = std::filesystem;

// The node-test folder: $STRIDER_ONNX_NODE_TESTS, the one configured, or the vendored
// cases (relative to the working directory, then to the source tree), the first that exists.
fs::path node_tests_dir() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("STRIDER_ONNX_NODE_TESTS")) candidates.emplace_back(env);
#ifdef STRIDER_ONNX_NODE_TESTS_DIR
  candidates.emplace_back(STRIDER_ONNX_NODE_TESTS_DIR);
#endif
  candidates.emplace_back("tests/conformance/onnx-node-tests");
  candidates.emplace_back(fs::path(STRIDER_SOURCE_DIR) / "tests/conformance/onnx-node-tests");
  std::error_code ec;
  for (const fs::path& p : candidates)
    if (fs::is_directory(p, ec)) return p;
  return {};
}

// The ops of src/hal/cuda's elementwise, reduce, pool and resize kernels.
const std::set<std::string>& gpu_ops() {
  static const std::set<std::string> ops = {
      "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Floor", "Ceil", "Sin", "Cos", "Reciprocal", "Softplus",
      "HardSwish", "LeakyRelu", "HardSigmoid", "Elu", "Selu", "Relu", "Neg", "Abs", "Add", "Sub", "Mul", "Div",
      "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Where", "Clip", "Pow",
      "Sum", "Mean", "Min", "Max", "Cast", "CastLike", "BatchNormalization", "ReduceSum", "ReduceMean", "ReduceMax",
      "ReduceMin", "Softmax", "LogSoftmax", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Resize",
      "Upsample"};
  return ops;
}

struct NodeCase {
  Graph graph;
  std::map<std::string, Tensor> inputs;  // the non-constant ones
  std::vector<Tensor> expected;
};

// Loads a one-node case; inputs that decide shapes or are float parameters become
// constants so that shapes are static, as a session makes them.
Result<NodeCase> load_case(const fs::path& dir) {
  STRIDER_ASSIGN_OR_RETURN(Graph g, import_model_file((dir / "model.onnx").string()));
  if (g.num_nodes() != 1) return unsupported("not a one-node case");
  const Node& node = g.node(0);
  const OpSchema* schema = find_op_schema("", node.op_type);
  if (schema == nullptr) return unsupported("unknown op");
  std::set<ValueId> constant_ids;
  for (const auto* list : {&schema->shape_inputs, &schema->float_parameter_inputs})
    for (int i : *list) constant_ids.insert(node.input(size_t(i)));
  NodeCase c;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    STRIDER_ASSIGN_OR_RETURN(Tensor t, read_tensor_pb((dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")).string()));
    Value& v = g.value(g.inputs()[i]);
    v.has_type = v.has_shape = true;
    v.dtype = t.dtype();
    v.shape = t.shape();
    v.dim_params.clear();
    if (constant_ids.count(g.inputs()[i])) v.constant = std::make_shared<const Tensor>(std::move(t));
    else c.inputs[v.name] = std::move(t);
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    STRIDER_ASSIGN_OR_RETURN(Tensor t, read_tensor_pb((dir / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb")).string()));
    c.expected.push_back(std::move(t));
  }
  InferContext context(g, 0);
  STRIDER_RETURN_IF_ERROR(schema->infer(context));
  c.graph = std::move(g);
  return c;
}

// "" when `actual` matches `expected` as the conformance runner judges, else why not.
std::string mismatch(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected) {
  for (size_t k = 0; k < expected.size() && k < actual.size(); ++k) {
    const Tensor& a = actual[k];
    const Tensor& e = expected[k];
    if (a.dtype() != e.dtype() || a.shape() != e.shape()) return "output " + std::to_string(k) + ": dtype or shape differs";
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      double x = a.element_as_double(i), y = e.element_as_double(i);
      if ((std::isnan(x) && std::isnan(y)) || x == y) continue;
      if (!(std::fabs(x - y) <= 1e-7 + 1e-3 * std::fabs(y)))
        return "output " + std::to_string(k) + " element " + std::to_string(i) + ": got " + std::to_string(x) +
               ", expected " + std::to_string(y);
    }
  }
  return "";
}

// The CPU kernel's outputs on dense host views.
Result<std::vector<Tensor>> run_cpu(const NodeCase& c) {
  const Node& node = c.graph.node(0);
  std::vector<std::unique_ptr<Allocation>> allocations;
  std::vector<Tensor> storage;
  storage.reserve(node.inputs.size() + node.outputs.size());
  auto view_of = [&](Tensor& t) {
    allocations.push_back(std::make_unique<Allocation>(1, "host", "cpu", t.bytes(), std::max<int64_t>(int64_t(t.byte_size()), 1),
                                                       1, StorageMode::kHost, true));
    return *make_dense_view(*allocations.back(), 0, t.dtype(), t.shape(), "host");
  };
  KernelRequest request{c.graph, node, {}, {}};
  for (ValueId id : node.inputs) {
    if (id == kNoValue) {
      request.inputs.emplace_back();
      continue;
    }
    const Value& v = c.graph.value(id);
    storage.push_back(v.is_constant() ? *v.constant : c.inputs.at(v.name));
    request.inputs.push_back(view_of(storage.back()));
  }
  for (ValueId id : node.outputs) {
    if (id == kNoValue) {
      request.outputs.emplace_back();
      continue;
    }
    storage.emplace_back(c.graph.value(id).dtype, c.graph.value(id).shape);
    request.outputs.push_back(view_of(storage.back()));
  }
  STRIDER_ASSIGN_OR_RETURN(auto kernel, cpu::create_kernel(request));
  STRIDER_RETURN_IF_ERROR(kernel->run(QueueContext{}));
  std::vector<Tensor> outputs;
  for (size_t i = storage.size() - request.outputs.size(); i < storage.size(); ++i) outputs.push_back(storage[i]);
  return outputs;
}

TEST(CudaNodeTests, MatchTheOnnxOutputsWhereTheCpuDoes) {
  STRIDER_REQUIRE_GPU();
  const fs::path root = node_tests_dir();
  if (root.empty()) GTEST_SKIP() << "no ONNX node-test folder";
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec))
    if (fs::exists(entry.path() / "model.onnx", ec)) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  int passed = 0, not_on_cpu = 0, declined = 0;
  for (const fs::path& dir : dirs) {
    auto loaded = load_case(dir);
    if (!loaded.is_ok() || !gpu_ops().count(loaded->graph.node(0).op_type)) continue;
    const std::string name = dir.filename().string();
    auto cpu = run_cpu(*loaded);
    if (!cpu.is_ok() || !mismatch(*cpu, loaded->expected).empty()) {
      ++not_on_cpu;
      std::cout << "SKIP " << name << " (the CPU kernel does not pass it either)\n";
      continue;
    }
    if (const std::string why_not = cuda::declines(loaded->graph, loaded->graph.node(0)); !why_not.empty()) {
      ++declined;
      std::cout << "DECLINED " << name << " (" << why_not << ")\n";
      continue;
    }
    auto gpu = run_dense(loaded->graph, loaded->inputs);
    std::string why = gpu.is_ok() ? mismatch(*gpu, loaded->expected) : gpu.status().to_string();
    EXPECT_TRUE(why.empty()) << name << ": " << why;
    passed += why.empty();
  }
  std::cout << "CUDA node tests: " << passed << " passed; " << not_on_cpu << " not passed by the CPU kernel either; " << declined
            << " declined by the device\n";
  EXPECT_GT(passed, 100);
}

}  // namespace
}  // namespace strider::cuda_test
