// A gated unit as torch exports one (WaveNet's layers, the gated stacks), for the tests of
// passes/fuse_gated_conv.h and of the FusedGatedConv kernels: x [N, C, T] -> Conv (2C
// channels, bias, `kernel` taps) -> [a chomp Slice dropping the padding's last outputs] ->
// halves (one Split, or two Slices) -> tanh(a) * sigmoid(b) [+ x]. Header only: the plan
// tests build it without the kernel harness, so the random tensors come from the caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/builder.h"

namespace strider::testing_support {

struct GatedUnit {
  Shape x = {1, 8, 20};
  int64_t kernel = 1, dilation = 1, stride = 1;
  bool chomp = false, residual = true, split = true;
  bool halves_read_twice = false;  // a second output reads the first half: the unit must stay unfused
};

// Appends one unit reading `x` to `b` and returns its output; the constants' names end in
// `tag`, and `random(shape, seed)` makes the weights and bias (seeds from `seed`).
template <typename Random>
ValueId add_gated_unit(GraphBuilder& b, ValueId x, const GatedUnit& u, DType dtype, Random random,
                       const std::string& tag = "", uint32_t seed = 2) {
  const int64_t c = u.x[1], pad = u.chomp ? u.dilation * (u.kernel - 1) : 0;
  AttributeMap conv;
  conv.set_ints("pads", {pad, pad});
  conv.set_ints("dilations", {u.dilation});
  conv.set_ints("strides", {u.stride});
  ValueId z = b.op("Conv", {x, b.constant("w" + tag, random(Shape{2 * c, c, u.kernel}, seed)),
                            b.constant("bias" + tag, random(Shape{2 * c}, seed + 1))},
                   conv);
  if (u.chomp)
    z = b.op("Slice", {z, b.constant("starts" + tag, i64_tensor({0})), b.constant("ends" + tag, i64_tensor({-pad})),
                       b.constant("axes" + tag, i64_tensor({2}))});
  ValueId a, g;
  if (u.split) {
    AttributeMap axis;
    axis.set_int("axis", 1);
    std::vector<ValueId> halves = b.ops("Split", {z, b.constant("split" + tag, i64_tensor({c, c}))}, 2, axis);
    a = halves[0], g = halves[1];
  } else {
    a = b.op("Slice", {z, b.constant("s0" + tag, i64_tensor({0})), b.constant("e0" + tag, i64_tensor({c})),
                       b.constant("x0" + tag, i64_tensor({1}))});
    g = b.op("Slice", {z, b.constant("s1" + tag, i64_tensor({c})), b.constant("e1" + tag, i64_tensor({2 * c})),
                       b.constant("x1" + tag, i64_tensor({1}))});
  }
  ValueId gated = b.op("Mul", {b.op("Tanh", {a}), b.op("Sigmoid", {g})});
  if (u.halves_read_twice) b.output(b.op("Relu", {a}));
  return u.residual ? b.op("Add", {x, gated}) : gated;
}

// `random(shape, seed)` makes the weights and bias in `dtype`.
template <typename Random>
Graph gated_unit_graph(const GatedUnit& u, DType dtype, Random random) {
  GraphBuilder b(22);
  ValueId x = b.input("x", dtype, u.x);
  const ValueId y = add_gated_unit(b, x, u, dtype, random);
  // The unit's output first, then any second output the unit made.
  b.output(y);
  return b.build();
}

// A gated stack: `units` units of `u` in a chain, each reading the one before (as
// models/architectures.py's GatedChain). `tap_after`: the unit (0-based) whose output a
// second graph output (a Relu of it) also reads, -1 for none; `no_residual`: the unit
// that has no residual add, -1 for none.
template <typename Random>
Graph gated_stack_graph(const GatedUnit& u, int units, DType dtype, Random random, int tap_after = -1,
                        int no_residual = -1) {
  GraphBuilder b(22);
  ValueId h = b.input("x", dtype, u.x);
  for (int i = 0; i < units; ++i) {
    GatedUnit unit = u;
    unit.residual = u.residual && i != no_residual;
    h = add_gated_unit(b, h, unit, dtype, random, std::to_string(i), uint32_t(2 + 2 * i));
    if (i == tap_after) b.output(b.op("Relu", {h}));
  }
  b.output(h);
  return b.build();
}

// One WaveNet layer whose projections are the graph's outputs: x -> the gate unit `u`
// (chomped, no residual) -> G; then, in FusedWaveNetLayer's order of outputs, Y = x +
// Conv1x1(G) where `residual`, S = Conv1x1(G) to `skip_channels` (0: none), and G itself
// where `g_output`.
template <typename Random>
Graph wavenet_layer_graph(const GatedUnit& u, bool residual, int64_t skip_channels, bool g_output, DType dtype,
                          Random random) {
  GraphBuilder b(22);
  const ValueId x = b.input("x", dtype, u.x);
  GatedUnit unit = u;
  unit.chomp = true, unit.residual = false;
  const ValueId g = add_gated_unit(b, x, unit, dtype, random);
  const int64_t c = u.x[1];
  if (residual)
    b.output(b.op("Add", {x, b.op("Conv", {g, b.constant("wr", random(Shape{c, c, 1}, 7)),
                                         b.constant("br", random(Shape{c}, 8))})}));
  if (skip_channels > 0)
    b.output(b.op("Conv", {g, b.constant("ws", random(Shape{skip_channels, c, 1}, 9)),
                           b.constant("bs", random(Shape{skip_channels}, 10))}));
  if (g_output) b.output(g);
  return b.build();
}

// WaveNet (models/architectures.py's WaveNet, without its head): `layers` layers of gated
// units of 2 taps, dilations 1, 2, 4, ... (`u`'s dilation ignored), each chomped, with a
// residual 1x1 convolution added to its input and a skip 1x1 convolution; the skips
// summed, then a Relu, as the graph's first output. `last_x_output`: the last layer's
// residual as a second output (else it is dead, and that layer has only its skip).
template <typename Random>
Graph wavenet_graph(const GatedUnit& u, int layers, DType dtype, Random random, bool last_x_output = false) {
  GraphBuilder b(22);
  ValueId x = b.input("x", dtype, u.x);
  const int64_t c = u.x[1];
  ValueId skips = kNoValue;
  for (int i = 0; i < layers; ++i) {
    GatedUnit unit = u;
    unit.kernel = 2, unit.dilation = int64_t(1) << i, unit.chomp = true, unit.residual = false;
    const std::string tag = std::to_string(i);
    const uint32_t seed = uint32_t(2 + 6 * i);
    const ValueId g = add_gated_unit(b, x, unit, dtype, random, tag, seed);
    const ValueId res = b.op("Conv", {g, b.constant("wr" + tag, random(Shape{c, c, 1}, seed + 2)),
                                      b.constant("br" + tag, random(Shape{c}, seed + 3))});
    const ValueId skip = b.op("Conv", {g, b.constant("ws" + tag, random(Shape{c, c, 1}, seed + 4)),
                                       b.constant("bs" + tag, random(Shape{c}, seed + 5))});
    x = b.op("Add", {x, res});
    skips = skips == kNoValue ? skip : b.op("Add", {skips, skip});
  }
  b.output(b.op("Relu", {skips}));
  if (last_x_output) b.output(x);
  return b.build();
}

}  // namespace strider::testing_support
