// CPU-specific kernel choices on strided views (every device's kernels on the catalog of
// layouts: kernel_suite_tests.cc): a pointwise convolution over channel slices runs as a
// oneDNN matmul, not the reference loop.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "strider/compare.h"
#include "hal/cpu/copy.h"
#include "hal/cpu/cpu_kernels.h"
#include "ir/builder.h"
#include "ops/elementwise_params.h"
#include "ops/op_registry.h"
#include "reference/reference.h"

namespace strider {
namespace {

constexpr uint8_t kPoison = 0xA5;

// Host memory for one view, poisoned, with an Allocation that describes it.
struct Buffer {
  std::vector<std::byte> bytes;
  std::unique_ptr<Allocation> allocation;
  explicit Buffer(int64_t size)
      : bytes(size_t(size), std::byte{kPoison}),
        allocation(std::make_unique<Allocation>(7, "test", "cpu", bytes.data(), size, 64, StorageMode::kHost, true)) {}
};

std::vector<double> download(const TensorView& view) {
  Tensor dense(view.dtype, view.sizes);
  Strides strides = contiguous_strides(view.sizes);
  cpu::copy_strided(view.sizes, dense.bytes(), strides.data(), view.host_data(), view.strides.data(),
                    dtype_size(view.dtype));
  std::vector<double> v;
  for (int64_t i = 0; i < dense.num_elements(); ++i) v.push_back(dense.element_as_double(i));
  return v;
}

Tensor seeded_input(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kF32) t.data<float>()[i] = normal(rng);
    else if (dtype == DType::kF64) t.data<double>()[i] = normal(rng);
    else if (dtype == DType::kI64) t.data<int64_t>()[i] = int64_t(rng() % 3);
    else if (dtype == DType::kBool) t.data<uint8_t>()[i] = uint8_t(rng() & 1);
    else if (dtype == DType::kI8) t.data<int8_t>()[i] = int8_t(int(rng() % 200) - 90);
  }
  return t;
}

// A 1x1 convolution reading and writing channel slices of concat-like buffers runs as a
// matmul over the strided views, in both layouts, instead of being refused.
TEST(PointwiseConv, ReadsAndWritesChannelSlicesAsAMatmul) {
  for (bool channels_last : {false, true}) {
    std::vector<std::unique_ptr<Buffer>> buffers;
    auto slice_of = [&](int64_t channels, int64_t first, int64_t count) {
      Shape full = {2, channels, 5, 6};
      Strides strides = channels_last ? Strides{5 * 6 * channels, 1, 6 * channels, channels} : contiguous_strides(full);
      buffers.push_back(std::make_unique<Buffer>(2 * channels * 30 * 4));
      TensorView whole = *make_view(*buffers.back()->allocation, 0, DType::kF32, full, strides, "whole");
      return *slice_view(whole, 1, first, first + count, 1);
    };
    GraphBuilder b;
    b.output(b.op("Conv", {b.input("x", DType::kF32, {2, 8, 5, 6}), b.input("w", DType::kF32, {4, 8, 1, 1}),
                           b.input("bias", DType::kF32, {4})}));
    Graph g = b.build();
    InferContext context(g, 0);
    ASSERT_TRUE(find_op_schema("", "Conv")->infer(context).is_ok());
    std::map<std::string, Tensor> inputs = {{"x", seeded_input(DType::kF32, {2, 8, 5, 6}, 1)},
                                            {"w", seeded_input(DType::kF32, {4, 8, 1, 1}, 2)},
                                            {"bias", seeded_input(DType::kF32, {4}, 3)}};
    TensorView x = slice_of(16, 8, 8), y = slice_of(12, 4, 4);
    std::vector<TensorView> params;
    for (const char* name : {"w", "bias"}) {
      buffers.push_back(std::make_unique<Buffer>(int64_t(inputs[name].byte_size())));
      params.push_back(*make_dense_view(*buffers.back()->allocation, 0, DType::kF32, inputs[name].shape(), name));
      std::memcpy(params.back().host_data(), inputs[name].bytes(), inputs[name].byte_size());
    }
    Strides dense = contiguous_strides(x.sizes);
    cpu::copy_strided(x.sizes, x.host_data(), x.strides.data(), inputs["x"].bytes(), dense.data(), 4);
    auto kernel = cpu::create_kernel(KernelRequest{g, g.node(0), {x, params[0], params[1]}, {y}});
    ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
    EXPECT_NE((*kernel)->implementation().find("onednn"), std::string::npos);
    EXPECT_EQ((*kernel)->implementation().find(":ref"), std::string::npos);
    ASSERT_TRUE((*kernel)->run(QueueContext{}).is_ok());
    auto expected = evaluate_reference(g, inputs);
    std::vector<double> reference;
    for (int64_t k = 0; k < expected->outputs[0].num_elements(); ++k)
      reference.push_back(expected->outputs[0].element_as_double(k));
    Comparison c = compare_values(download(y), reference, {1e-5, 1e-6, 0.99999}, false);
    EXPECT_TRUE(c.passed) << (channels_last ? "nhwc: " : "nchw: ") << c.reason;
  }
}

