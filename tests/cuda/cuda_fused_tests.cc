// FusedElementwise on the GPU: groups made by the fusion pass from builder graphs run as
// one CUDA kernel on every view layout, checked against the float64 reference of the
// unfused graph; together the programs hold every op a fused program may hold.
#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "hal/cuda/epilogue.h"
#include "hal/cuda/launch.h"
#include "ops/fused_elementwise.h"
#include "passes/fuse_elementwise.h"
#include "passes/infer_shapes.h"

#include <cstdlib>

namespace strider::cuda_test {
namespace {

class CudaFused : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { STRIDER_REQUIRE_GPU(); }
  DType dtype() const { return GetParam(); }

  // `unfused` inferred, folded and fused, which must leave one FusedElementwise node.
  static void fuse_to_one(const Graph& unfused, Graph* fused) {
    *fused = unfused;
    ASSERT_TRUE(infer_and_fold(*fused).is_ok());
    auto stats = fuse_elementwise(*fused);
    ASSERT_TRUE(stats.is_ok()) << stats.status().to_string();
    ASSERT_EQ(fused->num_nodes(), 1);
    ASSERT_EQ(fused->node(0).op_type, kFusedElementwiseOp);
  }

  // A compiled form matched by its text: `unfused` fuses to exactly `expression`, and the
  // node matches the reference on every layout.
  void check_form(const Graph& unfused, const char* expression, const std::map<std::string, Tensor>& inputs) {
    Graph fused;
    ASSERT_NO_FATAL_FAILURE(fuse_to_one(unfused, &fused));
    EXPECT_EQ(*fused.node(0).attributes.get_string("expression", ""), expression);
    check_fused(unfused, inputs);
  }

