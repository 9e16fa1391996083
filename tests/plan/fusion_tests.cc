// Intent tests of the elementwise fusion pass (passes/fuse_elementwise.h) on builder graphs:
// what joins a group, what must not, and that the fused kernels compute what the float64
// reference computes on views of every kind (offsets, broadcast, reversed, transposed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <climits>

#include "strider/compare.h"
#include "ops/conv_chain.h"
#include "ops/fused_elementwise.h"
#include "ops/op_registry.h"
#include "passes/fuse_conv_chain.h"
#include "passes/fuse_elementwise.h"
#include "passes/infer_shapes.h"
#include "passes/lower_precision.h"
#include "plan_test_util.h"
#include "reference/reference.h"

namespace strider {
namespace {
using testing::plan_in_session;
using testing::random_f32;
using testing::verified;

Tensor f32s(Shape shape, std::vector<float> v) { return Tensor::from_values<float>(DType::kF32, std::move(shape), v); }

AttributeMap alpha(float value) {
  AttributeMap a;
  a.set_float("alpha", value);
  return a;
}

SessionOptions fused(DType dtype = DType::kF32) {
  SessionOptions o;
  o.dtype = dtype;
  o.poison_memory = true;
  return o;
}

// The fused nodes of the planned graph, as "expression <- node names".
std::vector<std::string> fused_groups(const testing::PlannedGraph& p) {
  std::vector<std::string> groups;
  for (NodeId id = 0; id < p.graph->num_nodes(); ++id) {
    const Node& n = p.graph->node(id);
    if (n.op_type != kFusedElementwiseOp) continue;
    groups.push_back(*n.attributes.get_string("expression", "") + " <- " + *n.attributes.get_string("nodes", ""));
  }
  return groups;
}

// Runs the planned session on `inputs` (in graph input order) and compares each output with
// the float64 reference.
void expect_matches_reference(const Graph& graph, const testing::PlannedGraph& p,
                              const std::map<std::string, Tensor>& inputs, DType dtype = DType::kF32) {
  ASSERT_NE(p.session, nullptr);
  std::vector<Tensor> given;
  std::map<std::string, Tensor> reference_inputs;
  for (ValueId id : graph.inputs()) {
    const Tensor& t = inputs.at(graph.value(id).name);
    given.push_back(t);
    Tensor seen = t;  // a bf16 session rounds its inputs; the reference sees the rounded values
    if (dtype == DType::kBF16) seen = *convert_float_tensor(*convert_float_tensor(t, DType::kBF16), DType::kF32);
    reference_inputs[graph.value(id).name] = seen;
  }
  auto outputs = p.session->run(given);
  ASSERT_TRUE(outputs.is_ok()) << outputs.status().to_string();
  auto expected = evaluate_reference(graph, reference_inputs);
  ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
  testing::expect_outputs_near(*outputs, expected->outputs, default_tolerance(dtype));
}

TEST(Fusion, SiluBecomesOneKernelThatRunsInPlace) {
  GraphBuilder b;
  ValueId x = b.op("Neg", {b.input("x", DType::kF32, {2, 8, 6, 6})}, {}, "neg");
  ValueId s = b.op("Sigmoid", {x}, {}, "sig");
  b.output(b.op("Mul", {x, s}, {}, "silu"));
  Graph g = b.build();
  auto p = plan_in_session(g, verified(), fused());
  // Neg's output is read twice, both times inside the group: it joins too.
  EXPECT_EQ(fused_groups(p), (std::vector<std::string>{"Mul(Neg(x0), Sigmoid(Neg(x0))) <- neg,sig,silu"}));
  expect_matches_reference(g, p, {{"x", random_f32({2, 8, 6, 6}, 1)}});
}

TEST(Fusion, AValueReadOutsideTheGroupOrAGraphOutputIsKept) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4, 16});
  ValueId a = b.op("Exp", {x}, {}, "exp");               // also read by ReduceSum: kept
  ValueId t = b.op("Tanh", {a}, {}, "tanh");             // a graph output: kept
  ValueId u = b.op("Sigmoid", {t}, {}, "sig");
  b.output(b.op("Add", {u, a}, {}, "add"));
  b.output(t);
  b.output(b.op("ReduceSum", {a, b.constant("axes", i64_tensor({1}))}, {}, "sum"));
  Graph g = b.build();
  auto p = plan_in_session(g, verified(), fused());
  EXPECT_EQ(fused_groups(p), (std::vector<std::string>{"Add(Sigmoid(x0), x1) <- sig,add"}));
  expect_matches_reference(g, p, {{"x", random_f32({4, 16}, 2)}});
}

