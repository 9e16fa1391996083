// The kernel suite: every op's kernel on every device (cpu, sim with two queues, cuda; cuda
// skips without a GPU) over one catalog of view layouts (tests/support/kernel_harness.h:
// dense, channels-last padded, reversed, channel slices at an offset, broadcast inputs),
// each result checked against the float64 reference and every byte outside each output
// checked untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/onnx_types.h"
#include "ir/builder.h"
#include "kernel_harness.h"
#include "kernel_suite.h"
#include "ops/elementwise_params.h"
#include "ops/fused_attention.h"
#include "ops/fused_elementwise.h"
#include "passes/fuse_attention.h"
#include "passes/fuse_elementwise.h"
#include "passes/infer_shapes.h"

namespace strider {
namespace {

using kernel_test::ViewLayout;

using kernel_test::KernelSuite;

TEST_P(KernelSuite, BinaryWithBroadcast) {
  GraphBuilder b;
  b.output(b.op("Add", {b.input("a", DType::kF32, {2, 3, 4, 5}), b.input("c", DType::kF32, {3, 1, 5})}));
  check(b, {{"a", x({2, 3, 4, 5})}, {"c", x({3, 1, 5}, 2)}});
}

TEST_P(KernelSuite, UnaryChain) {
  for (const char* op : {"Sigmoid", "Tanh", "Relu", "HardSwish", "Exp", "Abs", "Neg", "Erf"}) {
    GraphBuilder b;
    b.output(b.op(op, {b.input("a", DType::kF32, {2, 5, 3, 4})}));
    check(b, {{"a", x({2, 5, 3, 4})}});
  }
}

// Inputs inside an op's domain (Log of a positive, Acosh of at least 1, Atanh inside
// (-1, 1)); IsNaN and IsInf get NaN and both infinities among the values.
Tensor domain_input(std::string_view op, DType dtype, const Shape& shape, uint32_t seed) {
  Tensor t = kernel_test::random_tensor(DType::kF32, shape, seed);
  if (!is_floating(dtype)) return kernel_test::random_tensor(dtype, shape, seed);
  float* v = t.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (op == "Log" || op == "Sqrt") v[i] = std::fabs(v[i]) + 0.1f;
    if (op == "Acosh") v[i] = std::fabs(v[i]) + 1.0f;
    if (op == "Asin" || op == "Acos" || op == "Atanh") v[i] = 0.9f * std::tanh(v[i]);
    if ((op == "IsNaN" || op == "IsInf") && i % 7 < 3)
      v[i] = i % 7 == 0 ? NAN : (i % 7 == 1 ? INFINITY : -INFINITY);
  }
  return dtype == DType::kF32 ? t : kernel_test::converted(t, dtype);
}

// Every row of the elementwise table (ops/elementwise_math.h) whose kernel the devices make
// from its functor, on each of its kinds' dtypes (f32, f16, bf16, and int8 for the numeric
// ones, with the 16-bit and wide unsigned integers where the device computes them; the
// integers of every width for the bitwise ones).
TEST_P(KernelSuite, EveryElementwiseTableOp) {
  std::vector<DType> wide_integers = {DType::kI16, DType::kU16, DType::kU32, DType::kU64};
  if (on_cuda()) wide_integers.clear();  // cuda_kernels.cc refuses them
  for (int code = 0; code < kElementwiseOpCount; ++code) {
    const ElementwiseOp op = ElementwiseOp(code);
    if (elementwise_kernel(op) != ElementwiseKernel::kMap) continue;
    const ElementwiseKind kind = elementwise_kind(op);
    const std::string name(elementwise_op_name(op));
    const bool logic = kind == ElementwiseKind::kLogicUnary || kind == ElementwiseKind::kLogicBinary;
    const bool numeric = kind == ElementwiseKind::kNumericUnary || kind == ElementwiseKind::kNumericBinary;
    const bool integer = kind == ElementwiseKind::kIntegerUnary || kind == ElementwiseKind::kIntegerBinary;
    std::vector<DType> dtypes = logic     ? std::vector<DType>{DType::kBool}
                                : integer ? std::vector<DType>{DType::kI8, DType::kU8, DType::kI32, DType::kI64}
                                          : std::vector<DType>{DType::kF32, DType::kF16, DType::kBF16};
    if (numeric || kind == ElementwiseKind::kCompare) dtypes.push_back(DType::kI8);
    if (numeric || integer || kind == ElementwiseKind::kCompare) dtypes.insert(dtypes.end(), wide_integers.begin(), wide_integers.end());
    for (DType dtype : dtypes) {
      SCOPED_TRACE(name + " on " + std::string(dtype_name(dtype)));
      GraphBuilder b(24);
      AttributeMap attrs;
      if (name == "Mod") attrs.set_int("fmod", is_floating(dtype) ? 1 : 0);
      std::map<std::string, Tensor> inputs = {{"a", domain_input(name, dtype, {2, 3, 4, 5}, 1)}};
      std::vector<ValueId> operands = {b.input("a", dtype, {2, 3, 4, 5})};
      if (elementwise_arity(kind) == 2) {
        Tensor second = domain_input(name, dtype, {3, 1, 5}, 2);
        if ((name == "Div" || name == "Mod") && !is_floating(dtype)) {  // no integer division by 0
          Tensor divisor(DType::kF64, {3, 1, 5});
          for (int64_t i = 0; i < divisor.num_elements(); ++i)
            divisor.data<double>()[i] = double((i * 5) % 7 + 1) * (is_unsigned_integral(dtype) || i % 2 ? 1 : -1);
          second = kernel_test::converted(divisor, dtype);
        }
        inputs["c"] = second;
        operands.push_back(b.input("c", dtype, {3, 1, 5}));
      }
      b.output(b.op(name, operands, attrs));
      check(b, inputs);
    }
  }
}

// A reduction over a row that is all -inf (an attention row masked out entirely) gives
// -inf, not the lowest finite float; all +inf gives +inf for ReduceMin.
TEST_P(KernelSuite, ReduceMaxAndMinOfInfiniteRows) {
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    SCOPED_TRACE(op);
    Tensor t = x({3, 4, 5});
    for (int64_t i = 0; i < 5; ++i) t.data<float>()[5 + i] = std::string(op) == "ReduceMax" ? -INFINITY : INFINITY;
    GraphBuilder b;
    b.output(b.op(op, {b.input("a", DType::kF32, {3, 4, 5})}, ints_attribute("axes", {2})));
    check(b, {{"a", t}});
  }
}

