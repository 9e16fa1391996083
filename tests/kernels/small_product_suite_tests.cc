// Small products (MatMul, Gemm, FusedMatMul) on every device and view layout of the
// catalog, against the float64 reference. On cuda each of strider's own small-product
// kernels (hal/cuda/small_gemm.h: tiles of 32, 16 and 8 rows) is forced in turn, and the
// test checks that it is the one that ran: the timed choice would keep cuBLASLt for some
// of these. Sizes are not multiples of the tiles, K runs over several slices (the loads of
// the next slice in flight), batch dims broadcast, and the fused programs cover a bias, a
// residual, BERT's erf GELU (a compiled form) and attention's scale and mask (the
// interpreter, over broadcast operands).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <optional>
#include <span>
#include <string_view>

#include "ir/builder.h"
#include "kernel_harness.h"
#include "kernel_suite.h"
#include "ops/fused_elementwise.h"
#include "passes/fuse_elementwise.h"
#include "passes/infer_shapes.h"

namespace strider {
namespace {

using kernel_test::KernelSuite;
using kernel_test::scalar_of;

// Each tile height whole, then with K split over a cluster (offered where K >= 256).
constexpr const char* kSmallKernels[] = {"strider-cuda:small-gemm/32rows",       "strider-cuda:small-gemm/16rows",
                                         "strider-cuda:small-gemm/8rows",        "strider-cuda:small-gemm/32rows-split",
                                         "strider-cuda:small-gemm/16rows-split", "strider-cuda:small-gemm/8rows-split"};

struct ProductCase {
  std::string name;
  DType dtype;
  bool long_k;  // K >= 256: the split kernels are offered
  // Builds the unfused graph and its inputs.
  std::function<void(GraphBuilder&, std::map<std::string, Tensor>&)> build;
};

std::vector<ProductCase> product_cases() {
  std::vector<ProductCase> cases;
  auto random = [](DType t, const Shape& shape, uint32_t seed) { return kernel_test::random_tensor(t, shape, seed); };
  for (DType t : {DType::kF32, DType::kBF16}) {
    cases.push_back({"batched A, shared B, K of three slices", t, false, [=](GraphBuilder& b, auto& in) {
                       b.output(b.op("MatMul", {b.input("a", t, {2, 37, 70}), b.input("w", t, {70, 45})}));
                       in = {{"a", random(t, {2, 37, 70}, 1)}, {"w", random(t, {70, 45}, 2)}};
                     }});
    cases.push_back({"K of ten slices, constant B", t, true, [=](GraphBuilder& b, auto& in) {
                       b.output(b.op("MatMul", {b.input("a", t, {41, 300}), b.constant("w", random(t, {300, 33}, 2))}));
                       in = {{"a", random(t, {41, 300}, 1)}};
                     }});
    cases.push_back({"K of 35 slices, the split's clusters of 8", t, true, [=](GraphBuilder& b, auto& in) {
                       b.output(b.op("MatMul", {b.input("a", t, {9, 1100}), b.input("w", t, {1100, 20})}));
                       in = {{"a", random(t, {9, 1100}, 1)}, {"w", random(t, {1100, 20}, 2)}};
                     }});
    cases.push_back({"batch dims broadcast both ways", t, false, [=](GraphBuilder& b, auto& in) {
                       b.output(b.op("MatMul", {b.input("a", t, {2, 1, 9, 20}), b.input("b", t, {1, 3, 20, 11})}));
                       in = {{"a", random(t, {2, 1, 9, 20}, 1)}, {"b", random(t, {1, 3, 20, 11}, 2)}};
                     }});
    cases.push_back({"Gemm transB with a bias row", t, false, [=](GraphBuilder& b, auto& in) {
                       b.output(b.op("Gemm", {b.input("a", t, {12, 40}), b.input("w", t, {24, 40}), b.input("c", t, {24})},
                                     int_attribute("transB", 1)));
                       in = {{"a", random(t, {12, 40}, 1)}, {"w", random(t, {24, 40}, 2)}, {"c", random(t, {24}, 3)}};
                     }});
    cases.push_back({"Gemm alpha, transA", t, false, [=](GraphBuilder& b, auto& in) {
                       AttributeMap attrs = int_attribute("transA", 1);
                       attrs.set_float("alpha", 0.5f);
                       b.output(b.op("Gemm", {b.input("a", t, {40, 12}), b.input("w", t, {40, 24})}, attrs));
                       in = {{"a", random(t, {40, 12}, 1)}, {"w", random(t, {40, 24}, 2)}};
                     }});
    cases.push_back({"bias and residual", t, true, [=](GraphBuilder& b, auto& in) {
                       ValueId y = b.op("MatMul", {b.input("a", t, {2, 19, 320}), b.constant("w", random(t, {320, 40}, 2))});
                       y = b.op("Add", {y, b.constant("bias", random(t, {40}, 3))});
                       b.output(b.op("Add", {b.input("r", t, {2, 19, 40}), y}));
                       in = {{"a", random(t, {2, 19, 320}, 1)}, {"r", random(t, {2, 19, 40}, 4)}};
                     }});
  }
  const DType f32 = DType::kF32;
  cases.push_back({"BERT's bias and erf GELU", f32, false, [=](GraphBuilder& b, auto& in) {
                     ValueId y = b.op("MatMul", {b.input("a", f32, {1, 21, 48}), b.constant("w", random(f32, {48, 70}, 2))});
                     y = b.op("Add", {b.constant("bias", random(f32, {70}, 3)), y});
                     ValueId e = b.op("Erf", {b.op("Div", {y, b.constant("root2", scalar_of(f32, std::sqrt(2.0f)))})});
                     ValueId g = b.op("Mul", {y, b.op("Add", {e, b.constant("one", scalar_of(f32, 1.0f))})});
                     b.output(b.op("Mul", {g, b.constant("half", scalar_of(f32, 0.5f))}));
                     in = {{"a", random(f32, {1, 21, 48}, 1)}};
                   }});
  cases.push_back({"attention scores, scaled and masked", f32, false, [=](GraphBuilder& b, auto& in) {
                     ValueId s = b.op("MatMul", {b.input("q", f32, {1, 2, 16, 8}), b.input("kt", f32, {1, 2, 8, 19})});
                     s = b.op("Div", {s, b.constant("root", scalar_of(f32, std::sqrt(8.0f)))});
                     b.output(b.op("Add", {s, b.input("mask", f32, {1, 1, 1, 19})}));
                     in = {{"q", random(f32, {1, 2, 16, 8}, 1)}, {"kt", random(f32, {1, 2, 8, 19}, 2)},
                           {"mask", random(f32, {1, 1, 1, 19}, 3)}};
                   }});
  return cases;
}

// The built graph and the same as the session fuses it: the product and its program as
// one FusedMatMul node.
void fuse_product(GraphBuilder& b, Graph* unfused, Graph* fused) {
  *unfused = b.build();
  ASSERT_TRUE(infer_and_fold(*unfused).is_ok());
  *fused = *unfused;
  ASSERT_TRUE(fuse_elementwise(*fused).is_ok());
  ASSERT_TRUE(fuse_matmul_epilogues(*fused).is_ok());
  ASSERT_EQ(fused->num_nodes(), 1) << "the product and its program did not fuse";
}

TEST_P(KernelSuite, SmallProducts) {
  std::vector<const char*> choices = {"timed"};
  if (on_cuda()) choices.assign(std::begin(kSmallKernels), std::end(kSmallKernels));
  for (const ProductCase& c : product_cases())
    for (const char* choice : choices) {
      const bool split = std::string_view(choice).ends_with("split");
      if (split && !c.long_k) continue;
      SCOPED_TRACE(fmt::format("{} {} {}", c.name, dtype_name(c.dtype), choice));
      std::optional<kernel_test::ScopedEnvironment> forced;
      if (on_cuda()) forced.emplace("STRIDER_CUDA_KERNEL_CHOICE", choice);
      GraphBuilder b(c.dtype == DType::kF32 ? 17 : 22);
      std::map<std::string, Tensor> inputs;
      c.build(b, inputs);
      Graph unfused, fused;
      ASSERT_NO_FATAL_FAILURE(fuse_product(b, &unfused, &fused));
      check_graph(std::move(fused), inputs, &unfused);
      if (on_cuda() && !kernel_test::last_implementation().empty()) {
        EXPECT_TRUE(kernel_test::last_implementation().starts_with(choice)) << kernel_test::last_implementation();
      }
    }
}

struct ForcedConvCase {
  const char* name;
  Shape x, w;
  std::vector<int64_t> pads, strides, dilations;
  const char* activation;
  bool long_k;  // C x KH x KW >= 256: the small product's split kernels are offered
};

// Each case as a Conv (with its activation fused: FusedConv) on `device`, against the
// unfused graph; on cuda once per kernel of `kernels`, forced, and checked to be the one
// that ran (`split` kernels only for long_k cases).
void check_forced_convolutions(const std::vector<ForcedConvCase>& cases, std::span<const char* const> kernels, bool on_cuda,
                               const std::function<void(Graph, const std::map<std::string, Tensor>&, const Graph*)>& check) {
  std::vector<const char*> choices = {"timed"};
  if (on_cuda) choices.assign(kernels.begin(), kernels.end());
  const DType f32 = DType::kF32;
  for (const ForcedConvCase& c : cases)
    for (const char* choice : choices) {
      if (std::string_view(choice).ends_with("split") && !c.long_k) continue;
      SCOPED_TRACE(fmt::format("{} {}", c.name, choice));
      std::optional<kernel_test::ScopedEnvironment> forced;
      if (on_cuda) forced.emplace("STRIDER_CUDA_KERNEL_CHOICE", choice);
      GraphBuilder b(17);
      AttributeMap attrs = ints_attribute("pads", c.pads);
      attrs.set_ints("strides", c.strides);
      attrs.set_ints("dilations", c.dilations);
      Tensor w = kernel_test::random_tensor(f32, c.w, 2);
      ValueId y = b.op("Conv", {b.input("x", f32, c.x), b.constant("w", w), b.constant("bias", kernel_test::random_tensor(f32, {c.w[0]}, 3))},
                       attrs);
      const std::string act = c.activation;
      b.output(act == "SiLU" ? b.op("Mul", {y, b.op("Sigmoid", {y})}) : act == "Relu" ? b.op("Relu", {y}) : y);
      Graph unfused = b.build();
      ASSERT_TRUE(infer_and_fold(unfused).is_ok());
      Graph fused = unfused;
      ASSERT_TRUE(fuse_elementwise(fused).is_ok());
      ASSERT_TRUE(fuse_conv_activations(fused).is_ok());
      ASSERT_EQ(fused.num_nodes(), 1) << "the convolution and its activation did not fuse";
      check(std::move(fused), {{"x", kernel_test::random_tensor(f32, c.x, 1)}}, &unfused);
      if (on_cuda && !kernel_test::last_implementation().empty()) {
        EXPECT_TRUE(kernel_test::last_implementation().starts_with(choice)) << kernel_test::last_implementation();
      }
    }
}

// f32 convolutions as the small product (hal/cuda/own_conv.h's small convolution: an
// implicit im2col as A, the weights as B): on cuda each tile height, whole and with K split
// over a cluster, is forced in turn and checked to be the one that ran. Windows with
// stride, dilation and uneven pads, a 1-D layer, K of one partial slice and of many
// (C x KH x KW = 324: the split's clusters), a bias and the activations the kernel applies
// itself (FusedConv), images of a batch.
constexpr const char* kSmallConvKernels[] = {"strider-cuda:small-conv/32rows",       "strider-cuda:small-conv/16rows",
                                             "strider-cuda:small-conv/8rows",        "strider-cuda:small-conv/32rows-split",
                                             "strider-cuda:small-conv/16rows-split", "strider-cuda:small-conv/8rows-split"};

TEST_P(KernelSuite, SmallConvolutions) {
  const std::vector<ForcedConvCase> cases = {
      {"3x3 36->40, K of 11 slices, SiLU", {2, 36, 11, 9}, {40, 36, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, "SiLU", true},
      {"3x3 stride 2, uneven pads", {1, 36, 13, 10}, {20, 36, 3, 3}, {1, 0, 2, 1}, {2, 2}, {1, 1}, "none", true},
      {"5x3 dilated, Relu", {2, 5, 12, 11}, {7, 5, 5, 3}, {2, 1, 2, 1}, {1, 1}, {2, 1}, "Relu", false},
      {"1-D dilated two-tap", {2, 6, 20}, {12, 6, 2}, {4, 0}, {1}, {4}, "none", false},
  };
  check_forced_convolutions(cases, kSmallConvKernels, on_cuda(),
                            [this](Graph g, const auto& inputs, const Graph* unfused) { check_graph(std::move(g), inputs, unfused); });
}

// f32 convolutions as the register-tiled implicit GEMM (hal/cuda/tiled_conv.h), each tile
// size forced in turn: output pixels and channels that are
// not multiples of the tiles (63, 150, 286 pixels; 7, 33, 70 and 136 channels: several
// column blocks), C x KH x KW of one
// partial slice to many, stride, dilation, uneven pads, a 1-D layer, 1x1, images of a batch,
// a bias and the activations the kernel applies itself.
constexpr const char* kTiledConvKernels[] = {"strider-cuda:tiled-conv/128x128", "strider-cuda:tiled-conv/128x64",
                                             "strider-cuda:tiled-conv/64x64", "strider-cuda:tiled-conv/256x32",
                                             "strider-cuda:tiled-conv/128x32"};

TEST_P(KernelSuite, TiledConvolutions) {
  const std::vector<ForcedConvCase> cases = {
      {"3x3 20->70, SiLU", {2, 20, 13, 11}, {70, 20, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, "SiLU", false},
      {"3x3 stride 2, uneven pads, 136 channels", {1, 12, 17, 15}, {136, 12, 3, 3}, {1, 0, 2, 1}, {2, 2}, {1, 1}, "none", false},
      {"5x3 dilated, Relu", {2, 5, 12, 11}, {7, 5, 5, 3}, {2, 1, 2, 1}, {1, 1}, {2, 1}, "Relu", false},
      {"1-D dilated two-tap", {3, 6, 50}, {12, 6, 2}, {4, 0}, {1}, {4}, "none", false},
      {"1x1 over 512 pixels, K of 9", {2, 9, 16, 16}, {33, 9, 1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, "SiLU", false},
  };
  check_forced_convolutions(cases, kTiledConvKernels, on_cuda(),
                            [this](Graph g, const auto& inputs, const Graph* unfused) { check_graph(std::move(g), inputs, unfused); });
}

// cuDNN over a packed copy of x (hal/cuda/conv.cc's PackedInputConv: the kernel copies an
// NCHW channel slice into memory of its own, then convolves it dense), forced on cuda over
// the harness's NCHW slice layout (x and y channels [2, 2 + C) of C + 5, the in-place
// chunks of C2f; batches of 2, since one image's channel slice is dense and not offered),
// f32 (the only dtype it is offered for) with and without SiLU after it, 2-D with stride
// and dilation, and 1-D; checked to be the kernel that ran. Once per device (the dense
// instance): the layout is the test's own.
TEST_P(KernelSuite, PackedInputConvolutions) {
  if (layout() != kernel_test::ViewLayout::kDense) GTEST_SKIP() << "runs once per device, over the NCHW slice layout";
  struct Case {
    Shape x, w;
    std::vector<int64_t> pads, strides, dilations;
    bool silu;
  };
  const std::vector<Case> cases = {
      {{2, 12, 11, 9}, {16, 12, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, true},
      {{2, 8, 13, 10}, {8, 8, 3, 3}, {1, 1, 1, 1}, {2, 2}, {1, 1}, false},
      {{2, 16, 12, 12}, {24, 16, 3, 3}, {2, 2, 2, 2}, {1, 1}, {2, 2}, true},
      {{2, 6, 30}, {10, 6, 3}, {1, 1}, {1}, {1}, false},
  };
  std::optional<kernel_test::ScopedEnvironment> forced;
  if (on_cuda()) forced.emplace("STRIDER_CUDA_KERNEL_CHOICE", "packed-x");
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("x {} w {}", shape_to_string(c.x), shape_to_string(c.w)));
    GraphBuilder b(17);
    AttributeMap attrs = ints_attribute("pads", c.pads);
    attrs.set_ints("strides", c.strides);
    attrs.set_ints("dilations", c.dilations);
    const DType f32 = DType::kF32;
    Tensor w = kernel_test::random_tensor(f32, c.w, 2), bias = kernel_test::random_tensor(f32, {c.w[0]}, 3);
    ValueId y = b.op("Conv", {b.input("x", f32, c.x), b.constant("w", w), b.constant("bias", bias)}, attrs);
    b.output(c.silu ? b.op("Mul", {y, b.op("Sigmoid", {y})}) : y);
    Graph unfused = b.build();
    ASSERT_TRUE(infer_and_fold(unfused).is_ok());
    Graph fused = unfused;
    ASSERT_TRUE(fuse_elementwise(fused).is_ok());
    ASSERT_TRUE(fuse_conv_activations(fused).is_ok());
    ASSERT_EQ(fused.num_nodes(), 1);
    const Tensor x = kernel_test::random_tensor(f32, c.x, 1);
    kernel_test::check_node(*device_, std::move(fused), {{"x", x}}, kernel_test::ViewLayout::kNchwSlice, &unfused);
    if (on_cuda()) {
      EXPECT_TRUE(kernel_test::last_implementation().starts_with("packed-x")) << kernel_test::last_implementation();
    }
  }
}

// One row times constant weights (on cpu, hal/cpu/row_matmul.h: B packed in column blocks
// of 16, four blocks a pass, checked to be the kernel that ran): Gemm as a classifier has
// it (transB, alpha, a bias C of N), MatMul with leading unit dims, and Gemm with a bias of
// one value; N of one partial block, of several blocks with a partial one and of a multiple
// of 64 (the four-block passes alone), K of 1 to 300; a FusedMatMul of one row (its
// program a pass after the product). Every device; A and Y in each layout.
TEST_P(KernelSuite, RowTimesConstantMatrix) {
  struct Case {
    int64_t k, n;
    bool gemm;
    Shape bias;  // Gemm's C ({} for none)
  };
  const std::vector<Case> cases = {{300, 37, true, {37}}, {1, 5, true, {5}},    {64, 128, true, {1}},
                                   {20, 70, false, {}},   {129, 16, true, {}}, {7, 200, false, {}}};
  const DType f32 = DType::kF32;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("K {} N {} {}", c.k, c.n, c.gemm ? "Gemm" : "MatMul"));
    GraphBuilder b(17);
    std::map<std::string, Tensor> inputs;
    if (c.gemm) {
      AttributeMap attrs = int_attribute("transB", 1);
      attrs.set_float("alpha", 0.5f);
      std::vector<ValueId> operands = {b.input("a", f32, {1, c.k}), b.constant("w", kernel_test::random_tensor(f32, {c.n, c.k}, 2))};
      if (!c.bias.empty()) operands.push_back(b.constant("c", kernel_test::random_tensor(f32, c.bias, 3)));
      b.output(b.op("Gemm", operands, attrs));
      inputs["a"] = kernel_test::random_tensor(f32, {1, c.k}, 1);
    } else {
      b.output(b.op("MatMul", {b.input("a", f32, {1, 1, c.k}), b.constant("w", kernel_test::random_tensor(f32, {c.k, c.n}, 2))}));
      inputs["a"] = kernel_test::random_tensor(f32, {1, 1, c.k}, 1);
    }
    check(b, inputs);
    if (std::string_view(std::get<0>(GetParam())) == "cpu") {
      EXPECT_TRUE(kernel_test::last_implementation().starts_with("strider-cpu:row-matmul")) << kernel_test::last_implementation();
    }
  }
  // A FusedMatMul of one row (a decoder step's projection, its bias, a residual, a Relu):
  // the product refuses oneDNN's post-ops, so the program runs as a pass after it.
  SCOPED_TRACE("FusedMatMul of one row");
  GraphBuilder b(17);
  ValueId y = b.op("MatMul", {b.input("a", f32, {1, 90}), b.constant("w", kernel_test::random_tensor(f32, {90, 40}, 2))});
  ValueId s = b.op("Add", {b.op("Add", {y, b.input("bias", f32, {40})}), b.input("residual", f32, {1, 40})});
  b.output(b.op("Relu", {s}));
  Graph unfused = b.build();
  ASSERT_TRUE(infer_and_fold(unfused).is_ok());
  Graph fused = unfused;
  ASSERT_TRUE(fuse_elementwise(fused).is_ok());
  Result<int> folded = fuse_matmul_epilogues(fused);
  ASSERT_TRUE(folded.is_ok() && *folded == 1);
  check_graph(std::move(fused),
              {{"a", kernel_test::random_tensor(f32, {1, 90}, 1)}, {"bias", kernel_test::random_tensor(f32, {40}, 3)},
               {"residual", kernel_test::random_tensor(f32, {1, 40}, 4)}},
              &unfused);
  if (std::string_view(std::get<0>(GetParam())) == "cpu") {
    EXPECT_TRUE(kernel_test::last_implementation().starts_with("strider-cpu:row-matmul")) << kernel_test::last_implementation();
  }
}

}  // namespace
}  // namespace strider