TEST(Fusion, ABroadcastIntermediateStaysOutside) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {3, 5, 7});
  ValueId gate = b.op("Sigmoid", {b.input("g", DType::kF32, {5, 1})}, {}, "gate");  // [5,1]: another shape
  ValueId y = b.op("Mul", {x, gate}, {}, "mul");
  b.output(b.op("Relu", {y}, {}, "relu"));
  Graph g = b.build();
  auto p = plan_in_session(g, verified(), fused());
  EXPECT_EQ(fused_groups(p), (std::vector<std::string>{"Relu(Mul(x0, x1)) <- mul,relu"}));
  expect_matches_reference(g, p, {{"x", random_f32({3, 5, 7}, 3)}, {"g", random_f32({5, 1}, 4)}});
}

TEST(Fusion, ClipJoinsOnlyWithConstantBounds) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {6, 10});
  ValueId lo = b.constant("lo", f32s({}, {-0.5f}));
  ValueId hi = b.input("hi", DType::kF32, {});
  ValueId c = b.op("Clip", {b.op("Neg", {x}, {}, "neg"), lo, b.constant("six", f32s({}, {0.75f}))}, {}, "clip");
  ValueId d = b.op("Clip", {b.op("Abs", {c}, {}, "abs"), lo, hi}, {}, "clip_runtime");  // bound known at run time
  b.output(d);
  Graph g = b.build();
  auto p = plan_in_session(g, verified(), fused());
  EXPECT_EQ(fused_groups(p), (std::vector<std::string>{"Abs(Clip(Neg(x0), -0.5, 0.75)) <- neg,clip,abs"}));
  expect_matches_reference(g, p, {{"x", random_f32({6, 10}, 5)}, {"hi", f32s({}, {0.4f})}});
}

TEST(Fusion, GroupsStopAtEightOperands) {
  GraphBuilder b;
  std::map<std::string, Tensor> inputs;
  ValueId sum = kNoValue;
  for (int i = 0; i < 11; ++i) {
    std::string name = "x" + std::to_string(i);
    ValueId x = b.op("Tanh", {b.input(name, DType::kF32, {2, 33})}, {}, "tanh" + std::to_string(i));
    inputs[name] = random_f32({2, 33}, 10 + uint32_t(i));
    sum = sum == kNoValue ? x : b.op("Add", {sum, x}, {}, "add" + std::to_string(i));
  }
  b.output(sum);
  Graph g = b.build();
  auto p = plan_in_session(g, verified(), fused());
  int nodes = 0;
  for (NodeId id = 0; id < p.graph->num_nodes(); ++id) {
    const Node& n = p.graph->node(id);
    if (n.op_type == kFusedElementwiseOp) {
      EXPECT_LE(n.inputs.size(), size_t(kMaxFusedInputs));
    }
    ++nodes;
  }
  EXPECT_GE(fused_groups(p).size(), 2u);
  EXPECT_LT(nodes, 21);  // 21 nodes unfused
  expect_matches_reference(g, p, inputs);
}

// Operands that are views with offsets, reversed and transposed strides, and a broadcast
// constant; the output is written into a concat slice. Fused and unfused agree in f32 to
// the bit for each instruction that rounds to f32 as the unfused kernels store it, and here
// within 4 ulp of the gate: the CPU runs tanh(a) * sigmoid(b) as one gated row (vector_math.h).
TEST(Fusion, ViewOperandsAndAConcatSliceOutput) {
  // The second shape spans many tiles of the CPU's fused kernel (rows of 6 channels, 3034
  // of them, channels-last) with a part-filled last one.
  for (const Shape& shape : {Shape{2, 12, 5, 7}, Shape{2, 12, 37, 41}}) {
  auto build = [&] {
    GraphBuilder b;
    ValueId x = b.op("Relu", {b.input("x", DType::kF32, shape)}, {}, "relu");
    auto halves = b.ops("Split", {x, b.constant("sizes", i64_tensor({6, 6}))}, 2, testing::int_attribute("axis", 1), "split");
    AttributeMap reverse;
    ValueId flipped = b.op("Slice", {halves[1], b.constant("st", i64_tensor({-1})), b.constant("en", i64_tensor({-100})),
                                     b.constant("ax", i64_tensor({3})), b.constant("sp", i64_tensor({-1}))}, reverse, "flip");
    ValueId bias = b.constant("bias", random_f32({1, 6, 1, 1}, 7));
    ValueId gated = b.op("Mul", {b.op("Tanh", {halves[0]}, {}, "tanh"), b.op("Sigmoid", {flipped}, {}, "sig")}, {}, "gate");
    ValueId y = b.op("Add", {gated, bias}, {}, "add");
    b.output(b.op("Concat", {y, halves[0]}, testing::int_attribute("axis", 1), "cat"));
    return b.build();
  };
  std::map<std::string, Tensor> inputs{{"x", random_f32(shape, 8)}};
  for (const char* layout : {"nchw", "nhwc"}) {
    PlanOptions options = verified();
    options.layout = *parse_layout(layout);
    Graph g = build();
    auto p = plan_in_session(g, options, fused());
    EXPECT_EQ(fused_groups(p), (std::vector<std::string>{"Add(Mul(Tanh(x0), Sigmoid(x1)), x2) <- tanh,sig,gate,add"}))
        << layout;
    expect_matches_reference(g, p, inputs);
    auto unfused_plan = plan_in_session(g, options, testing::unfused());
    ASSERT_NE(unfused_plan.session, nullptr);
    auto a = p.session->run({inputs.at("x")});
    auto b = unfused_plan.session->run({inputs.at("x")});
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    for (int64_t k = 0; k < (*a)[0].num_elements(); ++k) {
      const float fused = (*a)[0].data<float>()[k], unfused = (*b)[0].data<float>()[k];
      // The gate is at most 1 in magnitude; the bias added after it may cancel it.
      const float magnitude = std::max(std::fabs(unfused), 1.0f);
      const float ulp = std::nextafter(magnitude, INFINITY) - magnitude;
      ASSERT_LE(std::fabs(fused - unfused), 4 * ulp) << layout << " element " << k << ": " << fused << " vs " << unfused;
    }
  }
  }
}

