// strider's own CUDA elementwise kernels (src/hal/cuda/elementwise*) against the float64
// reference, on dense, channels-last padded and offset, reversed and channel-slice views
// of inputs and outputs, in f32 and bf16 (and the integer and bool dtypes each op takes);
// every Cast pair; the cases the reference cannot judge (integer division by zero) by hand.
// Without a GPU every test is skipped.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

#include "cuda_test_util.h"
#include "base/onnx_types.h"
#include "hal/cuda/attention.h"
#include "hal/cuda/cuda_kernels.h"
#include "ops/op_registry.h"

namespace strider::cuda_test {
namespace {

class CudaElementwise : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { STRIDER_REQUIRE_GPU(); }
  DType dtype() const { return GetParam(); }
  Tensor x(const Shape& shape, uint32_t seed = 1) const { return random_tensor(dtype(), shape, seed); }
};

// Small integers stored as `dtype`, so that comparisons see equal elements.
Tensor small_integers(DType dtype, const Shape& shape, uint32_t seed) {
  Tensor noise = random_magnitudes(DType::kF64, shape, seed, 0, 2.49, dtype == DType::kU8);
  std::vector<double> v;
  for (int64_t i = 0; i < noise.num_elements(); ++i) v.push_back(std::round(noise.data<double>()[i]));
  return tensor_of(dtype, shape, v);
}

TEST_P(CudaElementwise, FloatUnaryOps) {
  struct Case {
    const char* op;
    AttributeMap attributes;
  };
  AttributeMap leaky, hard, elu;
  leaky.set_float("alpha", 0.1f);
  hard.set_float("alpha", 0.3f);
  hard.set_float("beta", 0.4f);
  elu.set_float("alpha", 0.7f);
  std::vector<Case> cases = {{"Sigmoid", {}}, {"Tanh", {}},  {"Exp", {}},       {"Erf", {}},        {"Floor", {}},
                             {"Ceil", {}},    {"Sin", {}},   {"Cos", {}},       {"Softplus", {}},   {"HardSwish", {}},
                             {"LeakyRelu", leaky}, {"HardSigmoid", hard}, {"Elu", elu}, {"Selu", {}}, {"Relu", {}},
                             {"Neg", {}},     {"Abs", {}}};
  const Shape shape = {2, 5, 3, 7};  // 210 elements: the vector path has a tail
  for (const Case& c : cases) {
    GraphBuilder b;
    b.output(b.op(c.op, {b.input("a", dtype(), shape)}, c.attributes));
    check_node_all_layouts(b.build(), {{"a", x(shape)}});
  }
  // Log, Sqrt and Reciprocal away from their poles.
  for (const char* op : {"Log", "Sqrt", "Reciprocal"}) {
    GraphBuilder b;
    b.output(b.op(op, {b.input("a", dtype(), shape)}));
    bool positive = std::string(op) != "Reciprocal";
    check_node_all_layouts(b.build(), {{"a", random_magnitudes(dtype(), shape, 3, 0.5, 4, positive)}});
  }
}

TEST_P(CudaElementwise, BinaryArithmeticWithBroadcast) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    GraphBuilder b;
    b.output(b.op(op, {b.input("a", dtype(), {2, 3, 4, 5}), b.input("c", dtype(), {3, 1, 5})}));
    check_node_all_layouts(b.build(), {{"a", x({2, 3, 4, 5})}, {"c", random_magnitudes(dtype(), {3, 1, 5}, 2, 0.5, 3, false)}});
    GraphBuilder s;  // a scalar operand, first
    s.output(s.op(op, {s.input("s", dtype(), {}), s.input("a", dtype(), {4, 6, 2})}));
    check_node_all_layouts(s.build(), {{"s", random_magnitudes(dtype(), {}, 4, 0.5, 3, false)}, {"a", random_magnitudes(dtype(), {4, 6, 2}, 5, 0.5, 3, false)}});
  }
  GraphBuilder v;  // rank 1, long: vector path, tail, and a misaligned offset
  v.output(v.op("Add", {v.input("a", dtype(), {1003}), v.input("c", dtype(), {1003})}));
  check_node_all_layouts(v.build(), {{"a", x({1003})}, {"c", x({1003}, 2)}});
}

