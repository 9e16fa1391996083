// cuda_kernel_bench: throughput of strider's own CUDA kernels on detector-sized tensors
// (not run by ctest). Prints the time per run and the bandwidth over the bytes of every
// input and output element; skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "cuda_test_util.h"
#include "ops/op_registry.h"
#include "passes/fuse_elementwise.h"
#include "passes/infer_shapes.h"

namespace strider::cuda_test {
namespace {

struct BenchCase {
  std::string name;
  Graph graph;
  std::map<std::string, Tensor> inputs;
  ViewLayout layout;
};

BenchCase unary(const std::string& op, DType dtype, const Shape& shape, ViewLayout layout) {
  GraphBuilder b;
  b.output(b.op(op, {b.input("a", dtype, shape)}));
  return {op + " " + std::string(dtype_name(dtype)) + " " + shape_to_string(shape), b.build(),
          {{"a", random_tensor(dtype, shape, 1)}}, layout};
}

BenchCase binary(const std::string& op, const Shape& a, const Shape& c, ViewLayout layout) {
  GraphBuilder b;
  b.output(b.op(op, {b.input("a", DType::kF32, a), b.input("c", DType::kF32, c)}));
  return {op + " f32 " + shape_to_string(a) + " " + shape_to_string(c), b.build(),
          {{"a", random_tensor(DType::kF32, a, 1)}, {"c", random_tensor(DType::kF32, c, 2)}}, layout};
}

BenchCase upsample(const Shape& shape, const char* mode, ViewLayout layout) {
  GraphBuilder b(13);
  AttributeMap attrs;
  attrs.set_string("mode", mode);
  b.output(b.op("Resize", {b.input("x", DType::kF32, shape), b.constant("roi", Tensor(DType::kF32, {0})),
                           b.constant("scales", f32({4}, {1, 1, 2, 2}))}, attrs));
  return {std::string("Resize ") + mode + " 2x f32 " + shape_to_string(shape), b.build(),
          {{"x", random_tensor(DType::kF32, shape, 1)}}, layout};
}

BenchCase softmax_dfl() {
  GraphBuilder b(13);
  b.output(b.op("Softmax", {b.input("x", DType::kF32, {1, 4, 16, 8400})}, int_attribute("axis", 2)));
  return {"Softmax axis 2 f32 [1, 4, 16, 8400]", b.build(), {{"x", random_tensor(DType::kF32, {1, 4, 16, 8400}, 1)}}, ViewLayout::kDense};
}

BenchCase sppf_pool(ViewLayout layout) {
  GraphBuilder b(12);
  AttributeMap a = ints_attribute("kernel_shape", {5, 5});
  a.set_ints("pads", {2, 2, 2, 2});
  b.output(b.op("MaxPool", {b.input("x", DType::kF32, {1, 256, 20, 20})}, a));
  return {"MaxPool 5x5 f32 [1, 256, 20, 20]", b.build(), {{"x", random_tensor(DType::kF32, {1, 256, 20, 20}, 1)}}, layout};
}

BenchCase global_average() {
  GraphBuilder b;
  b.output(b.op("GlobalAveragePool", {b.input("x", DType::kF32, {8, 512, 40, 40})}));
  return {"GlobalAveragePool f32 [8, 512, 40, 40]", b.build(), {{"x", random_tensor(DType::kF32, {8, 512, 40, 40}, 1)}},
          ViewLayout::kDense};
}

// SiLU (x * sigmoid(x)), plus a residual when `residual`, fused into one node.
BenchCase fused_silu(DType dtype, const Shape& shape, ViewLayout layout, bool residual) {
  GraphBuilder b;
  ValueId x = b.input("x", dtype, shape);
  ValueId y = b.op("Mul", {x, b.op("Sigmoid", {x})});
  std::map<std::string, Tensor> inputs{{"x", random_tensor(dtype, shape, 1)}};
  if (residual) {
    y = b.op("Add", {b.input("h", dtype, shape), y});
    inputs["h"] = random_tensor(dtype, shape, 2);
  }
  b.output(y);
  Graph g = b.build();
  EXPECT_TRUE(infer_and_fold(g).is_ok());
  EXPECT_TRUE(fuse_elementwise(g).is_ok());
  EXPECT_EQ(g.num_nodes(), 1);
  return {std::string(residual ? "fused h+SiLU " : "fused SiLU ") + std::string(dtype_name(dtype)) + " " +
              shape_to_string(shape),
          std::move(g), std::move(inputs), layout};
}

// A program no compiled form matches, tanh(x) * h + sigmoid(x): the interpreter's speed.
BenchCase fused_interpreted(DType dtype, const Shape& shape) {
  GraphBuilder b;
  ValueId x = b.input("x", dtype, shape), h = b.input("h", dtype, shape);
  b.output(b.op("Add", {b.op("Mul", {b.op("Tanh", {x}), h}), b.op("Sigmoid", {x})}));
  Graph g = b.build();
  EXPECT_TRUE(infer_and_fold(g).is_ok());
  EXPECT_TRUE(fuse_elementwise(g).is_ok());
  EXPECT_EQ(g.num_nodes(), 1);
  return {"fused interpreted tanh(x)*h+sigmoid(x) " + std::string(dtype_name(dtype)) + " " + shape_to_string(shape),
          std::move(g), {{"x", random_tensor(dtype, shape, 1)}, {"h", random_tensor(dtype, shape, 2)}}, ViewLayout::kDense};
}

TEST(CudaKernelBench, Throughput) {
  STRIDER_REQUIRE_GPU();
  const Shape big = {1, 64, 320, 320};
  std::vector<BenchCase> cases;
  cases.push_back(unary("Sigmoid", DType::kF32, big, ViewLayout::kDense));
  cases.push_back(unary("Sigmoid", DType::kBF16, big, ViewLayout::kDense));
  cases.push_back(unary("Sigmoid", DType::kF32, big, ViewLayout::kChannelSlice));
  cases.push_back(unary("Sigmoid", DType::kF32, big, ViewLayout::kAlignedSlice));
  cases.push_back(binary("Mul", big, big, ViewLayout::kDense));
  cases.push_back(binary("Mul", big, big, ViewLayout::kChannelSlice));
  cases.push_back(binary("Mul", big, big, ViewLayout::kAlignedSlice));
  cases.push_back(binary("Add", big, {64, 1, 1}, ViewLayout::kDense));
  cases.push_back(binary("Add", big, {64, 1, 1}, ViewLayout::kChannelsLast));
  cases.push_back(unary("Relu", DType::kF32, {16}, ViewLayout::kDense));  // the launch floor
  // Fusion: SiLU fused against its two unfused kernels, detector-sized and C2f-sized.
  for (const Shape& shape : {big, Shape{1, 32, 20, 20}}) {
    cases.push_back(unary("Sigmoid", DType::kF32, shape, ViewLayout::kDense));
    cases.push_back(binary("Mul", shape, shape, ViewLayout::kDense));
    cases.push_back(fused_silu(DType::kF32, shape, ViewLayout::kDense, false));
    cases.push_back(fused_silu(DType::kF32, shape, ViewLayout::kAlignedSlice, false));
    cases.push_back(fused_silu(DType::kBF16, shape, ViewLayout::kDense, false));
    cases.push_back(fused_silu(DType::kF32, shape, ViewLayout::kDense, true));
  }
  cases.push_back(fused_interpreted(DType::kF32, big));
  cases.push_back(fused_interpreted(DType::kBF16, big));
  cases.push_back(upsample({1, 256, 40, 40}, "nearest", ViewLayout::kDense));
  cases.push_back(upsample({1, 256, 40, 40}, "nearest", ViewLayout::kChannelSlice));
  cases.push_back(upsample({1, 64, 160, 160}, "nearest", ViewLayout::kDense));
  cases.push_back(upsample({1, 64, 160, 160}, "nearest", ViewLayout::kChannelSlice));
  cases.push_back(upsample({1, 64, 160, 160}, "nearest", ViewLayout::kAlignedSlice));
  cases.push_back(upsample({1, 64, 160, 160}, "linear", ViewLayout::kDense));
  cases.push_back(softmax_dfl());
  cases.push_back(sppf_pool(ViewLayout::kDense));
  cases.push_back(sppf_pool(ViewLayout::kAlignedSlice));
  cases.push_back(global_average());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (BenchCase& c : cases) {
    InferContext context(c.graph, 0);
    const Node& n = c.graph.node(0);
    ASSERT_TRUE(find_op_schema(n.domain, n.op_type)->infer(context).is_ok()) << c.name;
    auto node = prepare_node(c.graph, c.inputs, c.layout, stream);
    ASSERT_TRUE(node.is_ok()) << c.name << ": " << node.status().to_string();
    constexpr int kRuns = 20;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(node->kernel->run(QueueContext{1, stream}).is_ok());
    cudaEventRecord(start, stream);
    for (int i = 0; i < kRuns; ++i) (void)node->kernel->run(QueueContext{1, stream});
    cudaEventRecord(stop, stream);
    ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    double us = 1000.0 * ms / kRuns;
    std::printf("%-48s %-22s %9.1f us %8.0f GB/s\n", c.name.c_str(), layout_name(c.layout).c_str(), us,
                double(node->bytes) / (us * 1e3));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace strider::cuda_test