TEST(Fusion, Bf16KeepsIntermediatesInF32) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4, 64});
  ValueId h = b.input("h", DType::kF32, {4, 64});
  ValueId y = b.op("Add", {h, b.op("Mul", {b.op("Tanh", {x}, {}, "t"), b.op("Sigmoid", {h}, {}, "s")}, {}, "m")}, {}, "a");
  b.output(b.op("LeakyRelu", {y}, alpha(0.2f), "lrelu"));
  Graph g = b.build();
  auto p = plan_in_session(g, verified(), fused(DType::kBF16));
  EXPECT_EQ(fused_groups(p).size(), 1u);
  expect_matches_reference(g, p, {{"x", random_f32({4, 64}, 9)}, {"h", random_f32({4, 64}, 10)}}, DType::kBF16);
}

// A bf16 session converts its f32 inputs and outputs with Cast nodes (on the device), not
// on the host: the graph's inputs and outputs keep f32. An output that other nodes read
// (y) is read by them in bf16; an input handed straight back (x) needs no cast.
TEST(Fusion, Bf16SessionsCastInputsAndOutputsInTheGraph) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4, 8});
  ValueId y = b.op("Mul", {x, b.constant("w", random_f32({8}, 12))}, {}, "scale");
  b.output(y);
  b.output(b.op("Tanh", {y}, {}, "tanh"));
  b.output(x);
  Graph g = b.build();
  Graph lowered = g;
  ASSERT_TRUE(infer_and_fold(lowered).is_ok());
  ASSERT_TRUE(lower_to_bf16(lowered).is_ok());
  for (const auto* list : {&lowered.inputs(), &lowered.outputs()})
    for (ValueId v : *list) EXPECT_EQ(lowered.value(v).dtype, DType::kF32) << lowered.value(v).name;
  std::vector<std::string> casts;
  for (NodeId id = 0; id < lowered.num_nodes(); ++id) {
    const Node& node = lowered.node(id);
    if (node.op_type == "Cast")
      casts.push_back(lowered.value(node.inputs[0]).name + "->" + lowered.value(node.outputs[0]).name + ":" +
                      std::string(dtype_name(lowered.value(node.outputs[0]).dtype)));
    if (node.op_type == "Tanh") {
      EXPECT_EQ(lowered.value(node.inputs[0]).dtype, DType::kBF16);
    }
  }
  const std::string y_name = lowered.value(lowered.outputs()[0]).name, z_name = lowered.value(lowered.outputs()[1]).name;
  EXPECT_EQ(casts, (std::vector<std::string>{"x->x/bf16:bf16", y_name + "/bf16->" + y_name + ":f32",
                                             z_name + "/bf16->" + z_name + ":f32"}));
  EXPECT_EQ(lowered.node(0).op_type, "Cast");
  auto p = plan_in_session(g, verified(), fused(DType::kBF16));
  expect_matches_reference(g, p, {{"x", random_f32({4, 8}, 13)}}, DType::kBF16);
}