  // Fuses `unfused` (which must become one FusedElementwise node) and checks that node on
  // every layout against the reference of the unfused graph.
  void check_fused(const Graph& unfused, const std::map<std::string, Tensor>& inputs) {
    Graph fused;
    ASSERT_NO_FATAL_FAILURE(fuse_to_one(unfused, &fused));
    SCOPED_TRACE(*fused.node(0).attributes.get_string("expression", ""));
    check_node_all_layouts(fused, inputs, &unfused);
  }
};

AttributeMap floats(std::vector<std::pair<const char*, float>> values) {
  AttributeMap a;
  for (auto [name, v] : values) a.set_float(name, v);
  return a;
}

// GPT-2's tanh GELU of `s` as torch 1.13 exports F.gelu(approximate="tanh"), its
// constants in `dtype`.
ValueId tanh_gelu(GraphBuilder& b, ValueId s, DType dtype) {
  auto scalar = [&](const char* name, double v) { return b.constant(name, tensor_of(dtype, {}, {v})); };
  ValueId cube = b.op("Mul", {s, b.op("Mul", {s, s})});
  ValueId inner = b.op("Add", {s, b.op("Mul", {scalar("c", 0.044715), cube})});
  ValueId t = b.op("Tanh", {b.op("Mul", {scalar("k", 0.7978845608028654), inner})});
  return b.op("Mul", {scalar("half", 0.5), b.op("Mul", {s, b.op("Add", {scalar("one", 1.0), t})})});
}

TEST_P(CudaFused, SiluWithResidual) {
  const Shape shape = {2, 12, 5, 7};
  GraphBuilder b;
  ValueId x = b.input("x", dtype(), shape), h = b.input("h", dtype(), shape);
  b.output(b.op("Add", {h, b.op("Mul", {x, b.op("Sigmoid", {x})})}));
  check_fused(b.build(), {{"x", random_tensor(dtype(), shape, 1)}, {"h", random_tensor(dtype(), shape, 2)}});
}

// The compiled forms (elementwise.cu): SiLU, residual SiLU with either operand order,
// gated units with and without a residual; and one the matcher must leave interpreted.
TEST_P(CudaFused, CompiledFormsAndTheirNearMisses) {
  const Shape shape = {2, 6, 5, 8};
  std::map<std::string, Tensor> in{{"x", random_tensor(dtype(), shape, 11)},
                                   {"g", random_tensor(dtype(), shape, 12)},
                                   {"h", random_tensor(dtype(), shape, 13)}};
  auto gated = [&](bool residual, bool swap) {
    GraphBuilder b;
    ValueId x = b.input("x", dtype(), shape), g = b.input("g", dtype(), shape);
    ValueId t = b.op("Tanh", {swap ? g : x}), s = b.op("Sigmoid", {swap ? x : g});
    ValueId y = b.op("Mul", {s, t});
    if (residual) y = b.op("Add", {b.input("h", dtype(), shape), y});
    b.output(y);
    return b.build();
  };
  for (bool swap : {false, true}) {
    GraphBuilder silu;
    ValueId x = silu.input("x", dtype(), shape);
    silu.output(silu.op("Mul", {silu.op("Sigmoid", {x}), x}));
    check_fused(silu.build(), {{"x", in.at("x")}});
    GraphBuilder residual;
    ValueId h = residual.input("h", dtype(), shape), rx = residual.input("x", dtype(), shape);
    ValueId y = residual.op("Mul", {rx, residual.op("Sigmoid", {rx})});
    residual.output(swap ? residual.op("Add", {y, h}) : residual.op("Add", {h, y}));
    check_fused(residual.build(), {{"x", in.at("x")}, {"h", in.at("h")}});
    check_fused(gated(false, swap), {{"x", in.at("x")}, {"g", in.at("g")}});
    check_fused(gated(true, swap), in);
  }
  GraphBuilder near;  // x * sigmoid(h): not SiLU
  ValueId nx = near.input("x", dtype(), shape);
  near.output(near.op("Mul", {nx, near.op("Sigmoid", {near.input("h", dtype(), shape)})}));
  check_fused(near.build(), {{"x", in.at("x")}, {"h", in.at("h")}});
}

TEST_P(CudaFused, GatedUnitWithABroadcastBias) {
  const Shape shape = {2, 8, 3, 9};
  GraphBuilder b;
  ValueId a = b.input("a", dtype(), shape), g = b.input("g", dtype(), shape);
  ValueId bias = b.input("bias", dtype(), {8, 1, 1});
  b.output(b.op("Add", {b.op("Mul", {b.op("Tanh", {a}), b.op("Sigmoid", {g})}), bias}));
  check_fused(b.build(), {{"a", random_tensor(dtype(), shape, 3)},
                          {"g", random_tensor(dtype(), shape, 4)},
                          {"bias", random_tensor(dtype(), {8, 1, 1}, 5)}});
}

// Abs Add Log Sqrt Reciprocal Neg Exp Sub Mul Div Min Max Tanh Sigmoid Erf.
TEST_P(CudaFused, ArithmeticAndTranscendentals) {
  const Shape shape = {3, 4, 5, 6};
  GraphBuilder b;
  ValueId x = b.input("x", dtype(), shape), y = b.input("y", dtype(), shape);
  ValueId p = b.op("Add", {b.op("Abs", {x}), y});  // y > 0: p > 0
  ValueId m = b.op("Div", {b.op("Mul", {b.op("Sub", {b.op("Log", {p}), b.op("Sqrt", {p})}), b.op("Reciprocal", {p})}), p});
  ValueId lo = b.op("Min", {m, b.op("Exp", {b.op("Neg", {x})})});
  ValueId hi = b.op("Max", {lo, b.op("Tanh", {x})});
  b.output(b.op("Add", {b.op("Sigmoid", {hi}), b.op("Erf", {x})}));
  check_fused(b.build(), {{"x", random_tensor(dtype(), shape, 6)},
                          {"y", random_magnitudes(dtype(), shape, 7, 0.5, 3, true)}});
}

// Floor Ceil Softplus HardSwish LeakyRelu HardSigmoid Elu Clip Relu, with attributes.
TEST_P(CudaFused, ActivationsWithAttributes) {
  const Shape shape = {2, 6, 7, 4};
  GraphBuilder b(22);  // Softplus, HardSwish, HardSigmoid and Elu take bf16 from opset 22
  ValueId x = b.input("x", dtype(), shape), y = b.input("y", dtype(), shape);
  ValueId lo = b.constant("lo", tensor_of(dtype(), {}, {-0.5}));
  ValueId hi = b.constant("hi", tensor_of(dtype(), {}, {0.75}));
  std::vector<ValueId> parts = {
      b.op("Floor", {x}), b.op("Ceil", {y}), b.op("Softplus", {x}), b.op("HardSwish", {y}),
      b.op("LeakyRelu", {x}, floats({{"alpha", 0.1f}})), b.op("HardSigmoid", {y}, floats({{"alpha", 0.3f}, {"beta", 0.4f}})),
      b.op("Elu", {x}, floats({{"alpha", 0.7f}})), b.op("Clip", {y, lo, hi}), b.op("Relu", {x})};
  ValueId sum = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) sum = b.op("Add", {sum, parts[i]});
  b.output(sum);
  check_fused(b.build(), {{"x", random_tensor(dtype(), shape, 8)}, {"y", random_tensor(dtype(), shape, 9)}});
}