TEST_P(CudaElementwise, ComparisonsGiveBool) {
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    GraphBuilder b(16);
    b.output(b.op(op, {b.input("a", dtype(), {2, 3, 4, 5}), b.input("c", dtype(), {3, 1, 5})}));
    check_node_all_layouts(b.build(), {{"a", small_integers(dtype(), {2, 3, 4, 5}, 1)}, {"c", small_integers(dtype(), {3, 1, 5}, 2)}});
  }
}

TEST_P(CudaElementwise, WhereClipPow) {
  GraphBuilder w;
  w.output(w.op("Where", {w.input("c", DType::kBool, {3, 1, 5}), w.input("a", dtype(), {2, 3, 4, 5}), w.input("b", dtype(), {5})}));
  check_node_all_layouts(w.build(), {{"c", random_tensor(DType::kBool, {3, 1, 5}, 6)}, {"a", x({2, 3, 4, 5})}, {"b", x({5}, 2)}});

  GraphBuilder c;  // bounds as run-time inputs, read on the device
  c.output(c.op("Clip", {c.input("a", dtype(), {2, 5, 3, 4}), c.input("lo", dtype(), {}), c.input("hi", dtype(), {})}));
  Tensor lo = random_magnitudes(dtype(), {}, 7, 0.1, 0.3, true), hi = random_magnitudes(dtype(), {}, 8, 0.5, 0.9, true);
  check_node_all_layouts(c.build(), {{"a", x({2, 5, 3, 4})}, {"lo", random_magnitudes(dtype(), {}, 9, 0.2, 0.5, false)}, {"hi", hi}});
  GraphBuilder inverted;  // min > max: every element becomes max
  inverted.output(inverted.op("Clip", {inverted.input("a", dtype(), {3, 4}), inverted.constant("lo", hi), inverted.constant("hi", lo)}));
  check_node_all_layouts(inverted.build(), {{"a", x({3, 4})}});
  GraphBuilder only_max;  // min omitted
  only_max.output(only_max.op("Clip", {only_max.input("a", dtype(), {3, 4}), kNoValue, only_max.constant("hi", hi)}));
  check_node_all_layouts(only_max.build(), {{"a", x({3, 4})}});

  GraphBuilder p;  // positive bases: fractional exponents stay real
  p.output(p.op("Pow", {p.input("a", dtype(), {2, 3, 4}), p.input("e", dtype(), {4})}));
  check_node_all_layouts(p.build(), {{"a", random_magnitudes(dtype(), {2, 3, 4}, 1, 0.2, 3, true)}, {"e", x({4}, 2)}});
  GraphBuilder q;  // an integer exponent
  q.output(q.op("Pow", {q.input("a", dtype(), {2, 3, 4}), q.input("e", DType::kI64, {3, 1})}));
  check_node_all_layouts(q.build(), {{"a", x({2, 3, 4})}, {"e", random_magnitudes(DType::kI64, {3, 1}, 3, 0, 3, true)}});
}

// "x0", "x1", ... (built with += : GCC 12 warns falsely about "x" + std::to_string(i)).
std::string input_name(size_t i) {
  std::string name = "x";
  name += std::to_string(i);
  return name;
}

// Sum(a, b, c) and friends against an equivalent chain of binary ops (the reference has
// no variadic ops): Add for Sum, Add then Div for Mean, Where(Less) for Min and Max.
Graph reference_chain(const std::string& op, DType dtype, const std::vector<Shape>& shapes) {
  GraphBuilder b;
  std::vector<ValueId> in;
  for (size_t i = 0; i < shapes.size(); ++i) in.push_back(b.input(input_name(i), dtype, shapes[i]));
  ValueId acc = in[0];
  for (size_t i = 1; i < in.size(); ++i) {
    if (op == "Sum" || op == "Mean") {
      acc = b.op("Add", {acc, in[i]});
    } else {
      ValueId keep = b.op(op == "Min" ? "Less" : "Greater", {acc, in[i]});
      acc = b.op("Where", {keep, acc, in[i]});
    }
  }
  if (op == "Mean") {
    acc = b.op("Div", {acc, b.constant("n", tensor_of(dtype, {}, {double(in.size())}))});
  }
  b.output(acc);
  return b.build();
}