// Every op a fused program may hold, in two programs (as tests/cuda/cuda_fused_tests.cc).
TEST(Fusion, EveryFusedOpMatchesTheReference) {
  const Shape shape = {3, 4, 5, 6};
  auto positive = random_f32(shape, 21);
  for (int64_t i = 0; i < positive.num_elements(); ++i)
    positive.data<float>()[i] = 0.5f + std::abs(positive.data<float>()[i]);
  GraphBuilder arithmetic;
  {
    GraphBuilder& b = arithmetic;
    ValueId x = b.input("x", DType::kF32, shape), y = b.input("y", DType::kF32, shape);
    ValueId p = b.op("Add", {b.op("Abs", {x}), y});
    ValueId m = b.op("Div", {b.op("Mul", {b.op("Sub", {b.op("Log", {p}), b.op("Sqrt", {p})}), b.op("Reciprocal", {p})}), p});
    ValueId lo = b.op("Min", {m, b.op("Exp", {b.op("Neg", {x})})});
    ValueId hi = b.op("Max", {lo, b.op("Tanh", {x})});
    b.output(b.op("Add", {b.op("Sigmoid", {hi}), b.op("Erf", {x})}));
  }
  GraphBuilder activations;
  {
    GraphBuilder& b = activations;
    ValueId x = b.input("x", DType::kF32, shape), y = b.input("y", DType::kF32, shape);
    AttributeMap hard = alpha(0.3f);
    hard.set_float("beta", 0.4f);
    std::vector<ValueId> parts = {
        b.op("Floor", {x}), b.op("Ceil", {y}), b.op("Softplus", {x}), b.op("HardSwish", {y}),
        b.op("LeakyRelu", {x}, alpha(0.1f)), b.op("HardSigmoid", {y}, hard), b.op("Elu", {x}, alpha(0.7f)),
        b.op("Clip", {y, b.constant("lo", f32s({}, {-0.5f})), b.constant("hi", f32s({}, {0.75f}))}), b.op("Relu", {x})};
    ValueId sum = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) sum = b.op("Add", {sum, parts[i]});
    b.output(sum);
  }
  std::map<std::string, Tensor> inputs{{"x", random_f32(shape, 20)}, {"y", positive}};
  for (GraphBuilder* builder : {&arithmetic, &activations}) {
    Graph g = builder->build();
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      auto p = plan_in_session(g, verified(), fused(dtype));
      EXPECT_EQ(fused_groups(p).size(), 1u);
      // bf16: a Cast from each input and to the output around the one fused node
      EXPECT_EQ(p.graph->num_nodes(), dtype == DType::kBF16 ? int(g.inputs().size()) + 2 : 1);
      expect_matches_reference(g, p, inputs, dtype);
    }
  }
}

// The op types of the planned graph, in order.
std::vector<std::string> op_types(const testing::PlannedGraph& p) {
  std::vector<std::string> ops;
  for (NodeId id = 0; id < p.graph->num_nodes(); ++id) ops.push_back(p.graph->node(id).op_type);
  return ops;
}

// `ops` as a bf16 session plans them: a Cast from each f32 input first, one to each f32
// output last (passes/lower_precision.h: the conversions run on the device).
std::vector<std::string> in_dtype(DType dtype, std::vector<std::string> ops, int inputs = 1, int outputs = 1) {
  if (dtype != DType::kBF16) return ops;
  ops.insert(ops.begin(), size_t(inputs), "Cast");
  ops.insert(ops.end(), size_t(outputs), "Cast");
  return ops;
}

AttributeMap conv_attributes(int64_t pad) {
  AttributeMap a;
  a.set_ints("pads", {pad, pad, pad, pad});
  return a;
}

// Conv -> SiLU becomes one FusedConv (oneDNN applies the activation as a post-op); on
// 3x3 and on a 1x1 writing a concat's channel slice (a matmul, then our program in place);
// Relu, Clip, and Clip with low > high (which oneDNN's clip would get wrong: ours runs).
TEST(Fusion, ConvAndItsActivationBecomeOneNode) {
  const Shape shape = {2, 8, 9, 7};
  auto build = [&](const std::string& activation) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::kF32, shape);
    ValueId y = b.op("Conv", {x, b.constant("w", random_f32({6, 8, 3, 3}, 31)), b.constant("b", random_f32({6}, 32))},
                     conv_attributes(1), "conv");
    if (activation == "silu") y = b.op("Mul", {y, b.op("Sigmoid", {y}, {}, "sig")}, {}, "mul");
    if (activation == "relu") y = b.op("Relu", {y}, {}, "relu");
    if (activation == "clip") y = b.op("Clip", {y, b.constant("lo", f32s({}, {-0.5f})), b.constant("hi", f32s({}, {0.5f}))}, {}, "clip");
    if (activation == "inverted clip")  // low > high: every element becomes high
      y = b.op("Clip", {y, b.constant("lo", f32s({}, {1.0f})), b.constant("hi", f32s({}, {-1.0f}))}, {}, "clip");
    ValueId p = b.op("Conv", {x, b.constant("w1", random_f32({4, 8, 1, 1}, 33)), b.constant("b1", random_f32({4}, 34))},
                     {}, "pointwise");
    ValueId q = b.op("Relu", {p}, {}, "prelu");
    b.output(b.op("Concat", {y, q}, testing::int_attribute("axis", 1), "cat"));
    return b.build();
  };
  std::map<std::string, Tensor> inputs{{"x", random_f32(shape, 30)}};
  int post_ops = 0, afterwards = 0;  // activations oneDNN applied, and ones our program ran
  for (const char* activation : {"silu", "relu", "clip", "inverted clip"})
    for (const char* layout : {"nchw", "nhwc"})
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        SCOPED_TRACE(std::string(activation) + " " + layout + " " + std::string(dtype_name(dtype)));
        PlanOptions options = verified();
        options.layout = *parse_layout(layout);
        Graph g = build(activation);
        auto p = plan_in_session(g, options, fused(dtype));
        EXPECT_EQ(op_types(p), in_dtype(dtype, {"FusedConv", "FusedConv", "Concat"}));
        expect_matches_reference(g, p, inputs, dtype);
        for (const std::string& kernel : inspect_session(*p.session).kernel_names) {
          post_ops += kernel.rfind("onednn", 0) == 0 && kernel.find("+") != std::string::npos;
          afterwards += kernel.find(" then strider:fused") != std::string::npos;
        }
      }
  EXPECT_GT(post_ops, 0);
  EXPECT_GT(afterwards, 0);
}