// BERT's GELU after its bias (the compiled FusedBiasGeluErf), with the constants in other
// operand orders and other values, and a near miss it must leave interpreted (c / s).
TEST_P(CudaFused, BiasGeluErfAndANearMiss) {
  const Shape shape = {4, 6, 24};
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    GraphBuilder b;
    ValueId x = b.input("x", dtype(), shape), bias = b.input("bias", dtype(), {24});
    ValueId c = b.constant("c", tensor_of(dtype(), {}, {variant == 1 ? 1.25 : 1.4142135623730951}));
    ValueId one = b.constant("one", tensor_of(dtype(), {}, {1.0}));
    ValueId half = b.constant("half", tensor_of(dtype(), {}, {0.5}));
    ValueId s = variant == 1 ? b.op("Add", {bias, x}) : b.op("Add", {x, bias});
    ValueId q = variant == 2 ? b.op("Div", {c, s}) : b.op("Div", {s, c});
    ValueId e = b.op("Add", {variant == 1 ? one : b.op("Erf", {q}), variant == 1 ? b.op("Erf", {q}) : one});
    b.output(variant == 1 ? b.op("Mul", {half, b.op("Mul", {e, s})}) : b.op("Mul", {b.op("Mul", {s, e}), half}));
    check_fused(b.build(), {{"x", random_tensor(dtype(), shape, 21)}, {"bias", random_tensor(dtype(), {24}, 22)}});
  }
}

// GPT-2's tanh GELU after its bias, built as torch exports it: the fused program's
// expression is the compiled form's (so that form runs), and it matches the reference.
TEST_P(CudaFused, BiasGeluTanh) {
  const Shape shape = {4, 6, 24};
  GraphBuilder b;
  ValueId x = b.input("x", dtype(), shape), bias = b.input("bias", dtype(), {24});
  b.output(tanh_gelu(b, b.op("Add", {x, bias}), dtype()));
  check_form(b.build(), cuda::kBiasGeluTanhExpression,
             {{"x", random_tensor(dtype(), shape, 23)}, {"bias", random_tensor(dtype(), {24}, 24)}});
}

