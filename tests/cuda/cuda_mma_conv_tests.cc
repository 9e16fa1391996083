// The tensor-core convolution (hal/cuda/mma_conv.h), forced over the timed choice, on the
// layouts it takes: packed channels-last (a channels-last plan's own values) and channel
// slices with 16-byte rows (a concat's inputs). The kernel that ran must be it; its values
// are the float64 reference's of the unfused graph and nothing outside the output view is
// touched (cuda_test_util.h). The cases cover what its tiles make special: input channels
// not a multiple of 16 or more than one 64-channel step, output channels past one tile of
// 64 and odd ones (no pair stores), pixels past one tile, several taps with padding on both
// sides, stride and dilation; and the epilogues it applies (bias, ReLU6, SiLU, a residual).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fmt/format.h>

#include <string>

#include "cuda_test_util.h"
#include "gated_unit.h"
#include "ops/fused_elementwise.h"
#include "passes/fuse_elementwise.h"
#include "passes/fuse_gated_conv.h"
#include "passes/infer_shapes.h"

namespace strider::cuda_test {
namespace {

struct ConvCase {
  const char* name;
  Shape x, w;
  std::vector<int64_t> pads, strides, dilations;
  std::string epilogue;  // "", "ReLU6", "SiLU", "residual"
};

// The case's Conv (with its bias) and the epilogue after it, unfused.
Graph conv_graph(const ConvCase& c, DType t) {
  GraphBuilder b(22);
  AttributeMap attrs = ints_attribute("pads", c.pads);
  attrs.set_ints("strides", c.strides);
  attrs.set_ints("dilations", c.dilations);
  ValueId y = b.op("Conv", {b.input("x", t, c.x), b.constant("w", random_tensor(t, c.w, 2)),
                            b.constant("bias", random_tensor(t, {c.w[0]}, 3))}, attrs);
  if (c.epilogue == "ReLU6")
    y = b.op("Clip", {y, b.constant("low", tensor_of(t, {}, {0.0})), b.constant("high", tensor_of(t, {}, {0.5}))});
  if (c.epilogue == "SiLU") y = b.op("Mul", {y, b.op("Sigmoid", {y})});
  if (c.epilogue == "residual") {
    Shape out = c.x;
    out[1] = c.w[0];
    y = b.op("Add", {b.input("residual", t, out), y});
  }
  b.output(y);
  return b.build();
}

TEST(CudaMmaConv, PointwiseAndFewTapConvolutionsWithEpilogues) {
  STRIDER_REQUIRE_GPU();
  setenv("STRIDER_CUDA_KERNEL_CHOICE", "strider-cuda:mma-conv", 1);
  const std::vector<ConvCase> cases = {
      {"pointwise 2-D, 24 -> 40", {2, 24, 5, 7}, {40, 24, 1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, ""},
      {"pointwise 1-D, 72 -> 136, 74 pixels", {2, 72, 37}, {136, 72, 1}, {0, 0}, {1}, {1}, ""},
      {"WaveNet's dilated layer", {2, 16, 40}, {32, 16, 2}, {8, 8}, {1}, {8}, ""},
      {"three taps, stride 2, odd outputs", {1, 8, 29}, {7, 8, 3}, {3, 1}, {2}, {2}, ""},
      {"pointwise ReLU6", {2, 16, 6, 5}, {24, 16, 1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, "ReLU6"},
      {"dilated SiLU", {2, 16, 30}, {16, 16, 2}, {4, 0}, {1}, {4}, "SiLU"},
      {"pointwise residual", {2, 32, 4, 6}, {32, 32, 1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, "residual"},
  };
  for (DType t : {DType::kBF16, DType::kF16})
    for (ViewLayout layout : {ViewLayout::kPackedChannelsLast, ViewLayout::kAlignedSlice})
      for (const ConvCase& c : cases) {
        SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(t)) + " " + layout_name(layout));
        Graph unfused = conv_graph(c, t);
        ASSERT_TRUE(infer_and_fold(unfused).is_ok());
        Graph fused = unfused;
        if (!c.epilogue.empty()) {
          ASSERT_TRUE(fuse_elementwise(fused).is_ok());
          auto folded = fuse_conv_activations(fused);
          ASSERT_TRUE(folded.is_ok() && *folded == 1) << "the epilogue did not fold into the convolution";
        }
        std::map<std::string, Tensor> inputs = {{"x", random_tensor(t, c.x, 1)}};
        if (c.epilogue == "residual") {
          Shape out = c.x;
          out[1] = c.w[0];
          inputs.insert({"residual", random_tensor(t, out, 4)});
        }
        auto prepared = prepare_node(fused, inputs, layout, nullptr);
        ASSERT_TRUE(prepared.is_ok()) << prepared.status().to_string();
        const std::string made = prepared->kernel->implementation();
        EXPECT_EQ(made, c.epilogue.empty() ? "strider-cuda:mma-conv" : "strider-cuda:mma-conv+program");
        check_node(fused, inputs, layout, &unfused);
      }
  unsetenv("STRIDER_CUDA_KERNEL_CHOICE");
}

struct GatedCase {
  const char* name;
  testing_support::GatedUnit unit;
};

// FusedGatedConv (passes/fuse_gated_conv.h): on the channel rows the tensor-core kernel
// takes it applies the gate to its accumulators (forced here); on channels-first views and
// in f32, and with the library forced, the convolution writes its 2K channels to a buffer
// of its own and the gate follows as a map. Both against the reference of the unfused
// graph, on every view, nothing outside the output touched.
TEST(CudaMmaConv, GatedUnitsInOneKernelOrAConvolutionThenTheGate) {
  STRIDER_REQUIRE_GPU();
  const std::vector<GatedCase> cases = {
      {"gated stack's unit", {.x = {2, 16, 40}}},
      {"WaveNet's layer with its chomp", {.x = {2, 16, 50}, .kernel = 2, .dilation = 4, .chomp = true, .residual = false}},
      {"72 channels: two input steps, three tiles of pairs", {.x = {1, 72, 70}}},
  };
  for (const char* choice : {"strider-cuda:mma-conv", "library"}) {
    setenv("STRIDER_CUDA_KERNEL_CHOICE", choice, 1);
    for (DType t : {DType::kBF16, DType::kF16, DType::kF32})
      for (ViewLayout layout : {ViewLayout::kPackedChannelsLast, ViewLayout::kAlignedSlice, ViewLayout::kDense})
        for (const GatedCase& c : cases) {
          SCOPED_TRACE(fmt::format("{} {} {} {}", c.name, dtype_name(t), layout_name(layout), choice));
          Graph unfused = testing_support::gated_unit_graph(
              c.unit, t, [t](const Shape& shape, uint32_t seed) { return random_tensor(t, shape, seed); });
          ASSERT_TRUE(infer_and_fold(unfused).is_ok());
          Graph fused = unfused;
          ASSERT_TRUE(fuse_elementwise(fused).is_ok());
          auto folded = fuse_gated_convs(fused);
          ASSERT_TRUE(folded.is_ok() && *folded == 1 && fused.num_nodes() == 1) << "the unit did not fold";
          std::map<std::string, Tensor> inputs = {{"x", random_tensor(t, c.unit.x, 1)}};
          auto prepared = prepare_node(fused, inputs, layout, nullptr);
          // f32 channel slices: no f32 convolution takes them (cuDNN refuses NHWC slices,
          // the direct kernel channels-last rows); the planner gives such a node packed views.
          if (t == DType::kF32 && layout == ViewLayout::kAlignedSlice && !prepared.is_ok() &&
              prepared.status().code() == StatusCode::kUnsupported)
            continue;
          ASSERT_TRUE(prepared.is_ok()) << prepared.status().to_string();
          const std::string made = prepared->kernel->implementation();
          const bool library = std::string_view(choice) == "library";
          // (A library convolution may refuse the 16-bit channel slices: then it is the
          // tensor-core kernel either way.)
          if (t != DType::kF32 && layout != ViewLayout::kDense && !library) {
            EXPECT_EQ(made, "strider-cuda:mma-conv+gate");
          }
          if (t == DType::kF32 || layout == ViewLayout::kDense || (library && layout == ViewLayout::kPackedChannelsLast)) {
            EXPECT_NE(made.find(" then strider-cuda:fused"), std::string::npos) << made;
          }
          check_node(fused, inputs, layout, &unfused);
        }
  }
  unsetenv("STRIDER_CUDA_KERNEL_CHOICE");
}

}  // namespace
}  // namespace strider::cuda_test