// A device whose conv kernels cannot write a Concat's slices (CUDA: cuDNN refuses
// channels-last slices, Device::fuses_conv_into_concat) keeps the activation that writes
// the slice as its own node; a conv whose activation's output goes elsewhere still fuses.
TEST(Fusion, AConvFeedingAConcatStaysUnfusedWhereTheDeviceAsks) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {1, 4, 6, 6});
  auto conv_relu = [&](const char* name, uint32_t seed) {
    ValueId y = b.op("Conv", {x, b.constant(std::string(name) + "_w", random_f32({4, 4, 3, 3}, seed))}, conv_attributes(1), name);
    return b.op("Relu", {y}, {}, std::string(name) + "_relu");
  };
  b.output(b.op("Concat", {conv_relu("into_concat", 51), x}, testing::int_attribute("axis", 1), "cat"));
  b.output(conv_relu("elsewhere", 52));
  const Graph g = b.build();
  for (bool into_concat : {true, false}) {
    Graph fused = g;
    ASSERT_TRUE(infer_and_fold(fused).is_ok());
    Result<int> n = fuse_conv_activations(fused, into_concat);
    ASSERT_TRUE(n.is_ok());
    EXPECT_EQ(*n, into_concat ? 2 : 1);
    for (NodeId id = 0; id < fused.num_nodes(); ++id)
      if (fused.node(id).name == "into_concat") {
        EXPECT_EQ(fused.node(id).op_type, into_concat ? "FusedConv" : "Conv");
      }
  }
}

TEST(Fusion, AConvOutputReadTwiceKeepsItsOwnNode) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {1, 4, 6, 6});
  ValueId y = b.op("Conv", {x, b.constant("w", random_f32({4, 4, 3, 3}, 41))}, conv_attributes(1), "conv");
  b.output(b.op("Mul", {y, b.op("Sigmoid", {y}, {}, "sig")}, {}, "silu"));
  b.output(b.op("Add", {y, x}, {}, "skip"));  // the raw conv output is needed here too
  Graph g = b.build();
  auto p = plan_in_session(g, verified(), fused());
  EXPECT_EQ(op_types(p), (std::vector<std::string>{"Conv", "FusedElementwise", "Add"}));
  expect_matches_reference(g, p, {{"x", random_f32({1, 4, 6, 6}, 42)}});
}