// The same GELU as a FusedMatMul's program (the product is register 0, so the bias and the
// product swap places against the form's text), the bias added on either side: some order
// of the operands is the compiled form's text, a near miss (Sub for the bias) has none, and
// the FusedMatMul matches the reference.
TEST_P(CudaFused, BiasGeluTanhAfterAMatMul) {
  for (bool bias_first : {true, false})
    for (bool near_miss : {false, true}) {
      SCOPED_TRACE(std::string(bias_first ? "bias first" : "bias second") + (near_miss ? ", near miss" : ""));
      GraphBuilder b;
      ValueId y = b.op("MatMul", {b.input("a", dtype(), {2, 6, 8}), b.input("w", dtype(), {8, 24})});
      ValueId bias = b.input("bias", dtype(), {24});
      ValueId s = b.op(near_miss ? "Sub" : "Add", bias_first ? std::vector<ValueId>{bias, y} : std::vector<ValueId>{y, bias});
      b.output(tanh_gelu(b, s, dtype()));
      Graph g = b.build();
      Graph fused = g;
      ASSERT_TRUE(infer_and_fold(fused).is_ok());
      ASSERT_TRUE(fuse_elementwise(fused).is_ok());
      ASSERT_EQ(*fuse_matmul_epilogues(fused), 1);
      ASSERT_EQ(fused.num_nodes(), 1);
      const Node& node = fused.node(0);
      Result<FusedProgram> program = read_fused_program_of(node, int(node.inputs.size()) - 1);
      ASSERT_TRUE(program.is_ok());
      std::optional<std::vector<int>> order = cuda::compiled_form_order(*program);
      ASSERT_EQ(order.has_value(), !near_miss) << describe_fused_program(*program);
      if (order) {
        EXPECT_EQ(describe_fused_program(cuda::with_operand_order(*program, *order)), cuda::kBiasGeluTanhExpression);
      }
      // Dense only: cuBLASLt refuses the other layouts' outputs, which the planner packs.
      check_node(fused, {{"a", random_tensor(dtype(), {2, 6, 8}, 41)}, {"w", random_tensor(dtype(), {8, 24}, 42)},
                         {"bias", random_tensor(dtype(), {24}, 43)}},
                 ViewLayout::kDense, &g);
    }
}

// The compiled forms in row mode (elementwise.cu's map_rows: two collapsed dims, 16-byte
// chunks of columns, row-invariant operands read once per thread): BERT's bias + erf GELU
// (a bias row and three scalars), a residual SiLU whose residual is one value per row, a
// row width of no whole chunk (bf16: the vector mode instead), and a map big enough that
// threads walk several rows (dense only). The mode is asserted on dense views, the values
// against the reference on every layout.
TEST_P(CudaFused, CompiledFormsRunByRows) {
  struct Case {
    Shape x, other;
    bool gelu;
    bool every_layout;
  };
  const int64_t chunk = 16 / dtype_size(dtype());
  for (const Case& c : {Case{{3, 10, 64}, {64}, true, true}, Case{{3, 10, 64}, {3, 10, 1}, false, true},
                        Case{{3, 10, 12}, {12}, true, true}, Case{{4400, 1024}, {1024}, true, false}}) {
    SCOPED_TRACE(std::to_string(c.x.front()) + " x .. x " + std::to_string(c.x.back()));
    GraphBuilder b;
    ValueId x = b.input("x", dtype(), c.x), other = b.input("other", dtype(), c.other);
    if (c.gelu) {
      ValueId s = b.op("Add", {x, other});
      ValueId e = b.op("Erf", {b.op("Div", {s, b.constant("c", tensor_of(dtype(), {}, {1.4142135623730951}))})});
      ValueId g = b.op("Mul", {s, b.op("Add", {e, b.constant("one", tensor_of(dtype(), {}, {1.0}))})});
      b.output(b.op("Mul", {g, b.constant("half", tensor_of(dtype(), {}, {0.5}))}));
    } else {
      b.output(b.op("Add", {other, b.op("Mul", {x, b.op("Sigmoid", {x})})}));
    }
    const Graph unfused = b.build();
    const std::map<std::string, Tensor> inputs{{"x", random_tensor(dtype(), c.x, 51)},
                                               {"other", random_tensor(dtype(), c.other, 52)}};
    Graph fused;
    ASSERT_NO_FATAL_FAILURE(fuse_to_one(unfused, &fused));
    auto prepared = prepare_node(fused, inputs, ViewLayout::kDense, nullptr);
    ASSERT_TRUE(prepared.is_ok()) << prepared.status().to_string();
    const std::string mode = c.x.back() % chunk == 0 ? " rows" : " vector";
    EXPECT_TRUE(prepared->kernel->implementation().ends_with(mode)) << prepared->kernel->implementation();
    if (c.every_layout) check_node_all_layouts(fused, inputs, &unfused);
    else check_node(fused, inputs, ViewLayout::kDense, &unfused);
  }
}

