// FusedGatedConv (passes/fuse_gated_conv.h) on every device and view layout of the
// catalog: the unit fused by the pass (asked of no device: every unit here is fused),
// checked against the float64 reference of the unfused unit. The CPU and sim run the
// convolution into scratch then the gate (they fuse no model's units); CUDA times its
// tensor-core kernel, which applies the gate to its accumulators, against the same pair.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "gated_unit.h"
#include "kernel_harness.h"
#include "kernel_suite.h"
#include "ops/fused_elementwise.h"
#include "passes/fuse_elementwise.h"
#include "passes/fuse_gated_conv.h"
#include "passes/fuse_gated_stack.h"
#include "passes/fuse_wavenet_layer.h"
#include "ops/gated_stack.h"
#include "passes/infer_shapes.h"
#include "onnx/importer.h"

namespace strider {
namespace {

using kernel_test::KernelSuite;
using kernel_test::random_tensor;
using testing_support::GatedUnit;

TEST_P(KernelSuite, GatedUnits) {
  struct Case {
    const char* name;
    GatedUnit unit;
  };
  const std::vector<Case> cases = {
      {"gated stack's unit, Split halves", {.x = {2, 8, 12}}},
      {"two Slices, no residual", {.x = {1, 16, 9}, .residual = false, .split = false}},
      {"WaveNet's layer with its chomp", {.x = {2, 8, 15}, .kernel = 2, .dilation = 4, .chomp = true, .residual = false}},
  };
  for (DType t : {DType::kF32, DType::kBF16})
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} {}", c.name, dtype_name(t)));
      Graph unfused = testing_support::gated_unit_graph(
          c.unit, t, [&](const Shape& shape, uint32_t seed) { return random_tensor(t, shape, seed); });
      ASSERT_TRUE(infer_and_fold(unfused).is_ok());
      Graph fused = unfused;
      ASSERT_TRUE(fuse_elementwise(fused).is_ok());
      auto folded = fuse_gated_convs(fused);
      ASSERT_TRUE(folded.is_ok() && *folded == 1 && fused.num_nodes() == 1) << "the unit did not fold";
      ASSERT_EQ(fused.node(0).op_type, kFusedGatedConvOp);
      check_graph(std::move(fused), {{"x", random_tensor(t, c.unit.x, 1)}}, &unfused);
    }
}

// FusedGatedStack (passes/fuse_gated_stack.h): chains of units folded into one node, on
// every device and layout, against the float64 reference of the unfused chain. The CUDA
// cases cover a block's column groups (C = 8: 32 groups; 96: two, with idle threads; 128:
// two), each column count a thread may carry on a GPU of 132 multiprocessors (Q = 1 at
// 2 x 7 pixels, 2 at 64 channels of 1500, 4 at 128 of 2 x 600, 8 at 128 of 2 x 1100), and
// columns past the last pixel; the cpu and sim rows skip the four large ones (in ASan CI
// they took most of the kernel suite's time and check nothing the small ones do not).
TEST_P(KernelSuite, GatedStacks) {
  struct Case {
    const char* name;
    Shape x;
    int units;
    bool cuda_only;  // sizes for the GPU's launch shapes: on the CPU (scalar kernels) they repeat a
                     // smaller case's checks at most of the suite's time
  };
  const std::vector<Case> cases = {
      {"three units", {2, 8, 12}, 3, false},
      {"one unit", {1, 16, 9}, 1, false},
      {"96 channels", {2, 96, 7}, 2, false},
      {"64 channels, 1500 pixels", {1, 64, 1500}, 2, true},
      {"128 channels, 1200 pixels", {2, 128, 600}, 2, true},
      {"128 channels, 2200 pixels", {2, 128, 1100}, 1, true},
      {"8 channels, many pixels", {2, 8, 1100}, 4, true},
  };
  for (DType t : {DType::kF32, DType::kBF16})
    for (const Case& c : cases) {
      if (c.cuda_only && !on_cuda()) continue;
      SCOPED_TRACE(fmt::format("{} {}", c.name, dtype_name(t)));
      testing_support::GatedUnit unit;
      unit.x = c.x;
      Graph unfused = testing_support::gated_stack_graph(
          unit, c.units, t, [&](const Shape& shape, uint32_t seed) { return random_tensor(t, shape, seed); });
      ASSERT_TRUE(infer_and_fold(unfused).is_ok());
      Graph fused = unfused;
      ASSERT_TRUE(fuse_elementwise(fused).is_ok());
      ASSERT_TRUE(fuse_gated_convs(fused).is_ok());
      auto stacks = fuse_gated_stacks(fused);
      ASSERT_TRUE(stacks.is_ok() && *stacks == 1 && fused.num_nodes() == 1) << "the units did not stack";
      ASSERT_EQ(fused.node(0).op_type, kFusedGatedStackOp);
      check_graph(std::move(fused), {{"x", random_tensor(t, c.x, 1)}}, &unfused);
    }
}