// A MobileNet block's expansion (1x1 + ReLU6) and depthwise conv (+ ReLU6) become one
// FusedPointwiseDepthwise node where the CPU says it pays: an expanded intermediate of 4 MB
// or more (112x112x96 f32 here, 4.8 MB; Device::fuses_pointwise_depthwise), which its
// kernel computes in bands instead of storing; the result is the reference's. At 20x20 the
// pair stays two FusedConv nodes.
TEST(Fusion, AnExpansionAndItsDepthwiseConvBecomeOneNodeWhereTheyAreLarge) {
  auto build = [](int64_t side) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::kF32, {1, 8, side, side});
    auto relu6 = [&](ValueId v, const char* name) {
      return b.op("Clip", {v, b.constant(std::string(name) + "_lo", f32s({}, {0.0f})), b.constant(std::string(name) + "_hi", f32s({}, {6.0f}))},
                  {}, name);
    };
    ValueId e = b.op("Conv", {x, b.constant("w1", random_f32({96, 8, 1, 1}, 61)), b.constant("b1", random_f32({96}, 62))},
                     {}, "expand");
    AttributeMap dw = conv_attributes(1);
    dw.set_ints("strides", {2, 2});
    dw.set_int("group", 96);
    ValueId y = b.op("Conv", {relu6(e, "expand_relu6"), b.constant("w2", random_f32({96, 1, 3, 3}, 63)),
                              b.constant("b2", random_f32({96}, 64))}, dw, "depthwise");
    b.output(relu6(y, "depthwise_relu6"));
    return b.build();
  };
  const Graph large = build(112);
  auto p = plan_in_session(large, verified(), fused());
  EXPECT_EQ(op_types(p), (std::vector<std::string>{"FusedPointwiseDepthwise"}));
  expect_matches_reference(large, p, {{"x", random_f32({1, 8, 112, 112}, 65)}});
  const Graph small = build(20);
  auto q = plan_in_session(small, verified(), fused());
  EXPECT_EQ(op_types(q), (std::vector<std::string>{"FusedConv", "FusedConv"}));
}

// The pass folds only a pointwise conv (1x1, stride 1, no pads, one group) whose output the
// depthwise conv (one group per channel, undilated) alone reads, and only where the device
// says it pays; the chain's shape inference gives the depthwise conv's output.
TEST(Fusion, OnlyAPointwiseConvReadByADepthwiseOneAloneBecomesAChain) {
  enum class Variant { kChain, kReadTwice, kPointwiseStride2, kDilatedDepthwise, kGroupedNotDepthwise, kNotPaying };
  auto count = [](Variant v) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::kF32, {1, 4, 9, 8});
    AttributeMap pw;
    if (v == Variant::kPointwiseStride2) pw.set_ints("strides", {2, 2});
    ValueId e = b.op("Conv", {x, b.constant("w1", random_f32({12, 4, 1, 1}, 71))}, pw, "expand");
    AttributeMap dw = conv_attributes(1);
    dw.set_int("group", v == Variant::kGroupedNotDepthwise ? 6 : 12);
    if (v == Variant::kDilatedDepthwise) dw.set_ints("dilations", {2, 2});
    if (v == Variant::kDilatedDepthwise) dw.set_ints("pads", {2, 2, 2, 2});
    const Shape w2 = {12, v == Variant::kGroupedNotDepthwise ? 2 : 1, 3, 3};
    b.output(b.op("Conv", {e, b.constant("w2", random_f32(w2, 72)), b.constant("b2", random_f32({12}, 73))}, dw, "dw"));
    if (v == Variant::kReadTwice) b.output(b.op("Relu", {e}, {}, "also"));
    Graph g = b.build();
    EXPECT_TRUE(infer_and_fold(g).is_ok());
    const Shape out = g.value(g.outputs()[0]).shape;
    Result<int> n = fuse_pointwise_depthwise(g, [&](int64_t bytes) {
      EXPECT_EQ(bytes, (v == Variant::kPointwiseStride2 ? 12 * 5 * 4 : 12 * 9 * 8) * 4);
      return v != Variant::kNotPaying;
    });
    EXPECT_TRUE(n.is_ok());
    if (n.is_ok() && *n == 1) {  // the chain infers the pair's output again
      EXPECT_EQ(g.node(0).op_type, kFusedPointwiseDepthwiseOp);
      InferContext context(g, 0);
      Status inferred = find_op_schema(kStriderDomain, kFusedPointwiseDepthwiseOp)->infer(context);
      EXPECT_TRUE(inferred.is_ok()) << inferred.to_string();
      EXPECT_EQ(g.value(g.outputs()[0]).shape, out);
    }
    return n.is_ok() ? *n : -1;
  };
  EXPECT_EQ(count(Variant::kChain), 1);
  EXPECT_EQ(count(Variant::kReadTwice), 0);
  EXPECT_EQ(count(Variant::kPointwiseStride2), 0);
  EXPECT_EQ(count(Variant::kDilatedDepthwise), 0);
  EXPECT_EQ(count(Variant::kGroupedNotDepthwise), 0);
  EXPECT_EQ(count(Variant::kNotPaying), 0);
}