// Llama's rotary embedding after the fusion pass: x * cos + rotate_half(x) * sin (the MulAdd
// form), and the first half of it as passes/split_rotary.h writes it, x1 * cos1 - x2 * sin1
// (MulSub); the tables broadcast over batch and heads, the operands strided views on some
// layouts: each compiled form, matched by its text, against the reference.
TEST_P(CudaFused, RotaryMulAddAndMulSub) {
  const Shape shape = {2, 4, 6, 16}, table = {6, 16};
  uint32_t seed = 33;
  for (auto [op, expression] : {std::pair{"Add", cuda::kMulAddExpression}, std::pair{"Sub", cuda::kMulSubExpression}}) {
    SCOPED_TRACE(op);
    GraphBuilder b;
    ValueId x = b.input("x", dtype(), shape), rotated = b.input("rotated", dtype(), shape);
    ValueId cos = b.input("cos", dtype(), table), sin = b.input("sin", dtype(), table);
    b.output(b.op(op, {b.op("Mul", {x, cos}), b.op("Mul", {rotated, sin})}));
    check_form(b.build(), expression,
               {{"x", random_tensor(dtype(), shape, seed++)}, {"rotated", random_tensor(dtype(), shape, seed++)},
                {"cos", random_tensor(dtype(), table, seed++)}, {"sin", random_tensor(dtype(), table, seed++)}});
  }
}

// Llama's SiLU(gate) * up, the up projection broadcast along a dim: the expression of the
// compiled form, and the reference.
TEST_P(CudaFused, SiluGate) {
  GraphBuilder b;
  ValueId gate = b.input("gate", dtype(), {3, 5, 16}), up = b.input("up", dtype(), {3, 1, 16});
  b.output(b.op("Mul", {b.op("Mul", {gate, b.op("Sigmoid", {gate})}), up}));
  check_form(b.build(), cuda::kSiluGateExpression,
             {{"gate", random_tensor(dtype(), {3, 5, 16}, 31)}, {"up", random_tensor(dtype(), {3, 1, 16}, 32)}});
}

// BERT's embedding sum, tokens + positions + segments, the tables broadcast over the batch
// (in the second case the positions first, so x0 broadcasts): the AddThree form, and the
// reference. (Add(Add(positions, segments), tokens) is two nodes: the fusion pass absorbs
// only producers of the sink's shape, and the tables' sum is smaller.)
TEST_P(CudaFused, EmbeddingSumAddThree) {
  const Shape tokens = {3, 6, 16}, positions = {6, 16}, segments = {1, 6, 16};
  for (bool positions_first : {false, true}) {
    SCOPED_TRACE(positions_first ? "positions first" : "tokens first");
    GraphBuilder b;
    ValueId t = b.input("tokens", dtype(), tokens), p = b.input("positions", dtype(), positions);
    ValueId s = b.input("segments", dtype(), segments);
    b.output(b.op("Add", {positions_first ? b.op("Add", {p, t}) : b.op("Add", {t, p}), s}));
    const Graph unfused = b.build();
    const std::map<std::string, Tensor> inputs{{"tokens", random_tensor(dtype(), tokens, 61)},
                                               {"positions", random_tensor(dtype(), positions, 62)},
                                               {"segments", random_tensor(dtype(), segments, 63)}};
    check_form(unfused, cuda::kAddThreeExpression, inputs);
    // Only the compiled forms have the row mode: the form is what ran.
    Graph fused;
    ASSERT_NO_FATAL_FAILURE(fuse_to_one(unfused, &fused));
    auto prepared = prepare_node(fused, inputs, ViewLayout::kDense, nullptr);
    ASSERT_TRUE(prepared.is_ok()) << prepared.status().to_string();
    EXPECT_TRUE(prepared->kernel->implementation().ends_with(" rows")) << prepared->kernel->implementation();
  }
}

