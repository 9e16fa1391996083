// A gated unit as torch exports one (WaveNet's layers, the gated stacks), for the tests of
// passes/fuse_gated_conv.h and of the FusedGatedConv kernels: x [N, C, T] -> Conv (2C
// channels, bias, `kernel` taps) -> [a chomp Slice dropping the padding's last outputs] ->
// halves (one Split, or two Slices) -> tanh(a) * sigmoid(b) [+ x]. Header only: the plan
// tests build it without the kernel harness, so the random tensors come from the caller.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/builder.h"

namespace strider::testing_support {

struct GatedUnit {
  Shape x = {1, 8, 20};
  int64_t kernel = 1, dilation = 1, stride = 1;
  bool chomp = false, residual = true, split = true;
  bool halves_read_twice = false;  // a second output reads the first half: the unit must stay unfused
};

// `random(shape, seed)` makes the weights and bias in `dtype`.
template <typename Random>
Graph gated_unit_graph(const GatedUnit& u, DType dtype, Random random) {
  GraphBuilder b(22);
  auto i64s = [](std::vector<int64_t> v) { return Tensor::from_values<int64_t>(DType::kI64, {int64_t(v.size())}, v); };
  const int64_t c = u.x[1], pad = u.chomp ? u.dilation * (u.kernel - 1) : 0;
  ValueId x = b.input("x", dtype, u.x);
  AttributeMap conv;
  conv.set_ints("pads", {pad, pad});
  conv.set_ints("dilations", {u.dilation});
  conv.set_ints("strides", {u.stride});
  ValueId z = b.op("Conv", {x, b.constant("w", random(Shape{2 * c, c, u.kernel}, 2)), b.constant("bias", random(Shape{2 * c}, 3))},
                   conv);
  if (u.chomp)
    z = b.op("Slice", {z, b.constant("starts", i64s({0})), b.constant("ends", i64s({-pad})), b.constant("axes", i64s({2}))});
  ValueId a, g;
  if (u.split) {
    AttributeMap axis;
    axis.set_int("axis", 1);
    std::vector<ValueId> halves = b.ops("Split", {z, b.constant("split", i64s({c, c}))}, 2, axis);
    a = halves[0], g = halves[1];
  } else {
    a = b.op("Slice", {z, b.constant("s0", i64s({0})), b.constant("e0", i64s({c})), b.constant("x0", i64s({1}))});
    g = b.op("Slice", {z, b.constant("s1", i64s({c})), b.constant("e1", i64s({2 * c})), b.constant("x1", i64s({1}))});
  }
  ValueId gated = b.op("Mul", {b.op("Tanh", {a}), b.op("Sigmoid", {g})});
  b.output(u.residual ? b.op("Add", {x, gated}) : gated);
  if (u.halves_read_twice) b.output(b.op("Relu", {a}));
  return b.build();
}

}  // namespace strider::testing_support