// A transformer MLP: MatMul -> bias -> erf GELU -> MatMul -> bias -> residual. Each MatMul
// takes its epilogue (f32 and bf16), and oneDNN applies them as post-ops; the result is
// the reference's. A MatMul whose product is also a graph output, or read twice, stays.
TEST(Fusion, AMatMulTakesItsEpilogue) {
  auto build = [](bool expose_product) {
    GraphBuilder b;
    ValueId x = b.input("x", DType::kF32, {1, 6, 8});
    ValueId h = b.op("MatMul", {x, b.constant("w1", random_f32({8, 16}, 51))}, {}, "fc1");
    if (expose_product) b.output(h);
    ValueId t = b.op("Add", {h, b.constant("b1", random_f32({16}, 52))}, {}, "bias1");
    ValueId e = b.op("Erf", {b.op("Div", {t, b.constant("sqrt2", f32s({}, {std::sqrt(2.0f)}))}, {}, "div")}, {}, "erf");
    ValueId g = b.op("Mul", {b.op("Mul", {t, b.op("Add", {e, b.constant("one", f32s({}, {1.0f}))}, {}, "add1")}, {}, "mul1"),
                            b.constant("half", f32s({}, {0.5f}))}, {}, "mul2");
    ValueId o = b.op("MatMul", {g, b.constant("w2", random_f32({16, 8}, 53))}, {}, "fc2");
    ValueId r = b.op("Add", {b.op("Add", {o, b.constant("b2", random_f32({8}, 54))}, {}, "bias2"), x}, {}, "residual");
    b.output(r);
    return b.build();
  };
  std::map<std::string, Tensor> inputs{{"x", random_f32({1, 6, 8}, 50)}};
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Graph g = build(false);
    auto p = plan_in_session(g, verified(), fused(dtype));
    EXPECT_EQ(op_types(p), in_dtype(dtype, {"FusedMatMul", "FusedMatMul"}));
    expect_matches_reference(g, p, inputs, dtype);
    int post_ops = 0;
    for (const std::string& kernel : inspect_session(*p.session).kernel_names)
      post_ops += kernel.rfind("onednn", 0) == 0 && kernel.find("+") != std::string::npos;
    EXPECT_EQ(post_ops, 2);
  }
  Graph exposed = build(true);
  auto p = plan_in_session(exposed, verified(), fused());
  EXPECT_EQ(op_types(p), (std::vector<std::string>{"MatMul", "FusedElementwise", "FusedMatMul"}));
  expect_matches_reference(exposed, p, inputs);
}

// The RMSNorm exporters write op by op (passes/fuse_normalization.h), built on x [2, 5, 16]
// (a Neg's output, so x is a value of the plan): `square` Pow(x, 2) or Mul(x, x); `divide`
// as Div(1, s) then Mul, Reciprocal then Mul, or Div(x, s); `weight` of the given shape
// multiplied after it (empty: none); `axes` of the ReduceMean.
struct RmsNormPattern {
  std::string square = "Pow", divide = "Div1";
  Shape weight = {16};
  std::vector<int64_t> axes = {-1};
  float exponent = 2.0f;
  bool mean_is_output = false;
};

Graph rms_norm_graph(const RmsNormPattern& pattern) {
  GraphBuilder b;
  ValueId x = b.op("Neg", {b.input("x", DType::kF32, {2, 5, 16})}, {}, "neg");
  ValueId sq = pattern.square == "Pow" ? b.op("Pow", {x, b.constant("two", f32s({}, {pattern.exponent}))}, {}, "pow")
                                       : b.op("Mul", {x, x}, {}, "square");
  ValueId mean = b.op("ReduceMean", {sq}, ints_attribute("axes", pattern.axes), "mean");
  if (pattern.mean_is_output) b.output(mean);
  ValueId root = b.op("Sqrt", {b.op("Add", {mean, b.constant("eps", f32s({}, {1e-6f}))}, {}, "add")}, {}, "sqrt");
  ValueId y;
  if (pattern.divide == "Div") {
    y = b.op("Div", {x, root}, {}, "div");
  } else {
    ValueId inverse = pattern.divide == "Div1" ? b.op("Div", {b.constant("one", f32s({}, {1.0f})), root}, {}, "div")
                                               : b.op("Reciprocal", {root}, {}, "reciprocal");
    y = b.op("Mul", {x, inverse}, {}, "mul");
  }
  if (!pattern.weight.empty()) y = b.op("Mul", {b.constant("w", random_f32(pattern.weight, 61)), y}, {}, "scale");
  b.output(y);
  return b.build();
}

TEST(Fusion, TheExportedRmsNormBecomesOneNode) {
  std::map<std::string, Tensor> inputs{{"x", random_f32({2, 5, 16}, 60)}};
  for (RmsNormPattern pattern : {RmsNormPattern{}, RmsNormPattern{"Mul", "Div", {}}, RmsNormPattern{"Pow", "Reciprocal", {1, 16}},
                                 RmsNormPattern{"Pow", "Div1", {5, 16}, {1, 2}}}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(pattern.square + " " + pattern.divide + " " + std::string(dtype_name(dtype)));
      Graph g = rms_norm_graph(pattern);
      auto p = plan_in_session(g, verified(), fused(dtype));
      EXPECT_EQ(op_types(p), in_dtype(dtype, {"Neg", "RMSNormalization"}));
      expect_matches_reference(g, p, inputs, dtype);
    }
  }
}