// The committed exports of the gated chains (models/real: torch's Split lowering, and the
// opset-13 one whose halves are Slices of computed bounds) fold into one stack of every
// unit, which then matches the float64 reference of the whole exported graph.
TEST_P(KernelSuite, GatedStacksOfTheExportedChains) {
  for (const auto& [model, units] : {std::pair{"GatedChain20_split_op17", 20}, std::pair{"GatedChain11_shape_op13", 11}}) {
    SCOPED_TRACE(model);
    auto imported = import_model_file(std::string(STRIDER_SOURCE_DIR) + "/models/real/" + model + "/model.onnx");
    ASSERT_TRUE(imported.is_ok()) << imported.status().to_string();
    Graph unfused = std::move(*imported);
    ASSERT_TRUE(infer_and_fold(unfused).is_ok());
    Graph fused = unfused;
    ASSERT_TRUE(fuse_elementwise(fused).is_ok());
    ASSERT_TRUE(fuse_conv_activations(fused).is_ok());
    ASSERT_TRUE(fuse_gated_convs(fused).is_ok());
    auto stacks = fuse_gated_stacks(fused);
    ASSERT_TRUE(stacks.is_ok() && *stacks == 1 && fused.num_nodes() == 1) << "the chain did not stack whole";
    ASSERT_EQ(gated_stack_units(fused.node(0)), units);
    check_graph(std::move(fused), {{"x", random_tensor(DType::kF32, {1, 64, 256}, 1)}}, &unfused);
  }
}

struct WaveNetCase {
  const char* name;
  Shape x;
  int64_t kernel, dilation;
  bool residual;
  int64_t skip_channels;
  bool g_output;
  bool cuda_only = false;  // as GatedStacks' cases
};

// The layer of `c` folded, then checked against the unfused layer.
void check_wavenet_layer(KernelSuite& suite, const WaveNetCase& c, DType t) {
  testing_support::GatedUnit unit;
  unit.x = c.x, unit.kernel = c.kernel, unit.dilation = c.dilation;
  Graph unfused = testing_support::wavenet_layer_graph(
      unit, c.residual, c.skip_channels, c.g_output, t,
      [&](const Shape& shape, uint32_t seed) { return random_tensor(t, shape, seed); });
  ASSERT_TRUE(infer_and_fold(unfused).is_ok());
  Graph fused = unfused;
  ASSERT_TRUE(fuse_elementwise(fused).is_ok());
  ASSERT_TRUE(fuse_conv_activations(fused).is_ok());
  ASSERT_TRUE(fuse_gated_convs(fused).is_ok());
  auto layers = fuse_wavenet_layers(fused);
  ASSERT_TRUE(layers.is_ok() && *layers == 1 && fused.num_nodes() == 1) << "the layer did not fold";
  suite.check_graph(std::move(fused), {{"x", random_tensor(t, c.x, 1)}}, &unfused);
}

// FusedWaveNetLayer (passes/fuse_wavenet_layer.h): a WaveNet layer folded with its
// projections, on every device and layout, against the float64 reference of the unfused
// layer. Every form of layer: residual and skip (most layers), skip alone (the last one,
// its residual dead), residual and G (the first one, whose skip FusedConv also sums the
// skips), and all three. Dilations reach past the
// tile of time steps a CUDA block takes (on the CPU too, with 8 channels: 32 steps a block
// of 32 groups), and the taps before the first step read zeros.
TEST_P(KernelSuite, WaveNetLayers) {
  const std::vector<WaveNetCase> cases = {
      {"residual and skip", {2, 8, 30}, 2, 4, true, 8, false},
      {"skip alone", {1, 16, 40}, 2, 1, false, 16, false},
      {"residual and G", {2, 8, 50}, 2, 16, true, 0, true},
      {"everything, 3 taps", {1, 32, 70}, 3, 2, true, 32, true},
      {"64 channels, dilation 64, many steps", {1, 64, 1100}, 2, 64, true, 64, false, true},
      {"32 channels, dilation 128, batch 3", {3, 32, 300}, 2, 128, true, 32, false, true},
      {"8 channels, dilation 32, batch 2", {2, 8, 90}, 2, 32, true, 8, false},
  };
  for (DType t : {DType::kF32, DType::kBF16})
    for (const WaveNetCase& c : cases) {
      if (c.cuda_only && !on_cuda()) continue;
      SCOPED_TRACE(fmt::format("{} {}", c.name, dtype_name(t)));
      check_wavenet_layer(*this, c, t);
    }
}

// A skip wider than the layer: the CUDA kernel takes only as many channels (the device
// then does not fuse it), so it is a test of its own: its skip on cuda leaves the cases
// above running.
TEST_P(KernelSuite, WaveNetLayerWithAWiderSkip) {
  for (DType t : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(t));
    check_wavenet_layer(*this, {"a wider skip", {2, 16, 33}, 2, 2, true, 24, false}, t);
  }
}

}  // namespace
}  // namespace strider
