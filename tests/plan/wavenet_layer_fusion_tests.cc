// Intent tests of passes/fuse_wavenet_layer.h on builder graphs of WaveNet's layers
// (tests/support/gated_unit.h): each layer's gate takes in its residual and skip
// projections; a projection that does more (the first skip's FusedConv, which also sums
// every layer's skip) stays out and reads the layer's G; a layer the device declines stays
// as it was. The values are checked on every device by the kernel suite
// (tests/kernels/gated_conv_suite_tests.cc).
#include <gtest/gtest.h>

#include "ops/fused_elementwise.h"
#include "ops/wavenet_layer.h"
#include "passes/fuse_elementwise.h"
#include "passes/fuse_gated_conv.h"
#include "passes/fuse_wavenet_layer.h"
#include "passes/infer_shapes.h"
#include "../support/gated_unit.h"
#include "plan_test_util.h"

namespace strider {
namespace {

using testing::random_f32;
using testing_support::GatedUnit;

Graph wavenet(Shape x, int layers, bool last_x_output = false) {
  GatedUnit u;
  u.x = std::move(x);
  return testing_support::wavenet_graph(
      u, layers, DType::kF32, [](const Shape& s, uint32_t seed) { return random_f32(s, seed); }, last_x_output);
}

// The passes a CUDA session runs, every gate fused as FusedGatedConv first; the layers the
// device accepts (`pays`), then the schema's check of the result.
Result<int> fuse_layers(Graph& g, const std::function<bool(const WaveNetLayerShape&)>& pays = nullptr) {
  STRIDER_RETURN_IF_ERROR(infer_and_fold(g));
  STRIDER_RETURN_IF_ERROR(fuse_elementwise(g).status());
  STRIDER_RETURN_IF_ERROR(fuse_conv_activations(g).status());
  STRIDER_RETURN_IF_ERROR(fuse_gated_convs(g).status());
  STRIDER_ASSIGN_OR_RETURN(int layers, fuse_wavenet_layers(g, pays));
  STRIDER_RETURN_IF_ERROR(infer_and_fold(g));
  return layers;
}

// The op types of g's nodes in order; a layer as W and the outputs it has (y, s, g):
// "Wys" for a layer with its residual and skip, "FusedConv" for a projection left out.
std::string layer_summary(const Graph& g) {
  std::string out;
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (!out.empty()) out += " ";
    if (n.op_type == kFusedWaveNetLayerOp) {
      out += "W";
      for (size_t o = 0; o < 3; ++o)
        if (n.outputs[o] != kNoValue) out += "ysg"[o];
    } else if (n.op_type == kFusedGatedConvOp) {
      out += "G";
    } else {
      out += n.op_type;
    }
  }
  return out;
}

TEST(WaveNetLayerFusion, EachLayerTakesInItsProjections) {
  Graph g = wavenet({2, 8, 30}, 3);
  auto layers = fuse_layers(g);
  ASSERT_TRUE(layers.is_ok()) << layers.status().to_string();
  EXPECT_EQ(*layers, 3);
  // The first layer's skip is the FusedConv that sums every skip and applies the Relu: it
  // reads that layer's G. The last layer's residual is dead, so it has only its skip.
  ASSERT_EQ(layer_summary(g), "Wyg Wys Ws FusedConv");
  const Node& second = g.node(1);
  EXPECT_EQ(second.inputs.size(), 7u);
  for (size_t i = 1; i < 7; ++i) EXPECT_TRUE(g.value(second.inputs[i]).is_constant()) << "input " << i;
  EXPECT_EQ(second.attributes.get_int("dilation", 0).value(), 2);
  EXPECT_EQ(second.attributes.get_int("pad_begin", -1).value(), 2);
  EXPECT_EQ(g.value(second.inputs[kWaveGateW]).shape, (Shape{16, 8, 2}));
  EXPECT_EQ(second.inputs[kWaveX], g.node(0).outputs[kWaveY]);
  EXPECT_EQ(g.node(3).inputs[0], g.node(0).outputs[kWaveG]);
}

TEST(WaveNetLayerFusion, AnOutputOfTheLastResidualKeepsIt) {
  Graph g = wavenet({1, 16, 20}, 2, /*last_x_output=*/true);
  auto layers = fuse_layers(g);
  ASSERT_TRUE(layers.is_ok()) << layers.status().to_string();
  EXPECT_EQ(*layers, 2);
  EXPECT_EQ(layer_summary(g), "Wyg Wys FusedConv");
  EXPECT_EQ(g.outputs()[1], g.node(1).outputs[kWaveY]);
}

TEST(WaveNetLayerFusion, DeclinedLayersStayAsTheyWere) {
  Graph g = wavenet({1, 16, 20}, 3);
  auto layers = fuse_layers(g, [](const WaveNetLayerShape& shape) { return shape.residual; });
  ASSERT_TRUE(layers.is_ok()) << layers.status().to_string();
  EXPECT_EQ(*layers, 2);
  EXPECT_EQ(layer_summary(g), "Wyg Wys G Conv FusedConv");

  Graph none = wavenet({2, 16, 20}, 2);
  std::vector<int64_t> positions;  // what the device is asked with, a layer each
  layers = fuse_layers(none, [&](const WaveNetLayerShape& shape) { return positions.push_back(shape.gate.positions), false; });
  EXPECT_EQ(positions, std::vector<int64_t>(2, 40));  // 2 images x 20 steps
  ASSERT_TRUE(layers.is_ok()) << layers.status().to_string();
  EXPECT_EQ(*layers, 0);
  EXPECT_EQ(layer_summary(none), "G FusedConv G Conv FusedConv");
}

}  // namespace
}  // namespace strider