TEST(Fusion, AnRmsNormLikePatternThatDiffersIsLeftAlone) {
  std::map<std::string, Tensor> inputs{{"x", random_f32({2, 5, 16}, 62)}};
  // A weight over the outer dims too: the norm is fused, the weight stays a Mul of its own.
  Graph outer = rms_norm_graph(RmsNormPattern{"Pow", "Div1", {5, 16}});
  auto p = plan_in_session(outer, verified(), fused());
  EXPECT_EQ(op_types(p), (std::vector<std::string>{"Neg", "RMSNormalization", "Mul"}));
  expect_matches_reference(outer, p, inputs);
  RmsNormPattern cube, middle_axis, exposed_mean;
  cube.exponent = 3.0f;
  middle_axis.axes = {1};
  exposed_mean.mean_is_output = true;
  for (const RmsNormPattern& pattern : {cube, middle_axis, exposed_mean}) {
    Graph g = rms_norm_graph(pattern);
    auto q = plan_in_session(g, verified(), fused());
    std::vector<std::string> ops = op_types(q);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "RMSNormalization"), 0);
    expect_matches_reference(g, q, inputs);
  }
}

// Llama's rotary embedding, x * cos + rotate_half(x) * sin with rotate_half as torch exports
// it (Slices of the last axis, Neg, Concat): split into halves (passes/split_rotary.h), each
// one map, no Neg left, and the output bit for bit what the session gives unfused, with
// cos and sin per position (Llama's tables) and broadcast over a width of 1.
TEST(Fusion, RotaryEmbeddingRunsByHalvesBitForBit) {
  for (int64_t table_width : {8, 1}) {
    SCOPED_TRACE(table_width);
    GraphBuilder b;
    ValueId x = b.input("x", DType::kF32, {2, 3, 5, 8});
    ValueId cos = b.input("cos", DType::kF32, {5, table_width}), sin = b.input("sin", DType::kF32, {5, table_width});
    auto slice = [&](int64_t start, int64_t end, const std::string& name) {
      return b.op("Slice", {x, b.constant(name + "_s", i64_tensor({start})), b.constant(name + "_e", i64_tensor({end})),
                            b.constant(name + "_a", i64_tensor({-1}))});
    };
    ValueId rotated = b.op("Concat", {b.op("Neg", {slice(4, INT64_MAX, "high")}), slice(0, 4, "low")}, int_attribute("axis", -1));
    b.output(b.op("Add", {b.op("Mul", {x, cos}), b.op("Mul", {rotated, sin})}));
    Graph g = b.build();
    const std::map<std::string, Tensor> inputs = {{"x", random_f32({2, 3, 5, 8}, 51)},
                                                  {"cos", random_f32({5, table_width}, 52)},
                                                  {"sin", random_f32({5, table_width}, 53)}};
    SessionOptions off = fused();
    off.fusion = false;
    auto split = plan_in_session(g, verified(), fused());
    auto whole = plan_in_session(g, verified(), off);
    ASSERT_NE(split.session, nullptr);
    ASSERT_NE(whole.session, nullptr);
    std::vector<std::string> ops = op_types(split);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Neg"), 0);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "FusedElementwise"), 2);
    std::vector<Tensor> given = {inputs.at("x"), inputs.at("cos"), inputs.at("sin")};
    auto a = split.session->run(given), c = whole.session->run(given);
    ASSERT_TRUE(a.is_ok() && c.is_ok());
    ASSERT_EQ((*a)[0].num_elements(), (*c)[0].num_elements());
    EXPECT_EQ(std::memcmp((*a)[0].data<float>(), (*c)[0].data<float>(), size_t((*a)[0].num_elements()) * 4), 0);
    expect_matches_reference(g, split, inputs);
  }
}

TEST(Fusion, OffLeavesTheGraphAsBuilt) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {8});
  b.output(b.op("Mul", {x, b.op("Sigmoid", {x}, {}, "s")}, {}, "m"));
  SessionOptions off = fused();
  off.fusion = false;
  auto p = plan_in_session(b.build(), verified(), off);
  EXPECT_TRUE(fused_groups(p).empty());
}

TEST(Fusion, AMalformedProgramIsRefusedWithItsNode) {
  Node n;
  n.name = "f";
  n.inputs = {0};
  FusedProgram program{1, {{FusedOp::kMul, 0, 3, 0, 0}}};  // register 3 is never defined
  write_fused_program(program, &n);
  auto read = read_fused_program(n);
  ASSERT_FALSE(read.is_ok());
  EXPECT_NE(read.status().message().find("node 'f'"), std::string::npos) << read.status().message();
}

}  // namespace
}  // namespace strider