// A convolution with its bias and activation as one cuDNN operation graph
// (hal/cuda/cudnn_graph_conv.cc), forced over the timed choice, on the packed channels-last
// bf16 views a channels-last plan gives it: the kernel that ran must be a graph engine
// (each checked at creation to write nothing outside its view), its values the float64
// reference's of the unfused graph, nothing outside the output view touched. YOLOv8's 3x3
// + SiLU, a strided 3x3 + Relu; and MobileNetV2's 1x1 + ReLU6 (bounds in bf16), for which
// cuDNN 9's heuristic offers no engine (RELU_FWD with an upper clip: seen on the H200 in
// session 18), so only its values are checked, on whatever kernel took it.
TEST(CudaCudnnGraphConv, ActivationsRunInsideTheConvolution) {
  STRIDER_REQUIRE_GPU();
  setenv("STRIDER_CUDA_KERNEL_CHOICE", "cudnn-graph", 1);
  setenv("STRIDER_CUDNN_GRAPH", "verbose", 1);  // on by default; verbose also says why an engine was refused
  struct Case {
    Shape x, w;
    int64_t stride, pad;
    const char* activation;
  };
  for (const Case& c : {Case{{2, 16, 12, 10}, {24, 16, 1, 1}, 1, 0, "ReLU6"}, Case{{2, 16, 9, 7}, {16, 16, 3, 3}, 1, 1, "SiLU"},
                        Case{{1, 16, 11, 10}, {32, 16, 3, 3}, 2, 1, "Relu"}}) {
    SCOPED_TRACE(c.activation);
    const DType t = DType::kBF16;
    GraphBuilder b(22);
    AttributeMap attrs = ints_attribute("pads", {c.pad, c.pad, c.pad, c.pad});
    attrs.set_ints("strides", {c.stride, c.stride});
    ValueId y = b.op("Conv", {b.input("x", t, c.x), b.constant("w", random_tensor(t, c.w, 2)),
                              b.constant("bias", random_tensor(t, {c.w[0]}, 3))}, attrs);
    const std::string act = c.activation;
    b.output(act == "SiLU"    ? b.op("Mul", {y, b.op("Sigmoid", {y})})
             : act == "ReLU6" ? b.op("Clip", {y, b.constant("low", tensor_of(t, {}, {0.0})), b.constant("high", tensor_of(t, {}, {0.5}))})
                              : b.op("Relu", {y}));
    Graph unfused = b.build();
    ASSERT_TRUE(infer_and_fold(unfused).is_ok());
    Graph fused = unfused;
    ASSERT_TRUE(fuse_elementwise(fused).is_ok());
    auto folded = fuse_conv_activations(fused);
    ASSERT_TRUE(folded.is_ok() && *folded == 1) << "the activation did not fold into the convolution";
    std::map<std::string, Tensor> inputs = {{"x", random_tensor(t, c.x, 1)}};
    auto prepared = prepare_node(fused, inputs, ViewLayout::kPackedChannelsLast, nullptr);
    ASSERT_TRUE(prepared.is_ok()) << prepared.status().to_string();
    if (std::string_view(c.activation) != "ReLU6") {
      EXPECT_TRUE(prepared->kernel->implementation().starts_with("cudnn-graph:")) << prepared->kernel->implementation();
    }
    check_node(fused, inputs, ViewLayout::kPackedChannelsLast, &unfused);
  }
  unsetenv("STRIDER_CUDA_KERNEL_CHOICE");
  unsetenv("STRIDER_CUDNN_GRAPH");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaFused, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace strider::cuda_test