// A 3x3 stride-1 f32 convolution with constant weights and 32 channels or more runs as
// Winograd F(4x4, 3x3) over channels-last views (a channel slice included; a 17x18 map, 25
// tiles) and stays on
// oneDNN's direct convolution over channels-first ones and below 32 channels (there over a
// whole buffer: oneDNN has only its reference kernel for a channels-last channel slice).
TEST(WinogradConv, ChosenForChannelsInnerViewsWithEnoughChannels) {
  struct Case { bool channels_last; int64_t channels; bool winograd; };
  for (const Case& c : {Case{true, 32, true}, Case{false, 32, false}, Case{true, 16, false}}) {
    SCOPED_TRACE(::testing::Message() << (c.channels_last ? "nhwc " : "nchw ") << c.channels << " channels");
    const int64_t ch = c.channels;
    std::vector<std::unique_ptr<Buffer>> buffers;
    auto slice_of = [&](int64_t total, int64_t first, int64_t count) {
      Shape full = {1, total, 17, 18};
      Strides strides = c.channels_last ? Strides{17 * 18 * total, 1, 18 * total, total} : contiguous_strides(full);
      buffers.push_back(std::make_unique<Buffer>(total * 17 * 18 * 4));
      TensorView whole = *make_view(*buffers.back()->allocation, 0, DType::kF32, full, strides, "whole");
      return *slice_view(whole, 1, first, first + count, 1);
    };
    std::map<std::string, Tensor> inputs = {{"x", seeded_input(DType::kF32, {1, ch, 17, 18}, 1)}};
    const Tensor weights = seeded_input(DType::kF32, {ch, ch, 3, 3}, 2);
    GraphBuilder b;
    b.output(b.op("Conv", {b.input("x", DType::kF32, {1, ch, 17, 18}), b.constant("w", weights)},
                  ints_attribute("pads", {1, 1, 1, 1})));
    Graph g = b.build();
    InferContext context(g, 0);
    ASSERT_TRUE(find_op_schema("", "Conv")->infer(context).is_ok());
    const bool slices = c.channels_last == c.winograd;
    TensorView x = slices ? slice_of(ch + 8, 8, ch) : slice_of(ch, 0, ch), y = slices ? slice_of(ch + 4, 2, ch) : slice_of(ch, 0, ch);
    buffers.push_back(std::make_unique<Buffer>(int64_t(weights.byte_size())));
    TensorView w = *make_dense_view(*buffers.back()->allocation, 0, DType::kF32, weights.shape(), "w");
    std::memcpy(w.host_data(), weights.bytes(), weights.byte_size());
    Strides dense = contiguous_strides(x.sizes);
    cpu::copy_strided(x.sizes, x.host_data(), x.strides.data(), inputs["x"].bytes(), dense.data(), 4);
    auto kernel = cpu::create_kernel(KernelRequest{g, g.node(0), {x, w}, {y}});
    ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
    EXPECT_EQ((*kernel)->implementation().find("winograd") != std::string::npos, c.winograd)
        << (*kernel)->implementation();
    ASSERT_TRUE((*kernel)->run(QueueContext{}).is_ok());
    auto expected = evaluate_reference(g, inputs);
    ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
    std::vector<double> reference;
    for (int64_t k = 0; k < expected->outputs[0].num_elements(); ++k)
      reference.push_back(expected->outputs[0].element_as_double(k));
    Comparison cmp = compare_values(download(y), reference, {1e-5, 1e-6, 0.99999}, false);
    EXPECT_TRUE(cmp.passed) << cmp.reason;
  }
}

}  // namespace
}  // namespace strider