namespace strider {
namespace {

// Products by constant weights in bf16 and f16 with the programs transformers put after
// them: on cuda each tensor-core product (hal/cuda/mma_matmul.h, opt-in: the pipelined
// 128 x 128 one and the pointwise convolution's) is offered, forced and checked to be the
// one that ran where the views are its (the dense layout); every device checks the values. BERT's erf GELU and GPT-2's tanh GELU after a bias (the kernel's own epilogue
// forms), a bias and a residual, a plain product; N and the rows not multiples of the 64
// tile, N of whole and partial 16-byte chunks, K over several 64-channel steps.
TEST_P(KernelSuite, TensorCoreProducts) {
  auto random = [](DType t, const Shape& shape, uint32_t seed) { return kernel_test::random_tensor(t, shape, seed); };
  struct Case {
    const char* name;
    Shape a;
    int64_t n;
    std::function<ValueId(GraphBuilder&, ValueId, DType)> program;
  };
  auto biased = [&](GraphBuilder& b, ValueId y, DType t, int64_t n) { return b.op("Add", {b.constant("bias", random(t, {n}, 3)), y}); };
  const std::vector<Case> cases = {
      {"BERT's bias and erf GELU", {2, 70, 72}, 100,
       [&](GraphBuilder& b, ValueId y, DType t) {
         y = biased(b, y, t, 100);
         ValueId e = b.op("Erf", {b.op("Div", {y, b.constant("root2", scalar_of(t, std::sqrt(2.0f)))})});
         ValueId g = b.op("Mul", {y, b.op("Add", {e, b.constant("one", scalar_of(t, 1.0f))})});
         return b.op("Mul", {g, b.constant("half", scalar_of(t, 0.5f))});
       }},
      {"GPT-2's bias and tanh GELU", {1, 33, 136}, 96,
       [&](GraphBuilder& b, ValueId y, DType t) {
         ValueId s = b.op("Add", {y, b.constant("bias", random(t, {96}, 3))});
         ValueId cube = b.op("Mul", {s, b.op("Mul", {s, s})});
         ValueId inner = b.op("Add", {s, b.op("Mul", {b.constant("c", scalar_of(t, 0.044715f)), cube})});
         ValueId th = b.op("Tanh", {b.op("Mul", {b.constant("root", scalar_of(t, 0.7978846f)), inner})});
         ValueId g = b.op("Mul", {s, b.op("Add", {b.constant("one", scalar_of(t, 1.0f)), th})});
         return b.op("Mul", {b.constant("half", scalar_of(t, 0.5f)), g});
       }},
      {"bias and residual", {2, 19, 320}, 40,
       [&](GraphBuilder& b, ValueId y, DType t) { return b.op("Add", {b.input("r", t, {2, 19, 40}), biased(b, y, t, 40)}); }},
      {"plain product", {3, 65, 64}, 130, [](GraphBuilder&, ValueId y, DType) { return y; }},
  };
  std::vector<const char*> choices = {"timed"};
  if (on_cuda()) choices = {"strider-cuda:mma-gemm-128", "strider-cuda:mma-gemm-64"};
  for (const char* choice : choices)
  for (DType t : {DType::kBF16, DType::kF16})
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} {} {}", c.name, dtype_name(t), choice));
      std::optional<kernel_test::ScopedEnvironment> forced, offered;
      if (on_cuda()) forced.emplace("STRIDER_CUDA_KERNEL_CHOICE", choice);
      if (on_cuda()) offered.emplace("STRIDER_CUDA_MMA_MATMUL", "on");  // opt-in (mma_matmul.h)
      GraphBuilder b(22);
      ValueId y = b.op("MatMul", {b.input("a", t, c.a), b.constant("w", random(t, {c.a.back(), c.n}, 2))});
      b.output(c.program(b, y, t));
      std::map<std::string, Tensor> inputs = {{"a", random(t, c.a, 1)}};
      if (std::string_view(c.name) == "bias and residual") inputs["r"] = random(t, {2, 19, 40}, 4);
      Graph unfused, fused;
      ASSERT_NO_FATAL_FAILURE(fuse_product(b, &unfused, &fused));
      check_graph(std::move(fused), inputs, &unfused);
      if (on_cuda() && layout() == kernel_test::ViewLayout::kDense) {
        EXPECT_TRUE(kernel_test::last_implementation().starts_with(choice)) << kernel_test::last_implementation();
      }
    }
}

}  // namespace
}  // namespace strider