TEST_P(KernelSuite, MatMulBatchedAndGemmTransposed) {
  GraphBuilder b;
  b.output(b.op("MatMul", {b.input("a", DType::kF32, {2, 6, 7}), b.input("w", DType::kF32, {7, 5})}));
  check(b, {{"a", x({2, 6, 7})}, {"w", x({7, 5}, 2)}});
  GraphBuilder g;
  AttributeMap attrs = int_attribute("transB", 1);
  attrs.set_float("alpha", 0.5f);
  g.output(g.op("Gemm", {g.input("a", DType::kF32, {6, 7}), g.input("w", DType::kF32, {5, 7}), g.input("c", DType::kF32, {5})}, attrs));
  check(g, {{"a", x({6, 7})}, {"w", x({5, 7}, 2)}, {"c", x({5}, 3)}});
}

// f64 has no oneDNN kernel: these run the naive strided kernels on every layout.
TEST_P(KernelSuite, NaiveMatMulAndConvOnF64) {
  GraphBuilder b;
  b.output(b.op("MatMul", {b.input("a", DType::kF64, {2, 6, 7}), b.input("w", DType::kF64, {7, 5})}));
  check(b, {{"a", random_tensor(DType::kF64, {2, 6, 7}, 1)}, {"w", random_tensor(DType::kF64, {7, 5}, 2)}});
  GraphBuilder c;
  AttributeMap attrs = ints_attribute("pads", {1, 0, 1, 2});
  attrs.set_int("group", 2);
  c.output(c.op("Conv", {c.input("x", DType::kF64, {2, 4, 7, 6}), c.input("w", DType::kF64, {6, 2, 3, 3})}, attrs));
  check(c, {{"x", random_tensor(DType::kF64, {2, 4, 7, 6}, 3)}, {"w", random_tensor(DType::kF64, {6, 2, 3, 3}, 4)}});
}

TEST_P(KernelSuite, ConvGroupedPaddedStrided) {
  GraphBuilder b;
  AttributeMap attrs = ints_attribute("pads", {1, 0, 1, 2});
  attrs.set_ints("strides", {2, 1});
  attrs.set_int("group", 2);
  b.output(b.op("Conv", {b.input("x", DType::kF32, {2, 4, 7, 6}), b.input("w", DType::kF32, {6, 2, 3, 3}),
                         b.input("bias", DType::kF32, {6})}, attrs));
  check(b, {{"x", x({2, 4, 7, 6})}, {"w", x({6, 2, 3, 3}, 2)}, {"bias", x({6}, 3)}});
}