TEST_P(CudaElementwise, VariadicSumMeanMinMax) {
  for (const std::vector<Shape>& shapes : {std::vector<Shape>{{2, 3, 4}, {3, 1}, {4}}, std::vector<Shape>(11, Shape{3, 5})}) {
    for (const char* op : {"Sum", "Mean", "Min", "Max"}) {
      GraphBuilder b;
      std::vector<ValueId> in;
      std::map<std::string, Tensor> values;
      for (size_t i = 0; i < shapes.size(); ++i) {
        std::string name = input_name(i);
        in.push_back(b.input(name, dtype(), shapes[i]));
        values[name] = x(shapes[i], uint32_t(10 + i));
      }
      b.output(b.op(op, in));
      Graph reference = reference_chain(op, dtype(), shapes);
      SCOPED_TRACE(std::string(op) + " of " + std::to_string(shapes.size()));
      check_node_all_layouts(b.build(), values, &reference);
    }
  }
}

TEST_P(CudaElementwise, BatchNormalization) {
  Tensor var = random_magnitudes(dtype(), {3}, 9, 0.5, 2, true);
  for (bool constants : {false, true}) {
    GraphBuilder n;
    std::vector<ValueId> in{n.input("x", dtype(), {2, 3, 4, 5})};
    std::map<std::string, Tensor> values{{"x", x({2, 3, 4, 5})}};
    uint32_t seed = 2;
    for (const char* name : {"scale", "bias", "mean", "var"}) {
      Tensor t = std::string(name) == "var" ? var : x({3}, seed++);
      if (constants) {
        in.push_back(n.constant(name, t));
      } else {
        in.push_back(n.input(name, dtype(), {3}));
        values[name] = t;
      }
    }
    AttributeMap eps;
    eps.set_float("epsilon", 1e-3f);
    n.output(n.op("BatchNormalization", in, eps));
    check_node_all_layouts(n.build(), values);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaElementwise, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

class CudaIntegerElementwise : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { STRIDER_REQUIRE_GPU(); }
};

TEST_P(CudaIntegerElementwise, ArithmeticComparisonsClipPow) {
  const DType t = GetParam();
  for (const char* op : {"Relu", "Neg", "Abs"}) {
    GraphBuilder b;
    b.output(b.op(op, {b.input("a", t, {2, 3, 4, 5})}));
    check_node_all_layouts(b.build(), {{"a", random_tensor(t, {2, 3, 4, 5}, 1)}});
  }
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Equal", "Less", "GreaterOrEqual"}) {
    GraphBuilder b(16);
    b.output(b.op(op, {b.input("a", t, {2, 3, 4, 5}), b.input("c", t, {3, 1, 5})}));
    check_node_all_layouts(b.build(), {{"a", random_tensor(t, {2, 3, 4, 5}, 1)}, {"c", random_magnitudes(t, {3, 1, 5}, 2, 1, 4, false)}});
  }
  GraphBuilder c;
  c.output(c.op("Clip", {c.input("a", t, {3, 4, 5}), c.constant("lo", random_magnitudes(t, {}, 1, 1, 2, true)),
                         c.constant("hi", random_magnitudes(t, {}, 2, 3, 4, true))}));
  check_node_all_layouts(c.build(), {{"a", random_tensor(t, {3, 4, 5}, 3)}});
  if (t == DType::kI32 || t == DType::kI64) {
    GraphBuilder p;
    p.output(p.op("Pow", {p.input("a", t, {3, 4}), p.input("e", DType::kI32, {4})}));
    check_node_all_layouts(p.build(), {{"a", random_tensor(t, {3, 4}, 4)}, {"e", random_magnitudes(DType::kI32, {4}, 5, 0, 3, true)}});
  }
  GraphBuilder w;
  w.output(w.op("Where", {w.input("c", DType::kBool, {4, 1}), w.input("a", t, {4, 6}), w.input("b", t, {6})}));
  check_node_all_layouts(w.build(), {{"c", random_tensor(DType::kBool, {4, 1}, 6)}, {"a", random_tensor(t, {4, 6}, 7)}, {"b", random_tensor(t, {6}, 8)}});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaIntegerElementwise, ::testing::Values(DType::kI64, DType::kI32, DType::kI8, DType::kU8),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

// cuDNN convolutions with a bias, which joins the convolution where cuDNN allows it, on
// dense views and on NCHW channel slices (a concat's part); 3x3, strided, grouped, 1x1.
TEST_P(CudaElementwise, ConvolutionWithBiasOnDenseAndNchwSlices) {
  struct Case {
    Shape x, w;
    AttributeMap attributes;
  };
  AttributeMap pad1 = ints_attribute("pads", {1, 1, 1, 1}), strided = pad1, grouped = pad1;
  strided.set_ints("strides", {2, 2});
  grouped.set_int("group", 2);
  for (const Case& c : {Case{{2, 8, 9, 7}, {6, 8, 3, 3}, pad1}, Case{{1, 8, 10, 10}, {12, 8, 3, 3}, strided},
                        Case{{2, 8, 6, 5}, {6, 4, 3, 3}, grouped}, Case{{2, 8, 6, 5}, {10, 8, 1, 1}, {}}}) {
    GraphBuilder b;
    ValueId w = b.constant("w", random_tensor(dtype(), c.w, 2));
    ValueId bias = b.constant("b", random_tensor(dtype(), {c.w[0]}, 3));
    b.output(b.op("Conv", {b.input("x", dtype(), c.x), w, bias}, c.attributes));
    Graph g = b.build();
    for (ViewLayout layout : {ViewLayout::kDense, ViewLayout::kNchwSlice}) check_node(g, {{"x", x(c.x)}}, layout);
  }
}

TEST(CudaElementwiseBool, LogicOps) {
  STRIDER_REQUIRE_GPU();
  for (const char* op : {"And", "Or", "Xor", "Equal"}) {
    GraphBuilder b;
    b.output(b.op(op, {b.input("a", DType::kBool, {2, 3, 4, 5}), b.input("c", DType::kBool, {3, 1, 5})}));
    check_node_all_layouts(b.build(), {{"a", random_tensor(DType::kBool, {2, 3, 4, 5}, 1)}, {"c", random_tensor(DType::kBool, {3, 1, 5}, 2)}});
  }
  GraphBuilder n;
  n.output(n.op("Not", {n.input("a", DType::kBool, {2, 3, 4, 5})}));
  check_node_all_layouts(n.build(), {{"a", random_tensor(DType::kBool, {2, 3, 4, 5}, 3)}});
}

// Integer division by zero is 0 and MIN / -1 wraps, as on the CPU (the reference rejects
// division by zero, so this is checked by hand).
TEST(CudaElementwiseBool, IntegerDivisionByZeroAndOverflow) {
  STRIDER_REQUIRE_GPU();
  GraphBuilder b;
  b.output(b.op("Div", {b.input("a", DType::kI32, {5}), b.input("c", DType::kI32, {5})}));
  Graph g = b.build();
  InferContext context(g, 0);
  ASSERT_TRUE(find_op_schema("", "Div")->infer(context).is_ok());
  const int32_t min = std::numeric_limits<int32_t>::min();
  std::vector<int32_t> a = {7, -7, 5, min, -9}, c = {0, 0, -1, -1, 2};
  auto out = run_dense(g, {{"a", Tensor::from_values<int32_t>(DType::kI32, {5}, a)},
                           {"c", Tensor::from_values<int32_t>(DType::kI32, {5}, c)}});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  std::vector<int32_t> expected = {0, 0, -5, min, -4};
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ((*out)[0].data<int32_t>()[i], expected[size_t(i)]) << i;
}

// Every pair of dtypes, on values every target holds (so the reference's wrapping and the
// kernels' saturation agree): float to integer truncates, to bool is x != 0, to bf16/f16
// rounds to nearest even.
TEST(CudaCast, EveryDtypePair) {
  STRIDER_REQUIRE_GPU();
  for (DType from : kAllDTypes) {
    Tensor values = from == DType::kBool ? random_tensor(DType::kBool, {3, 4, 5}, 1)
                                         : random_magnitudes(from, {3, 4, 5}, 2, 0, 100, true);
    for (DType to : kAllDTypes) {
      GraphBuilder b;
      b.output(b.op("Cast", {b.input("a", from, {3, 4, 5})}, int_attribute("to", onnx_type_code(to))));
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      Graph g = b.build();
      // Types no CUDA kernel takes are declined before planning (the host runs those Casts).
      if (cuda::no_kernel_takes(from) || cuda::no_kernel_takes(to)) {
        InferContext context(g, 0);
        ASSERT_TRUE(find_op_schema("", "Cast")->infer(context).is_ok());
        EXPECT_FALSE(cuda::declines(g, g.node(0)).empty());
        continue;
      }
      check_node(g, {{"a", values}}, ViewLayout::kDense);
      check_node(g, {{"a", values}}, ViewLayout::kChannelSlice);
    }
  }
  GraphBuilder like;
  like.output(like.op("CastLike", {like.input("a", DType::kF32, {3, 4, 5}), like.input("t", DType::kBF16, {1})}));
  check_node_all_layouts(like.build(), {{"a", random_tensor(DType::kF32, {3, 4, 5}, 3)}, {"t", random_tensor(DType::kBF16, {1}, 4)}});
}

// The harness itself: a wrong result is reported (Relu judged as if it were Neg).
// The f32 attention kernel's rows a thread (a host-side choice, no GPU needed): the most
// rows whose blocks still cover the SMs. Llama b1 (8 heads of 128 queries) gets 1, 40
// heads get 2 (80 blocks of 64 rows, 160 of 32), BERT b32 (128 heads) keeps 4.
TEST(CudaAttentionChoice, FmaRowsPerThreadFillTheMultiprocessors) {
  unsetenv("STRIDER_CUDA_FMA_ROWS");
  EXPECT_EQ(cuda::fma_rows_per_thread(8, 128, 132), 1);
  EXPECT_EQ(cuda::fma_rows_per_thread(40, 128, 132), 2);
  EXPECT_EQ(cuda::fma_rows_per_thread(128, 128, 132), 4);
  EXPECT_EQ(cuda::fma_rows_per_thread(66, 128, 132), 4);  // 132 blocks of 64 rows: exactly the SMs
  EXPECT_EQ(cuda::fma_rows_per_thread(1, 65, 132), 1);
  setenv("STRIDER_CUDA_FMA_ROWS", "2", 1);
  EXPECT_EQ(cuda::fma_rows_per_thread(8, 128, 132), 2);
  unsetenv("STRIDER_CUDA_FMA_ROWS");
}

TEST(CudaHarness, ReportsWrongResults) {
  STRIDER_REQUIRE_GPU();
  GraphBuilder relu, neg;
  relu.output(relu.op("Relu", {relu.input("a", DType::kF32, {3, 4})}));
  neg.output(neg.op("Neg", {neg.input("a", DType::kF32, {3, 4})}));
  Graph g = relu.build(), wrong = neg.build();
  Tensor a = random_tensor(DType::kF32, {3, 4}, 1);
  EXPECT_NONFATAL_FAILURE(check_node(g, {{"a", a}}, ViewLayout::kChannelSlice, &wrong), "output 0");
}

// What the CUDA device does not take is refused at creation, naming the op and dtype.
TEST(CudaElementwiseBool, UnsupportedDtypesAreRefused) {
  STRIDER_REQUIRE_GPU();
  GraphBuilder b;
  b.output(b.op("Sigmoid", {b.input("a", DType::kI32, {4})}));
  Graph g = b.build();
  InferContext context(g, 0);
  ASSERT_TRUE(find_op_schema("", "Sigmoid")->infer(context).is_ok());
  auto out = run_dense(g, {{"a", random_tensor(DType::kI32, {4}, 1)}});
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(out.status().message().find("Sigmoid on i32"), std::string::npos) << out.status().to_string();
}

}  // namespace
}  // namespace strider::cuda_test