// Depthwise convolutions (group == channels): on cuda with strider's own kernel forced
// (STRIDER_CUDA_KERNEL_CHOICE, hal/cuda/timed_choice.h), since the timed choice may keep
// cuDNN for shapes this small; windows of 3x3 (unrolled) and others, strides, asymmetric
// pads, dilation, with and without bias, 2-D and 1-D; runtime weights go to cuDNN.
// Channels in multiples of 4, f32 and bf16: the CUDA kernel's 4-channel vector form (the
// first own candidate) where the layout's channel runs are aligned (the catalog's aligned
// slice), and its scalar form forced by name everywhere.
TEST_P(KernelSuite, DepthwiseConvolutions) {
  struct Case {
    Shape x, w;
    std::vector<int64_t> pads, strides, dilations;
    bool bias, constant;
    DType dtype = DType::kF32;
  };
  const std::vector<Case> cases = {
      {{2, 6, 9, 8}, {6, 1, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, true, true},
      {{2, 6, 9, 8}, {6, 1, 3, 3}, {1, 0, 0, 1}, {2, 2}, {1, 1}, false, true},
      {{1, 5, 11, 10}, {5, 1, 5, 3}, {2, 1, 2, 1}, {1, 2}, {2, 1}, true, true},
      {{2, 6, 20}, {6, 1, 3}, {2, 2}, {1}, {2}, true, true},
      {{2, 6, 9, 8}, {6, 1, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, true, false},
      // widths not a multiple of the 3x3 kernel's tile of 4 outputs; a height dilation
      {{1, 5, 7, 7}, {5, 1, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, true, true},
      {{1, 5, 9, 11}, {5, 1, 3, 3}, {1, 1, 1, 1}, {2, 2}, {1, 1}, false, true},
      {{2, 4, 10, 6}, {4, 1, 3, 3}, {2, 1, 2, 1}, {1, 1}, {2, 1}, true, true},
      {{2, 8, 9, 10}, {8, 1, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, true, true},
      {{1, 12, 11, 9}, {12, 1, 3, 3}, {0, 1, 2, 1}, {2, 2}, {1, 1}, true, true},
      {{2, 8, 9, 13}, {8, 1, 3, 3}, {1, 1, 1, 1}, {2, 2}, {1, 1}, true, true, DType::kBF16},
      {{1, 16, 10, 7}, {16, 1, 3, 3}, {2, 1, 2, 1}, {1, 1}, {2, 1}, false, true, DType::kBF16},
  };
  for (size_t k = 0; k < 2 * cases.size(); ++k) {
    const char* choice = k < cases.size() ? "own" : "strider-cuda:depthwise-conv";
    kernel_test::ScopedEnvironment forced("STRIDER_CUDA_KERNEL_CHOICE", choice);
    const Case& c = cases[k % cases.size()];
    SCOPED_TRACE(fmt::format("case {} {}", k % cases.size(), choice));
    const DType t = c.dtype;
    GraphBuilder b(t == DType::kF32 ? 17 : 22);  // Conv takes bf16 from opset 22
    AttributeMap attrs = ints_attribute("pads", c.pads);
    attrs.set_ints("strides", c.strides);
    attrs.set_ints("dilations", c.dilations);
    attrs.set_int("group", c.x[1]);
    std::map<std::string, Tensor> inputs = {{"x", kernel_test::converted(x(c.x), t)}};
    std::vector<ValueId> operands = {b.input("x", t, c.x)};
    if (c.constant) {
      operands.push_back(b.constant("w", kernel_test::converted(x(c.w, 2), t)));
      if (c.bias) operands.push_back(b.constant("bias", kernel_test::converted(x({c.x[1]}, 3), t)));
    } else {
      operands.push_back(b.input("w", DType::kF32, c.w));
      inputs.insert({"w", x(c.w, 2)});
      if (c.bias) {
        operands.push_back(b.input("bias", DType::kF32, {c.x[1]}));
        inputs.insert({"bias", x({c.x[1]}, 3)});
      }
    }
    b.output(b.op("Conv", operands, attrs));
    check(b, inputs);
  }
}

// Convolutions of one group with few taps per output (input channels x window): on cuda
// strider's direct kernel, forced as above. Output channels not a multiple of its group of
// 8, strides, asymmetric pads, dilation, 1-D; more than kMaxDirectTaps taps go to cuDNN.
TEST_P(KernelSuite, DirectConvolutions) {
  kernel_test::ScopedEnvironment own("STRIDER_CUDA_KERNEL_CHOICE", "own");
  struct Case {
    Shape x, w;
    std::vector<int64_t> pads, strides, dilations;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{2, 3, 9, 10}, {5, 3, 3, 3}, {1, 1, 1, 1}, {2, 2}, {1, 1}, true},   // a first layer
      {{2, 6, 20}, {10, 6, 1}, {0, 0}, {1}, {1}, true},                     // a gated stack's 1x1
      {{2, 6, 20}, {12, 6, 2}, {4, 0}, {1}, {4}, true},                     // WaveNet's dilated layer
      {{1, 4, 8, 9}, {12, 4, 3, 3}, {2, 1, 0, 2}, {1, 2}, {2, 1}, false},
      {{1, 130, 5, 5}, {3, 130, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, true},  // 1170 taps: cuDNN
      // Output channels in whole groups of 8: channels-last outputs stored a group at once.
      {{2, 3, 9, 10}, {16, 3, 3, 3}, {1, 1, 1, 1}, {2, 2}, {1, 1}, true},
      {{2, 6, 20}, {8, 6, 3}, {2, 2}, {1}, {2}, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE("case " + std::to_string(i));
    GraphBuilder b;
    AttributeMap attrs = ints_attribute("pads", c.pads);
    attrs.set_ints("strides", c.strides);
    attrs.set_ints("dilations", c.dilations);
    std::vector<ValueId> operands = {b.input("x", DType::kF32, c.x), b.constant("w", x(c.w, 2))};
    if (c.bias) operands.push_back(b.constant("bias", x({c.w[0]}, 3)));
    b.output(b.op("Conv", operands, attrs));
    check(b, {{"x", x(c.x)}});
  }
}

TEST_P(KernelSuite, Pooling) {
  GraphBuilder b;
  AttributeMap attrs = ints_attribute("kernel_shape", {3, 3});
  attrs.set_ints("pads", {1, 1, 1, 1});
  attrs.set_ints("strides", {2, 2});
  auto outs = b.ops("MaxPool", {b.input("x", DType::kF32, {1, 3, 7, 6})}, 2, attrs);
  b.output(outs[0]);
  b.output(outs[1]);
  check(b, {{"x", x({1, 3, 7, 6})}});
  GraphBuilder a;
  AttributeMap avg = ints_attribute("kernel_shape", {2, 3});
  avg.set_int("count_include_pad", 1);
  avg.set_ints("pads", {0, 1, 1, 1});
  a.output(a.op("AveragePool", {a.input("x", DType::kF32, {2, 3, 5, 6})}, avg));
  check(a, {{"x", x({2, 3, 5, 6})}});
  // A declared kernel far past the input (2^32 with SAME padding, each window covering the
  // input), and windows wholly in the padding (pads past the kernel), for max and average:
  // only the taps inside the input are visited, and an empty window gives the lowest value.
  GraphBuilder huge;
  AttributeMap h = ints_attribute("kernel_shape", {int64_t(1) << 32, 3});
  h.set_string("auto_pad", "SAME_UPPER");
  auto hm = huge.ops("MaxPool", {huge.input("x", DType::kF32, {1, 2, 8, 8})}, 2, h);
  huge.output(hm[0]);
  huge.output(hm[1]);
  check(huge, {{"x", x({1, 2, 8, 8})}});
  // The same without Indices, which oneDNN's pooling would take on the CPU: it walks every
  // declared tap, and the fuzzer's MaxPool of 3221225472 x 3 taps ran for minutes there.
  GraphBuilder huge_values;
  AttributeMap fuzzed = ints_attribute("kernel_shape", {int64_t(3) << 30, 3});
  fuzzed.set_string("auto_pad", "SAME_UPPER");
  huge_values.output(huge_values.op("MaxPool", {huge_values.input("x", DType::kF32, {1, 2, 8, 8})}, fuzzed));
  check(huge_values, {{"x", x({1, 2, 8, 8})}});
  for (const char* op : {"MaxPool", "AveragePool"}) {
    GraphBuilder g;
    AttributeMap pad = ints_attribute("kernel_shape", {2, 2});
    pad.set_ints("pads", {0, 3, 5, 0});
    if (std::string(op) == "AveragePool") pad.set_int("count_include_pad", 1);
    g.output(g.op(op, {g.input("x", DType::kF32, {1, 2, 4, 5})}, pad));
    SCOPED_TRACE(op);
    check(g, {{"x", x({1, 2, 4, 5})}});
  }
  // Max pools without indices over channels in multiples of 4, f32 and bf16: on CUDA the
  // 4-channel vector form where the layout's channel runs are aligned (YOLOv8n's SPPF 5x5;
  // strides, dilation and windows wholly in the padding), the scalar one elsewhere.
  struct Vector {
    Shape x;
    std::vector<int64_t> kernel, pads, strides, dilations;
    DType dtype;
  };
  for (const Vector& v : std::vector<Vector>{{{2, 8, 7, 6}, {5, 5}, {2, 2, 2, 2}, {1, 1}, {1, 1}, DType::kF32},
                                             {{1, 16, 9, 7}, {3, 2}, {1, 0, 4, 1}, {2, 2}, {2, 1}, DType::kBF16},
                                             {{2, 8, 6, 6}, {5, 5}, {2, 2, 2, 2}, {1, 1}, {1, 1}, DType::kBF16}}) {
    SCOPED_TRACE(dtype_name(v.dtype));
    GraphBuilder g(v.dtype == DType::kF32 ? 17 : 22);
    AttributeMap pool = ints_attribute("kernel_shape", v.kernel);
    pool.set_ints("pads", v.pads);
    pool.set_ints("strides", v.strides);
    pool.set_ints("dilations", v.dilations);
    g.output(g.op("MaxPool", {g.input("x", v.dtype, v.x)}, pool));
    check(g, {{"x", kernel_test::converted(x(v.x, 5), v.dtype)}});
  }
  GraphBuilder bytes;  // int8: the empty windows must give -128 (-inf would not convert)
  AttributeMap bp = ints_attribute("kernel_shape", {2, 2});
  bp.set_ints("pads", {0, 0, 4, 4});
  bytes.output(bytes.op("MaxPool", {bytes.input("x", DType::kI8, {1, 2, 4, 5})}, bp));
  check(bytes, {{"x", random_tensor(DType::kI8, {1, 2, 4, 5}, 9)}});
}

TEST_P(KernelSuite, DataMovement) {
  GraphBuilder c;
  c.output(c.op("Concat", {c.input("a", DType::kF32, {2, 3, 4}), c.input("b", DType::kF32, {2, 5, 4})}, int_attribute("axis", 1)));
  check(c, {{"a", x({2, 3, 4})}, {"b", x({2, 5, 4}, 2)}});
  // Channel parts in multiples of 4 (f32) and 8 (bf16): in the channels-last layouts each
  // part's copy runs along its channels, in 16-byte words where both sides are aligned.
  for (DType t : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t unit = t == DType::kF32 ? 4 : 8;
    const Shape a_shape = {2, 2 * unit, 3, 5}, b_shape = {2, unit, 3, 5};
    GraphBuilder g(t == DType::kF32 ? 17 : 22);
    g.output(g.op("Concat", {g.input("a", t, a_shape), g.input("b", t, b_shape)}, int_attribute("axis", 1)));
    check(g, {{"a", kernel_test::converted(x(a_shape), t)}, {"b", kernel_test::converted(x(b_shape, 2), t)}});
  }
  // Transposes of planes of several 32x32 tiles, partial ones at both edges: on CUDA, where
  // the output runs along one dim and the input along another, the tiled transposing copy.
  for (DType t : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(t));
    const Shape shape = {2, 37, 45};
    GraphBuilder g(t == DType::kF32 ? 17 : 22);
    g.output(g.op("Transpose", {g.input("a", t, shape)}, ints_attribute("perm", {0, 2, 1})));
    check(g, {{"a", kernel_test::converted(x(shape, 3), t)}});
  }
  GraphBuilder s;
  auto parts = s.ops("Split", {s.input("a", DType::kF32, {2, 6, 4}), s.constant("sizes", i64_tensor({2, 4}))}, 2, int_attribute("axis", 1));
  s.output(parts[0]);
  s.output(parts[1]);
  check(s, {{"a", x({2, 6, 4})}});
  GraphBuilder l;
  l.output(l.op("Slice", {l.input("a", DType::kF32, {5, 6, 4}), l.constant("starts", i64_tensor({-1, 1})),
                          l.constant("ends", i64_tensor({-6, 6})), l.constant("axes", i64_tensor({0, 1})), l.constant("steps", i64_tensor({-2, 2}))}));
  check(l, {{"a", x({5, 6, 4})}});
  GraphBuilder t;
  t.output(t.op("Transpose", {t.input("a", DType::kF32, {2, 3, 4})}, ints_attribute("perm", {2, 0, 1})));
  check(t, {{"a", x({2, 3, 4})}});
  GraphBuilder e;
  e.output(e.op("Expand", {e.input("a", DType::kF32, {3, 1}), e.constant("shape", i64_tensor({2, 3, 4}))}));
  check(e, {{"a", x({3, 1})}});
}

// Batch dims broadcast both ways ([2, 1] against [1, 3]): no one batch stride covers them;
// cuda runs one strided batch per outer index.
TEST_P(KernelSuite, MatMulWithBatchDimsBroadcastBothWays) {
  GraphBuilder b;
  b.output(b.op("MatMul", {b.input("a", DType::kF32, {2, 1, 3, 4}), b.input("b", DType::kF32, {1, 3, 4, 5})}));
  check(b, {{"a", x({2, 1, 3, 4})}, {"b", x({1, 3, 4, 5}, 2)}});
}

TEST_P(KernelSuite, ReshapeOfAStridedInput) {
  GraphBuilder b;
  b.output(b.op("Reshape", {b.input("a", DType::kF32, {2, 3, 4}), b.constant("shape", i64_tensor({4, 6}))}));
  check(b, {{"a", x({2, 3, 4})}});
}

// Cast and CastLike between every pair of strider's dtypes (on cuda, of those it computes:
// cuda_kernels.cc refuses the 16-bit and wide unsigned integers and the storage-only types). The values are seeded and lie in
// [0, 74) with fractions, so every conversion is defined by ONNX (no overflow: saturation
// and wrapping would agree) and truncation toward zero is visible; bool is x != 0.
TEST_P(KernelSuite, CastAndCastLikeBetweenEveryPairOfDtypes) {
  Tensor base(DType::kF64, {3, 5});
  for (int64_t i = 0; i < base.num_elements(); ++i) base.data<double>()[i] = double((i * 37 + 11) % 200) * 0.37;
  base.data<double>()[3] = 0.0;  // a false for bool
  auto cuda_refuses = [](DType d) {
    return is_small_type(d) || d == DType::kI16 || d == DType::kU16 || d == DType::kU32 || d == DType::kU64;
  };
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      if (on_cuda() && (cuda_refuses(from) || cuda_refuses(to))) continue;
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      Tensor a = kernel_test::converted(base, from);
      GraphBuilder cast(19);
      cast.output(cast.op("Cast", {cast.input("a", from, {3, 5})}, int_attribute("to", onnx_type_code(to))));
      check(cast, {{"a", a}});
      GraphBuilder like(19);
      like.output(like.op("CastLike", {like.input("a", from, {3, 5}), like.input("t", to, {1})}));
      check(like, {{"a", a}, {"t", kernel_test::converted(Tensor::from_values<double>(DType::kF64, {1}, std::vector<double>{2.0}), to)}});
    }
}

// Integers beyond 2^53 into 4- and 2-bit integers: the low bits decide (wrapping), which a
// cast through a double would round away.
TEST_P(KernelSuite, CastOfWideIntegersToFewBitsWraps) {
  if (on_cuda()) GTEST_SKIP() << "CUDA has no 4- or 2-bit types";
  const std::vector<int64_t> wide = {(int64_t(1) << 60) + 5, -(int64_t(1) << 58) - 3, (int64_t(1) << 62) + 9, 7,
                                     -8, (int64_t(1) << 55) + 11};
  for (DType from : {DType::kI64, DType::kU64})
    for (DType to : {DType::kI4, DType::kU4, DType::kI2, DType::kU2}) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      Tensor a(from, {2, 3});
      for (size_t i = 0; i < wide.size(); ++i) std::memcpy(a.bytes() + i * 8, &wide[i], 8);
      GraphBuilder cast(19);
      cast.output(cast.op("Cast", {cast.input("a", from, {2, 3})}, int_attribute("to", onnx_type_code(to))));
      check(cast, {{"a", a}});
    }
}

TEST_P(KernelSuite, GatherWhereCastClip) {
  GraphBuilder g;
  g.output(g.op("Gather", {g.input("a", DType::kF32, {4, 5, 3}), g.input("i", DType::kI64, {2, 2})}, int_attribute("axis", 1)));
  check(g, {{"a", x({4, 5, 3})}, {"i", Tensor::from_values<int64_t>(DType::kI64, {2, 2}, std::vector<int64_t>{4, -5, 0, -2})}});
  GraphBuilder w;
  w.output(w.op("Where", {w.input("c", DType::kBool, {3, 4}), w.input("a", DType::kF32, {3, 4}), w.input("b", DType::kF32, {4})}));
  check(w, {{"c", random_tensor(DType::kBool, {3, 4}, 6)}, {"a", x({3, 4})}, {"b", x({4}, 2)}});
  GraphBuilder k;
  AttributeMap to = int_attribute("to", 7);  // INT64
  k.output(k.op("Cast", {k.input("a", DType::kF32, {3, 4})}, to));
  check(k, {{"a", x({3, 4})}});
  GraphBuilder p;
  p.output(p.op("Clip", {p.input("a", DType::kF32, {3, 4}), p.constant("lo", Tensor::from_values<float>(DType::kF32, {}, std::vector<float>{-0.5f})),
                         p.constant("hi", Tensor::from_values<float>(DType::kF32, {}, std::vector<float>{0.7f}))}));
  check(p, {{"a", x({3, 4})}});
}

TEST_P(KernelSuite, NormalizationAndReductions) {
  GraphBuilder s;
  s.output(s.op("Softmax", {s.input("a", DType::kF32, {2, 3, 5})}, int_attribute("axis", 1)));
  check(s, {{"a", x({2, 3, 5})}});
  // YOLOv8's DFL: 16 bins over a strided axis, 37 rows side by side (two blocks of 16
  // lanes and a partial one), in every layout of the catalog (channels-last ones write the
  // bins inner).
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (DType t : {DType::kF32, DType::kBF16}) {
      GraphBuilder d;
      d.output(d.op(op, {d.input("a", t, {2, 16, 3, 37})}, int_attribute("axis", 1)));
      check(d, {{"a", kernel_test::converted(x({2, 16, 3, 37}), t)}});
    }
  GraphBuilder r;  // opset 17: axes is an attribute
  AttributeMap keep = int_attribute("keepdims", 0);
  AttributeMap keep_axes = ints_attribute("axes", {0, 2});
  keep_axes.set_int("keepdims", 0);
  r.output(r.op("ReduceSum", {r.input("a", DType::kF32, {2, 3, 5}), r.constant("axes", i64_tensor({0, 2}))}, keep));
  check(r, {{"a", x({2, 3, 5})}});
  GraphBuilder m;
  m.output(m.op("ReduceMean", {m.input("a", DType::kF32, {2, 3, 5})}, keep_axes));
  check(m, {{"a", x({2, 3, 5})}});
  GraphBuilder r18(18);  // opset 18: ReduceMean's axes is an input
  r18.output(r18.op("ReduceMean", {r18.input("a", DType::kF32, {2, 3, 5}), r18.constant("axes", i64_tensor({0, 2}))}, keep));
  check(r18, {{"a", x({2, 3, 5})}});
  GraphBuilder n;
  std::vector<ValueId> params;
  ValueId in = n.input("x", DType::kF32, {2, 3, 4, 2});
  for (const char* name : {"scale", "bias", "mean", "var"}) params.push_back(n.input(name, DType::kF32, {3}));
  n.output(n.op("BatchNormalization", {in, params[0], params[1], params[2], params[3]}));
  Tensor var = x({3}, 9);
  for (int64_t i = 0; i < 3; ++i) var.data<float>()[i] = 0.5f + std::fabs(var.data<float>()[i]);
  check(n, {{"x", x({2, 3, 4, 2})}, {"scale", x({3}, 2)}, {"bias", x({3}, 3)}, {"mean", x({3}, 4)}, {"var", var}});
}

// The normalization family (ops/normalization.h): LayerNormalization with broadcast
// parameters and its Mean and InvStdDev outputs, RMSNormalization, InstanceNormalization,
// GroupNormalization per group (18) and per channel (21), MeanVarianceNormalization.
TEST_P(KernelSuite, NormalizationFamily) {
  const auto family = [&] {
    {
      GraphBuilder b(17);
      AttributeMap attrs = int_attribute("axis", -2);
      attrs.set_float("epsilon", 1e-3f);
      auto outs = b.ops("LayerNormalization", {b.input("x", DType::kF32, {2, 3, 4, 5}), b.input("s", DType::kF32, {1, 5}),
                                               b.input("c", DType::kF32, {4, 5})}, 3, attrs);
      for (ValueId v : outs) b.output(v);
      SCOPED_TRACE("LayerNormalization");
      check(b, {{"x", x({2, 3, 4, 5})}, {"s", x({1, 5}, 2)}, {"c", x({4, 5}, 3)}});
    }
    {
      GraphBuilder b(23);
      b.output(b.op("RMSNormalization", {b.input("x", DType::kF32, {2, 3, 8}), b.input("s", DType::kF32, {8})}));
      SCOPED_TRACE("RMSNormalization");
      check(b, {{"x", x({2, 3, 8})}, {"s", x({8}, 2)}});
    }
    {
      GraphBuilder b(17);
      b.output(b.op("InstanceNormalization", {b.input("x", DType::kF32, {2, 3, 4, 5}), b.input("s", DType::kF32, {3}),
                                              b.input("c", DType::kF32, {3})}));
      SCOPED_TRACE("InstanceNormalization");
      check(b, {{"x", x({2, 3, 4, 5})}, {"s", x({3}, 2)}, {"c", x({3}, 3)}});
    }
    for (int opset : {18, 21}) {
      GraphBuilder b(opset);
      const int64_t params = opset == 18 ? 3 : 6;
      b.output(b.op("GroupNormalization", {b.input("x", DType::kF32, {2, 6, 4, 5}), b.input("s", DType::kF32, {params}),
                                           b.input("c", DType::kF32, {params})}, int_attribute("num_groups", 3)));
      SCOPED_TRACE("GroupNormalization-" + std::to_string(opset));
      check(b, {{"x", x({2, 6, 4, 5})}, {"s", x({params}, 2)}, {"c", x({params}, 3)}});
    }
    {
      GraphBuilder b(13);
      b.output(b.op("MeanVarianceNormalization", {b.input("x", DType::kF32, {2, 3, 4, 5})}));
      SCOPED_TRACE("MeanVarianceNormalization");
      check(b, {{"x", x({2, 3, 4, 5})}});
    }
  };
  // CUDA has three normalization kernels (hal/cuda/normalize.cu): each runs every case.
  for (const char* kernel : {"dense-rows", "rows", "block"}) {
    if (!on_cuda() && std::string_view(kernel) != "dense-rows") continue;
    SCOPED_TRACE(kernel);
    kernel_test::ScopedEnvironment choice("STRIDER_CUDA_NORMALIZE", kernel);
    family();
  }
}

// Transformer-sized LayerNorms: rows of 700 (CUDA's warp-per-row kernel, 22 elements a
// lane, the last lanes short), 256 (BERT's: one 16-byte chunk a lane, or two in f32),
// 1000 (four chunks a lane in bf16, the last lanes short) and 1100 (past 1024: the block
// kernel), f32 and bf16.
TEST_P(KernelSuite, LayerNormOverHiddenSizes) {
  for (int64_t hidden : {700, 256, 1000, 1100})
    for (DType t : {DType::kF32, DType::kBF16})
      for (const char* kernel : {"dense-rows", "rows", "block"}) {
        if (!on_cuda() && std::string_view(kernel) != "dense-rows") continue;
        SCOPED_TRACE(fmt::format("hidden {} {} {}", hidden, dtype_name(t), kernel));
        kernel_test::ScopedEnvironment choice("STRIDER_CUDA_NORMALIZE", kernel);
        GraphBuilder b(17);
        auto outs = b.ops("LayerNormalization", {b.input("x", t, {2, 3, hidden}), b.input("s", t, {hidden}),
                                                 b.input("c", t, {hidden})}, 3, int_attribute("axis", -1));
        for (ValueId v : outs) b.output(v);
        check(b, {{"x", random_tensor(t, {2, 3, hidden}, 5)}, {"s", random_tensor(t, {hidden}, 6)},
                  {"c", random_tensor(t, {hidden}, 7)}});
      }
}

// Pad in every mode (with pads cropping one side, an axes input, a pad value input) and
// Tile (ops/index_map.h), on f32 and on int8 and bool bytes.
TEST_P(KernelSuite, PadAndTile) {
  for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
    GraphBuilder b(19);
    AttributeMap attrs;
    attrs.set_string("mode", mode);
    b.output(b.op("Pad", {b.input("x", DType::kF32, {2, 3, 4, 5}), b.constant("p", i64_tensor({1, 0, 2, -1, 0, 2, 3, 1})),
                          b.constant("v", Tensor::from_values<float>(DType::kF32, {}, std::vector<float>{0.75f}))},
                  attrs));
    SCOPED_TRACE(mode);
    check(b, {{"x", x({2, 3, 4, 5})}});
  }
  {
    GraphBuilder b(19);
    AttributeMap attrs;
    attrs.set_string("mode", "reflect");
    b.output(b.op("Pad", {b.input("x", DType::kI8, {3, 4, 5}), b.constant("p", i64_tensor({3, 2, 1, 4})), ValueId(kNoValue),
                          b.constant("axes", i64_tensor({-1, 1}))}, attrs));
    SCOPED_TRACE("reflect over axes, int8");
    check(b, {{"x", random_tensor(DType::kI8, {3, 4, 5}, 4)}});
  }
  {
    GraphBuilder b(17);
    b.output(b.op("Pad", {b.input("x", DType::kF32, {3, 4}), b.constant("p", i64_tensor({1, 1, 2, 0})), b.input("v", DType::kF32, {})}));
    SCOPED_TRACE("pad value computed at run time");
    check(b, {{"x", x({3, 4})}, {"v", x({}, 5)}});
  }
  for (DType dtype : {DType::kF32, DType::kBool}) {
    GraphBuilder b(17);
    b.output(b.op("Tile", {b.input("x", dtype, {2, 3, 4}), b.constant("r", i64_tensor({2, 1, 3}))}));
    SCOPED_TRACE(std::string("Tile ") + std::string(dtype_name(dtype)));
    check(b, {{"x", random_tensor(dtype, {2, 3, 4}, 6)}});
  }
}

TEST_P(KernelSuite, ResizeModes) {
  struct Case {
    int opset;
    const char* mode;
    const char* coordinates;
  };
  for (Case c : {Case{13, "nearest", "asymmetric"}, Case{13, "linear", "half_pixel"}, Case{13, "cubic", "align_corners"},
                 Case{11, "nearest", "tf_half_pixel_for_nn"}, Case{19, "linear", "half_pixel_symmetric"}}) {
    GraphBuilder b(c.opset);
    AttributeMap attrs;
    attrs.set_string("mode", c.mode);
    attrs.set_string("coordinate_transformation_mode", c.coordinates);
    Tensor scales = Tensor::from_values<float>(DType::kF32, {4}, std::vector<float>{1, 1, 1.5f, 0.75f});
    ValueId roi = b.constant("roi", Tensor(DType::kF32, {0}));
    b.output(b.op("Resize", {b.input("x", DType::kF32, {1, 2, 4, 8}), roi, b.constant("scales", scales)}, attrs));
    SCOPED_TRACE(std::string(c.mode) + " " + c.coordinates);
    check(b, {{"x", x({1, 2, 4, 8})}});
  }
}

// GridSample in every mode and padding, both alignments, with points inside and outside
// the input (the grid's values are N(0, 1): about a third fall beyond [-1, 1]); and a
// volumetric case at opset 20; and AffineGrid, both alignments.
TEST_P(KernelSuite, GridSample) {
  for (const char* mode : {"linear", "nearest", "cubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (int align = 0; align < 2; ++align) {
        GraphBuilder b(20);
        AttributeMap attrs;
        attrs.set_string("mode", mode);
        attrs.set_string("padding_mode", padding);
        attrs.set_int("align_corners", align);
        b.output(b.op("GridSample", {b.input("x", DType::kF32, {2, 3, 5, 6}), b.input("grid", DType::kF32, {2, 4, 7, 2})}, attrs));
        SCOPED_TRACE(std::string(mode) + " " + padding + " align " + std::to_string(align));
        check(b, {{"x", x({2, 3, 5, 6})}, {"grid", x({2, 4, 7, 2}, 2)}});
      }
  GraphBuilder volumetric(20);
  volumetric.output(volumetric.op("GridSample", {volumetric.input("x", DType::kF32, {1, 2, 3, 4, 5}),
                                                 volumetric.input("grid", DType::kF32, {1, 2, 3, 4, 3})}));
  check(volumetric, {{"x", x({1, 2, 3, 4, 5})}, {"grid", x({1, 2, 3, 4, 3}, 3)}});
  for (int align = 0; align < 2; ++align) {
    GraphBuilder affine(20);
    affine.output(affine.op("AffineGrid", {affine.input("theta", DType::kF32, {2, 2, 3}), affine.constant("size", i64_tensor({2, 3, 4, 7}))},
                            int_attribute("align_corners", align)));
    check(affine, {{"theta", x({2, 2, 3}, 4)}});
  }
}

// RoiAlign in both modes and coordinate modes, adaptive and fixed sampling, on regions
// inside, across and beyond the input's edges, of both images of the batch.
TEST_P(KernelSuite, RoiAlign) {
  const Tensor rois = Tensor::from_values<float>(DType::kF32, {4, 4}, std::vector<float>{
      0.5f, 0.5f, 5.5f, 4.0f,  1.0f, 2.0f, 3.0f, 2.5f,  -2.0f, -1.5f, 4.0f, 9.5f,  6.0f, 3.0f, 11.0f, 8.0f});
  const Tensor batch = Tensor::from_values<int64_t>(DType::kI64, {4}, std::vector<int64_t>{0, 1, 1, 0});
  for (const char* mode : {"avg", "max"})
    for (const char* coordinates : {"half_pixel", "output_half_pixel"})
      for (int64_t ratio : {0, 2}) {
        GraphBuilder b(16);
        AttributeMap attrs;
        attrs.set_string("mode", mode);
        attrs.set_string("coordinate_transformation_mode", coordinates);
        attrs.set_int("sampling_ratio", ratio);
        attrs.set_int("output_height", 3);
        attrs.set_int("output_width", 2);
        attrs.set_float("spatial_scale", 0.75f);
        b.output(b.op("RoiAlign", {b.input("x", DType::kF32, {2, 3, 6, 7}), b.input("rois", DType::kF32, {4, 4}),
                                   b.input("batch", DType::kI64, {4})}, attrs));
        SCOPED_TRACE(std::string(mode) + " " + coordinates + " ratio " + std::to_string(ratio));
        check(b, {{"x", x({2, 3, 6, 7})}, {"rois", rois}, {"batch", batch}});
      }
}

// DeformConv with groups and offset groups, with and without mask and bias, strided,
// dilated and padded; offsets N(0, 1) x 2, so taps land between pixels and outside.
TEST_P(KernelSuite, DeformConv) {
  struct Case {
    int64_t group, offset_group;
    std::vector<int64_t> strides, dilations, pads;
    bool mask, bias;
    int64_t out_h, out_w;
  };
  for (const Case& c : {Case{1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, false, false, 4, 5},
                        Case{2, 2, {2, 1}, {1, 2}, {1, 0, 1, 1}, true, true, 3, 4},
                        Case{1, 4, {1, 1}, {1, 1}, {1, 1, 1, 1}, true, false, 6, 7}}) {
    GraphBuilder b(19);
    AttributeMap attrs;
    attrs.set_int("group", c.group);
    attrs.set_int("offset_group", c.offset_group);
    attrs.set_ints("strides", c.strides);
    attrs.set_ints("dilations", c.dilations);
    attrs.set_ints("pads", c.pads);
    const Shape x{2, 4, 6, 7}, w{6, 4 / c.group, 3, 3}, offset{2, c.offset_group * 18, c.out_h, c.out_w};
    std::vector<ValueId> in{b.input("x", DType::kF32, x), b.input("w", DType::kF32, w), b.input("offset", DType::kF32, offset),
                            kNoValue, kNoValue};
    std::map<std::string, Tensor> feeds{{"x", this->x(x)}, {"w", this->x(w, 2)}, {"offset", this->x(offset, 3)}};
    for (float& v : std::span(feeds["offset"].data<float>(), size_t(feeds["offset"].num_elements()))) v *= 2;
    if (c.bias) in[3] = b.input("b", DType::kF32, {6}), feeds["b"] = this->x({6}, 4);
    if (c.mask) {
      const Shape mask{2, c.offset_group * 9, c.out_h, c.out_w};
      in[4] = b.input("mask", DType::kF32, mask), feeds["mask"] = this->x(mask, 5);
    }
    while (in.back() == kNoValue) in.pop_back();
    b.output(b.op("DeformConv", in, attrs));
    SCOPED_TRACE("group " + std::to_string(c.group) + " offset_group " + std::to_string(c.offset_group));
    check(b, feeds);
  }
}

std::string suite_name(const ::testing::TestParamInfo<std::tuple<const char*, ViewLayout>>& info) {
  return kernel_test::param_name(std::get<0>(info.param), std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(DevicesAndLayouts, KernelSuite,
                         ::testing::Combine(::testing::ValuesIn(kernel_test::kDevices),
                                            ::testing::ValuesIn(kernel_test::kCatalog)),
                         suite_name);

}  // namespace
}  // namespace strider
