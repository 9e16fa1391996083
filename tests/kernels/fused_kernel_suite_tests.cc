// The kernel suite's fused kernels (tests/kernels/kernel_suite.h): FusedAttention, FusedConv
// (Winograd included), the gated activation, fused programs over broadcast operands and
// FusedMatMul, each made by its pass from the unfused pattern and checked against the
// float64 reference of that pattern, on every device and view layout of the catalog.
#include <gtest/gtest.h>


#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/onnx_types.h"
#include "ir/builder.h"
#include "kernel_harness.h"
#include "kernel_suite.h"
#include "ops/conv_chain.h"
#include "ops/fused_attention.h"
#include "ops/fused_elementwise.h"
#include "passes/fuse_attention.h"
#include "passes/fuse_conv_chain.h"
#include "passes/fuse_elementwise.h"
#include "passes/infer_shapes.h"

namespace strider {
namespace {

using kernel_test::KernelSuite;
using kernel_test::scalar_of;
using kernel_test::ViewLayout;

// ---- FusedAttention: the unfused pattern, fused by the pass, vs the reference of the pattern --
Tensor scalar(float value) { return Tensor::from_values<float>(DType::kF32, {}, std::vector<float>{value}); }

// `unfused` typed, then through fuse_elementwise and `pass` (a producer fusion), which must
// fold exactly one node.
Result<Graph> fuse_once(Graph& unfused, const std::function<Result<int>(Graph&)>& pass) {
  STRIDER_RETURN_IF_ERROR(infer_and_fold(unfused));
  Graph fused = unfused;
  STRIDER_RETURN_IF_ERROR(fuse_elementwise(fused).status());
  STRIDER_ASSIGN_OR_RETURN(int n, pass(fused));
  if (n != 1) return internal_error(fmt::format("the pass folded {} nodes, not 1", n));
  return fused;
}

Tensor causal_keep(int64_t rows, int64_t keys) {  // query i keeps keys j <= i + keys - rows
  Tensor t(DType::kBool, {rows, keys});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < keys; ++j) t.data<bool>()[i * keys + j] = j <= i + keys - rows;
  return t;
}

// `unfused` typed and folded, and a copy through fuse_attention, which must make it one
// FusedAttention node.
void fuse_to_one_attention(Graph& unfused, Graph* fused) {
  ASSERT_TRUE(infer_and_fold(unfused).is_ok());
  *fused = unfused;
  Result<int> n = fuse_attention(*fused);
  ASSERT_TRUE(n.is_ok()) << n.status().to_string();
  ASSERT_EQ(*n, 1);
  ASSERT_EQ(fused->num_nodes(), 1);
  ASSERT_EQ(fused->node(0).op_type, kFusedAttentionOp);
}

// The fused node against the unfused graph's reference. CUDA has four attention kernels
// (hal/cuda/attention.h): each runs every case it takes ("mma", the default, is the
// register-tiled kernel of the dtype: mma for bf16 / f16, fma for f32; f32's also with 2
// and 1 query rows a thread, STRIDER_CUDA_FMA_ROWS).
void check_every_attention_kernel(KernelSuite* suite, const Graph& fused, const std::map<std::string, Tensor>& inputs,
                                  const Graph& unfused) {
  struct Choice {
    const char* kernel;
    const char* fma_rows;
  };
  const bool f32 = fused.value(fused.node(0).outputs[0]).dtype == DType::kF32;
  for (Choice c : {Choice{"warp-per-row", "4"}, Choice{"tiled", "4"}, Choice{"mma", "4"}, Choice{"mma", "2"},
                   Choice{"mma", "1"}}) {
    if (!suite->on_cuda() && std::string_view(c.kernel) != "warp-per-row") continue;
    if (!f32 && std::string_view(c.fma_rows) != "4") continue;
    SCOPED_TRACE(std::string(c.kernel) + ", f32 rows a thread " + c.fma_rows);
    if (std::getenv("STRIDER_TEST_PROGRESS")) std::fprintf(stderr, "check_attention: %s kernel\n", c.kernel);
    kernel_test::ScopedEnvironment choice("STRIDER_CUDA_ATTENTION", c.kernel);
    kernel_test::ScopedEnvironment rows("STRIDER_CUDA_FMA_ROWS", c.fma_rows);
    suite->check_graph(fused, inputs, &unfused);
  }
}

// Builds the pattern with `scores_to_probs` between MatMul(q, kt) and MatMul(p, v), fuses
// it, and checks the one FusedAttention node against the unfused graph's reference.
template <typename Body>
void check_attention(KernelSuite* suite, DType t, const Shape& q, const Shape& kt, const Shape& v,
                     std::map<std::string, Tensor> inputs, Body scores_to_probs, bool zero_rows = false) {
  GraphBuilder b(17);
  ValueId s = b.op("MatMul", {b.input("q", t, q), b.input("kt", t, kt)});
  ValueId p = scores_to_probs(b, s);
  b.output(b.op("MatMul", {p, b.input("v", t, v)}));
  Graph unfused = b.build(), fused;
  ASSERT_NO_FATAL_FAILURE(fuse_to_one_attention(unfused, &fused));
  ASSERT_EQ(read_fused_attention(fused.node(0))->zero_invalid_rows, zero_rows);
  uint32_t seed = 11;
  for (const char* name : {"q", "kt", "v"})
    if (!inputs.count(name)) inputs[name] = kernel_test::random_tensor(t, unfused.value(*unfused.find_value(name)).shape, seed++);
  check_every_attention_kernel(suite, fused, inputs, unfused);
}

TEST_P(KernelSuite, FusedAttentionScaledWithAdditiveMask) {  // BERT: / sqrt(d) + mask
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(t));
    check_attention(this, t, {2, 3, 5, 4}, {2, 3, 4, 6}, {2, 3, 6, 3},
                    {{"mask", kernel_test::random_tensor(t, {2, 1, 1, 6}, 5)}}, [&](GraphBuilder& b, ValueId s) {
                      Tensor two = kernel_test::converted(scalar(2.0f), t);
                      ValueId scaled = b.op("Div", {s, b.constant("two", two)});
                      return b.op("Softmax", {b.op("Add", {scaled, b.input("mask", t, {2, 1, 1, 6})})},
                                  int_attribute("axis", -1));
                    });
  }
}

TEST_P(KernelSuite, FusedAttentionCausalWhereBothWays) {  // GPT-2: where(causal, s, -inf); masked_fill
  for (int keep : {1, 0}) {
    SCOPED_TRACE(keep ? "keep where" : "fill where");
    Tensor mask = causal_keep(5, 7);
    if (!keep)
      for (int64_t i = 0; i < mask.num_elements(); ++i) mask.data<bool>()[i] = !mask.data<bool>()[i];
    // Kt broadcast over the heads (one key head for three query heads), V over the batch.
    check_attention(this, DType::kF32, {2, 3, 5, 4}, {2, 1, 4, 7}, {3, 7, 4}, {{"mask", mask}},
                    [&](GraphBuilder& b, ValueId s) {
                      ValueId scaled = b.op("Mul", {b.constant("scale", scalar(0.5f)), s});
                      ValueId fill = b.constant("fill", scalar(-INFINITY));
                      ValueId cond = b.input("mask", DType::kBool, {5, 7});
                      return b.op("Softmax", {keep ? b.op("Where", {cond, scaled, fill}) : b.op("Where", {cond, fill, scaled})});
                    });
  }
}

// Masks that end rows early, over more query rows than the CPU's block of 32, so each block
// leaves out the keys past its last row's last visible one: causal as an additive -inf
// triangle (Llama) and as a Where (GPT-2), a padding mask (keys from 50 on masked for every
// row), and the additive causal mask with a +inf key element (key 60): rows before it mask
// it, and their score there is NaN where it is +inf - inf, so nothing may be left out.
TEST_P(KernelSuite, FusedAttentionLongMasksEndingRowsEarly) {
  const int64_t n = 70;
  for (DType t : {DType::kF32, DType::kBF16})
    for (const char* kind : {"additive causal", "where causal", "padding", "additive causal, inf key"}) {
      SCOPED_TRACE(std::string(kind) + " " + std::string(dtype_name(t)));
      if (std::getenv("STRIDER_TEST_PROGRESS")) std::fprintf(stderr, "long masks: %s\n", kind);
      const std::string k = kind;
      const bool where = k == "where causal";
      Tensor mask = where ? causal_keep(n, n) : Tensor(DType::kF32, {n, n});
      if (!where)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j)
            mask.data<float>()[i * n + j] = (k == "padding" ? j >= 50 : j > i) ? -INFINITY : 0.01f * float((i + j) % 7);
      std::map<std::string, Tensor> inputs = {{"mask", where ? mask : kernel_test::converted(mask, t)}};
      if (k == "additive causal, inf key") {
        Tensor kt = kernel_test::random_tensor(DType::kF32, {1, 2, 8, n}, 21);
        kt.data<float>()[2 * n + 60] = INFINITY;  // head 0, dim 2, key 60
        inputs["kt"] = kernel_test::converted(kt, t);
      }
      check_attention(this, t, {1, 2, n, 8}, {1, 2, 8, n}, {1, 2, n, 8}, inputs, [&](GraphBuilder& b, ValueId s) {
        ValueId scaled = b.op("Div", {s, b.constant("scale", kernel_test::converted(scalar(2.0f), t))});
        if (where)
          return b.op("Softmax", {b.op("Where", {b.input("mask", DType::kBool, {n, n}), scaled,
                                                 b.constant("fill", kernel_test::converted(scalar(-INFINITY), t))})});
        return b.op("Softmax", {b.op("Add", {scaled, b.input("mask", t, {n, n})})});
      });
    }
}

// Masks whose rows are whole 8-key chunks (136 keys: three key tiles, the last of 8), which
// CUDA's register-tiled kernel stages a chunk at a time: causal as a bool Where (GPT-2) and
// as an additive triangle (Llama), one per query and key, and a padding mask of one row per
// batch element (BERT), with -inf from key 120 on in batch 1.
TEST_P(KernelSuite, FusedAttentionMasksInChunks) {
  const int64_t n = 136;
  for (DType t : {DType::kBF16, DType::kF16, DType::kF32})
    for (const char* kind : {"where causal", "additive causal", "padding"}) {
      SCOPED_TRACE(std::string(kind) + " " + std::string(dtype_name(t)));
      const std::string k = kind;
      Tensor mask;
      Shape mask_shape = k == "padding" ? Shape{2, 1, 1, n} : Shape{n, n};
      if (k == "where causal") {
        mask = causal_keep(n, n);
      } else {
        mask = kernel_test::random_tensor(DType::kF32, mask_shape, 31);
        for (int64_t i = 0; i < mask.num_elements() / n; ++i)
          for (int64_t j = 0; j < n; ++j)
            if (k == "padding" ? (i == 1 && j >= 120) : j > i) mask.data<float>()[i * n + j] = -INFINITY;
        mask = kernel_test::converted(mask, t);
      }
      check_attention(this, t, {2, 2, n, 64}, {2, 2, 64, n}, {2, 2, n, 64}, {{"mask", mask}},
                      [&](GraphBuilder& b, ValueId s) {
                        ValueId scaled = b.op("Div", {s, b.constant("root", kernel_test::converted(scalar(8.0f), t))});
                        if (k == "where causal")
                          return b.op("Softmax", {b.op("Where", {b.input("mask", DType::kBool, {n, n}), scaled,
                                                                 b.constant("fill", kernel_test::converted(scalar(-INFINITY), t))})});
                        return b.op("Softmax", {b.op("Add", {scaled, b.input("mask", t, mask_shape)})}, int_attribute("axis", -1));
                      });
    }
}

// Grouped-query attention as torch's repeat_kv writes it (Unsqueeze, Expand, Reshape), here
// before Kt and V (the zoo's Llama repeats K before its Transpose: tests/plan's
// attention_plan_tests): the pass absorbs the repeats (kv_repeat), so every device
// reads each key head in place for its query heads, and gives the unfused graph's answer
// (which copies the repeated heads). Two key heads for four query heads; one for four
// (multi-query) in bf16 and f16 at transformer sizes, where CUDA's tiled kernels run.
TEST_P(KernelSuite, FusedAttentionGroupedQueryHeads) {
  struct Case { Shape q; int64_t kv_heads; DType t; };
  for (const Case& c : {Case{{2, 4, 9, 8}, 2, DType::kF32}, Case{{1, 4, 70, 64}, 1, DType::kBF16},
                        Case{{2, 4, 70, 32}, 2, DType::kF16}}) {
    const int64_t b = c.q[0], h = c.q[1], s = c.q[2], d = c.q[3], g = c.kv_heads, r = h / g;
    SCOPED_TRACE(fmt::format("{} query heads, {} key heads, {}", h, g, dtype_name(c.t)));
    GraphBuilder gb(17);
    ValueId q = gb.input("q", c.t, c.q);
    auto repeat = [&](const std::string& name) {  // [b, g, rows, cols] -> [b, h, rows, cols]
      const int64_t rows = name == "kt" ? d : s, cols = name == "kt" ? s : d;
      ValueId x = gb.input(name, c.t, {b, g, rows, cols});
      ValueId unit = gb.op("Unsqueeze", {x, gb.constant(name + "_axes", i64_tensor({2}))});
      ValueId expanded = gb.op("Expand", {unit, gb.constant(name + "_expand", i64_tensor({b, g, r, rows, cols}))});
      return gb.op("Reshape", {expanded, gb.constant(name + "_merge", i64_tensor({b, h, rows, cols}))});
    };
    ValueId kt = repeat("kt");
    ValueId root = gb.constant("root", kernel_test::converted(scalar(std::sqrt(float(d))), c.t));
    ValueId scores = gb.op("Add", {gb.op("Div", {gb.op("MatMul", {q, kt}), root}), gb.input("mask", c.t, {b, 1, 1, s})});
    gb.output(gb.op("MatMul", {gb.op("Softmax", {scores}, int_attribute("axis", -1)), repeat("v")}));
    Graph unfused = gb.build(), fused;
    ASSERT_NO_FATAL_FAILURE(fuse_to_one_attention(unfused, &fused));
    ASSERT_EQ(read_fused_attention(fused.node(0))->kv_repeat, r);
    Tensor mask = kernel_test::random_tensor(DType::kF32, {b, 1, 1, s}, 41);
    for (int64_t j = s - 3; j < s; ++j) mask.data<float>()[j] = -INFINITY;  // batch 0's padding
    std::map<std::string, Tensor> inputs = {{"q", kernel_test::random_tensor(c.t, c.q, 42)},
                                            {"kt", kernel_test::random_tensor(c.t, {b, g, d, s}, 43)},
                                            {"v", kernel_test::random_tensor(c.t, {b, g, s, d}, 44)},
                                            {"mask", kernel_test::converted(mask, c.t)}};
    check_every_attention_kernel(this, fused, inputs, unfused);
  }
}

// Transformer-sized heads, where CUDA's tiled kernel runs (tensor cores for bf16 / f16):
// more query rows than its 64-row block, more keys than its 64-key tile, head sizes that
// are not a multiple of its 16-wide steps, value heads narrower than the query's, a padding
// mask with -inf; and a head wider than the tiled kernel takes (the warp-per-row kernel).
TEST_P(KernelSuite, FusedAttentionTransformerHeads) {
  struct Case { const char* name; Shape q, kt, v; std::vector<DType> dtypes; };
  const std::vector<DType> all = {DType::kF32, DType::kBF16, DType::kF16};
  // 200 keys: four key tiles, so CUDA's register-tiled kernel prefetches into a buffer
  // that an earlier tile used.
  for (const Case& c : {Case{"head 64", {2, 2, 70, 64}, {2, 2, 64, 90}, {2, 2, 90, 64}, all},
                        Case{"head 64, 200 keys", {1, 2, 70, 64}, {1, 2, 64, 200}, {1, 2, 200, 64}, {DType::kBF16, DType::kF32}},
                        // Llama's 32-wide heads: CUDA's f32 kernel has a 32-wide form.
                        Case{"head 32, 150 keys", {2, 2, 130, 32}, {2, 2, 32, 150}, {2, 2, 150, 32}, all},
                        Case{"head 80, value head 40", {1, 3, 33, 80}, {1, 3, 80, 40}, {1, 3, 40, 40}, all},
                        Case{"head 136", {1, 2, 9, 136}, {1, 2, 136, 12}, {1, 2, 12, 20}, {DType::kF32}}})
    for (DType t : c.dtypes) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(t)));
      const int64_t keys = c.kt.back();
      Tensor mask = kernel_test::random_tensor(DType::kF32, {c.q[0], 1, 1, keys}, 7);
      for (int64_t j = keys - 5; j < keys; ++j) mask.data<float>()[j] = -INFINITY;  // batch 0's padding
      check_attention(this, t, c.q, c.kt, c.v, {{"mask", kernel_test::converted(mask, t)}},
                      [&](GraphBuilder& b, ValueId s) {
                        Tensor root = kernel_test::converted(scalar(std::sqrt(float(c.q.back()))), t);
                        ValueId scaled = b.op("Div", {s, b.constant("root", root)});
                        return b.op("Softmax", {b.op("Add", {scaled, b.input("mask", t, {c.q[0], 1, 1, keys})})},
                                    int_attribute("axis", -1));
                      });
    }
}

// Rows with every key masked: NaN unguarded (as the unfused softmax gives), 0 with
// Attention's guard Where(IsNaN(p), 0, p); a Cast to f32 and back around the softmax (Llama).
TEST_P(KernelSuite, FusedAttentionFullyMaskedRows) {
  Tensor bias = x({4, 6}, 9);
  for (int64_t j = 0; j < 6; ++j) bias.data<float>()[6 + j] = -INFINITY;  // query row 1
  for (bool guard : {false, true}) {
    SCOPED_TRACE(guard ? "guarded" : "unguarded");
    check_attention(this, DType::kF32, {2, 4, 5}, {2, 5, 6}, {2, 6, 3}, {{"bias", bias}},
                    [&](GraphBuilder& b, ValueId s) {
                      ValueId biased = b.op("Add", {b.input("bias", DType::kF32, {4, 6}), s});
                      ValueId wide = b.op("Cast", {biased}, int_attribute("to", 1));
                      ValueId p = b.op("Cast", {b.op("Softmax", {wide})}, int_attribute("to", 1));
                      if (!guard) return p;
                      ValueId zero = b.constant("zero", scalar(0.0f));
                      return b.op("Where", {b.op("IsNaN", {p}), zero, p});
                    }, guard);
  }
}

// ---- FusedConv: a convolution and its activation, fused by the pass, vs the unfused reference --
// A pointwise conv over a channel slice runs as a matmul with the activation as its post-op;
// a 3x3 one as oneDNN's convolution with it (a residual as a binary post-op when its view is
// packed); either falls back to a separate pass.
TEST_P(KernelSuite, FusedConvWithActivation) {
  struct Case { const char* name; Shape w; };
  for (const Case& c : {Case{"pointwise", {6, 4, 1, 1}}, Case{"3x3", {6, 4, 3, 3}}})
    for (const char* activation : {"SiLU", "Relu", "Sigmoid", "Clip", "residual SiLU"}) {
      SCOPED_TRACE(std::string(c.name) + " " + activation);
      GraphBuilder b(17);
      AttributeMap pads = ints_attribute("pads", c.w[2] == 3 ? std::vector<int64_t>{1, 1, 1, 1} : std::vector<int64_t>{0, 0, 0, 0});
      ValueId y = b.op("Conv", {b.input("x", DType::kF32, {2, 4, 5, 6}), b.input("w", DType::kF32, c.w),
                                b.input("bias", DType::kF32, {6})}, pads);
      std::string act = activation;
      ValueId out = act == "SiLU"  ? b.op("Mul", {y, b.op("Sigmoid", {y})})
                    : act == "Clip" ? b.op("Clip", {y, b.constant("low", scalar(-0.5f)), b.constant("high", scalar(0.75f))})
                    : act == "residual SiLU"
                        ? b.op("Add", {b.input("residual", DType::kF32, {2, 6, 5, 6}), b.op("Mul", {y, b.op("Sigmoid", {y})})})
                        : b.op(act, {y});
      b.output(out);
      Graph unfused = b.build();  // SiLU is one FusedElementwise first
      Result<Graph> fused = fuse_once(unfused, [](Graph& g) { return fuse_conv_activations(g); });
      ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
      std::map<std::string, Tensor> inputs = {{"x", x({2, 4, 5, 6})}, {"w", x(c.w, 2)}, {"bias", x({6}, 3)}};
      if (act == "residual SiLU") inputs["residual"] = x({2, 6, 5, 6}, 4);
      check_graph(std::move(fused).value(), inputs, &unfused);
    }
}

// FusedConv with constant weights, as exported nets have them: on cuda each case runs with
// strider's own kernels forced (depthwise, direct: the program applied before they store,
// or after them as a map when it reads a residual) and with the libraries forced (cuDNN
// or cuBLASLt, then the program as a map over the output); in bf16 too where the program
// has no f32 constants. MobileNetV2's depthwise 3x3 + ReLU6, a 5x3 window + SiLU, a first
// layer + Relu, WaveNet's dilated 1-D layer + Sigmoid, a depthwise conv + residual SiLU.
TEST_P(KernelSuite, FusedConvOwnKernelsAndLibraries) {
  struct Case {
    const char* name;
    Shape x, w;
    int64_t group;
    std::vector<int64_t> pads, dilations;
    const char* activation;
  };
  const std::vector<Case> cases = {
      // ReLU6's Clip, its top at 0.6 so that these small random values reach it
      {"depthwise 3x3 ReLU6", {2, 6, 9, 8}, {6, 1, 3, 3}, 6, {1, 1, 1, 1}, {1, 1}, "ReLU6"},
      {"depthwise 5x3 SiLU", {1, 5, 11, 10}, {5, 1, 5, 3}, 5, {2, 1, 2, 1}, {1, 1}, "SiLU"},
      {"first layer Relu", {2, 3, 9, 10}, {5, 3, 3, 3}, 1, {1, 1, 1, 1}, {1, 1}, "Relu"},
      {"dilated 1-D Sigmoid", {2, 6, 20}, {12, 6, 2}, 1, {4, 0}, {4}, "Sigmoid"},
      {"depthwise residual SiLU", {2, 6, 9, 8}, {6, 1, 3, 3}, 6, {1, 1, 1, 1}, {1, 1}, "residual SiLU"},
      // What cuDNN's graph engines fuse on CUDA (bf16, channels-last, channels a multiple
      // of 8): MobileNetV2's 1x1 + ReLU6 (bounds in the input's dtype), a 3x3 + SiLU.
      {"pointwise 16->24 ReLU6 in its dtype", {2, 16, 6, 5}, {24, 16, 1, 1}, 1, {0, 0, 0, 0}, {1, 1}, "ReLU6 typed"},
      {"3x3 16->16 SiLU", {2, 16, 7, 6}, {16, 16, 3, 3}, 1, {1, 1, 1, 1}, {1, 1}, "SiLU"},
  };
  std::vector<DType> dtypes = {DType::kF32};
  std::vector<const char*> choices = {"timed"};
  // "cudnn-graph": its engines where they apply (bf16, packed channels-last), else timed.
  if (on_cuda()) dtypes.push_back(DType::kBF16), choices = {"own", "library", "cudnn-graph"};
  for (const char* choice : choices) {
    std::optional<kernel_test::ScopedEnvironment> forced;
    if (on_cuda()) forced.emplace("STRIDER_CUDA_KERNEL_CHOICE", choice);
    for (DType t : dtypes)
      for (const Case& c : cases) {
        const std::string act = c.activation;
        if (t != DType::kF32 && act == "ReLU6") continue;  // its bounds are f32 constants
        SCOPED_TRACE(fmt::format("{} {} {}", c.name, dtype_name(t), choice));
        GraphBuilder b(t == DType::kF32 ? 17 : 22);  // Conv takes bf16 from opset 22
        AttributeMap attrs = ints_attribute("pads", c.pads);
        attrs.set_ints("dilations", c.dilations);
        attrs.set_int("group", c.group);
        Tensor w = random_tensor(t, c.w, 2);
        ValueId y = b.op("Conv", {b.input("x", t, c.x), b.constant("w", w), b.constant("bias", random_tensor(t, {c.w[0]}, 3))},
                         attrs);
        ValueId out = act == "SiLU"    ? b.op("Mul", {y, b.op("Sigmoid", {y})})
                      : act == "ReLU6" ? b.op("Clip", {y, b.constant("low", scalar(0.0f)), b.constant("high", scalar(0.6f))})
                      : act == "ReLU6 typed"
                          ? b.op("Clip", {y, b.constant("low", scalar_of(t, 0.0f)), b.constant("high", scalar_of(t, 0.5f))})
                      : act == "residual SiLU"
                          ? b.op("Add", {b.input("residual", t, c.x), b.op("Mul", {y, b.op("Sigmoid", {y})})})
                          : b.op(act, {y});
        b.output(out);
        Graph unfused = b.build();
        Result<Graph> fused = fuse_once(unfused, [](Graph& g) { return fuse_conv_activations(g); });
        ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
        std::map<std::string, Tensor> inputs = {{"x", random_tensor(t, c.x, 1)}};
        if (act == "residual SiLU") inputs["residual"] = random_tensor(t, c.x, 4);
        check_graph(std::move(fused).value(), inputs, &unfused);
      }
  }
}

// 3x3 stride-1 f32 convolutions with constant weights and enough channels run as Winograd
// F(4x4, 3x3) on the CPU where the views are channels-inner (hal/cpu/winograd_conv.h): the
// channels-last layouts of the catalog. Edge tiles cut by the output's size, every pad
// shape, channel counts that leave a partial vector (36 in, 40 out), more tiles than one
// chunk (split over cpu-split's threads), and the activations it applies itself (SiLU,
// ReLU, sigmoid) or leaves to a pass of their own (Clip, a residual add). The weights are
// scaled by 1/sqrt(fan-in) as trained networks' are, so the convolution's result is of the
// order of its inputs, as is the activation's: the tolerance is relative to the output's
// magnitude, and with unscaled weights a sigmoid would squash a result of magnitude 18 to 1
// (Winograd's error is about 4e-6 of the convolution's magnitude, 5x the direct sum's:
// bench/winograd_bench). The Clip keeps most of that magnitude for the same reason.
TEST_P(KernelSuite, WinogradConvolutions) {
  const Shape x_shape = {2, 36, 19, 23}, w_shape = {40, 36, 3, 3};
  Tensor weights = x(w_shape, 2);
  for (int64_t i = 0; i < weights.num_elements(); ++i) weights.data<float>()[i] /= std::sqrt(36.0f * 9.0f);
  for (const std::vector<int64_t>& pads : {std::vector<int64_t>{1, 1, 1, 1}, {0, 0, 0, 0}, {2, 0, 1, 2}})
    for (const char* activation : {"none", "SiLU", "Relu", "Sigmoid", "Clip", "residual SiLU"}) {
      SCOPED_TRACE(fmt::format("pads {} {}", fmt::join(pads, ","), activation));
      GraphBuilder b(17);
      ValueId y = b.op("Conv", {b.input("x", DType::kF32, x_shape), b.constant("w", weights),
                                b.constant("bias", x({40}, 3))},
                       ints_attribute("pads", pads));
      const std::string act = activation;
      const Shape y_shape = {2, 40, 19 + pads[0] + pads[2] - 2, 23 + pads[1] + pads[3] - 2};
      ValueId out = act == "none"   ? y
                    : act == "SiLU" ? b.op("Mul", {y, b.op("Sigmoid", {y})})
                    : act == "Clip" ? b.op("Clip", {y, b.constant("low", scalar(-1.5f)), b.constant("high", scalar(2.5f))})
                    : act == "residual SiLU"
                        ? b.op("Add", {b.input("residual", DType::kF32, y_shape), b.op("Mul", {y, b.op("Sigmoid", {y})})})
                        : b.op(act, {y});
      b.output(out);
      Graph unfused = b.build();
      ASSERT_TRUE(infer_and_fold(unfused).is_ok());
      Graph fused = unfused;
      ASSERT_TRUE(fuse_elementwise(fused).is_ok());
      ASSERT_TRUE(fuse_conv_activations(fused).is_ok());
      std::map<std::string, Tensor> inputs = {{"x", x(x_shape)}};
      if (act == "residual SiLU") inputs["residual"] = x(y_shape, 4);
      check_graph(std::move(fused), inputs, &unfused);
    }
}

// A Winograd layer of few tiles (a 17x18 map: 25) and many output channels (200: 13 blocks
// of 16, the last partial): on cpu and cpu-split each thread takes a slice of 64 or more
// output channels of every tile (winograd_conv.cc, plan_work); the 36 -> 40 layers above
// split their tiles instead.
TEST_P(KernelSuite, WinogradConvolutionsSlicedOverOutputChannels) {
  const Shape x_shape = {1, 36, 17, 18}, w_shape = {200, 36, 3, 3};
  Tensor weights = x(w_shape, 2);
  for (int64_t i = 0; i < weights.num_elements(); ++i) weights.data<float>()[i] /= std::sqrt(36.0f * 9.0f);
  for (const char* activation : {"none", "SiLU"}) {
    SCOPED_TRACE(activation);
    GraphBuilder b(17);
    ValueId y = b.op("Conv", {b.input("x", DType::kF32, x_shape), b.constant("w", weights), b.constant("bias", x({200}, 3))},
                     ints_attribute("pads", {1, 1, 1, 1}));
    b.output(std::string(activation) == "SiLU" ? b.op("Mul", {y, b.op("Sigmoid", {y})}) : y);
    Graph unfused = b.build();
    ASSERT_TRUE(infer_and_fold(unfused).is_ok());
    Graph fused = unfused;
    ASSERT_TRUE(fuse_elementwise(fused).is_ok());
    ASSERT_TRUE(fuse_conv_activations(fused).is_ok());
    check_graph(std::move(fused), {{"x", x(x_shape)}}, &unfused);
  }
}

// Convolutions the CPU cuts into bands, one oneDNN primitive a band (hal/cpu/conv_kernels.cc's
// BandedConv; on cpu-split three threads and a lowered minimum work, so even these small
// ones are cut, in bands not divisible by three): bands of output rows of one image over
// packed channels-last views (depthwise and 1x1 as under OpenMP's team, 3x3 and 1-D under
// strider's own), bands of images, and bands of output channels, or of groups, of
// channels-first views (the catalog's dense layout). Each band's input rows and pads must match its outputs exactly,
// through strides, asymmetric and wide pads, dilation, bf16, and residual operands cut with
// the output (a per-channel one, broadcast along the rows, is not cut along them).
TEST_P(KernelSuite, ConvolutionsInBands) {
  struct Case {
    const char* name;
    Shape x, w;
    std::vector<int64_t> pads, strides, dilations;
    int64_t group = 1;
    DType dtype = DType::kF32;
    const char* residual = nullptr;  // "full" (the output's shape) or "channels" ({1, C, 1, 1})
  };
  const std::vector<Case> cases = {
      {"depthwise 3x3 stride 2, pads 1 1 2 0", {1, 8, 23, 10}, {8, 1, 3, 3}, {1, 1, 2, 0}, {2, 2}, {1, 1}, 8},
      {"depthwise 5x5 dilated 2, pads 4", {1, 6, 14, 9}, {6, 1, 5, 5}, {4, 4, 4, 4}, {1, 1}, {2, 2}, 6},
      {"depthwise 3x3", {1, 16, 13, 12}, {16, 1, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 16},
      {"depthwise 3x3 bf16", {1, 8, 17, 9}, {8, 1, 3, 3}, {0, 1, 2, 1}, {1, 1}, {1, 1}, 8, DType::kBF16},
      {"1x1 stride 2", {1, 8, 25, 9}, {12, 8, 1, 1}, {0, 0, 0, 0}, {2, 2}, {1, 1}},
      {"1x1 + residual + Relu", {1, 8, 13, 7}, {8, 8, 1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, DType::kF32, "full"},
      {"1x1 + per-channel + Relu", {1, 8, 13, 7}, {8, 8, 1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, DType::kF32, "channels"},
      {"3x3 over 5 images", {5, 6, 9, 7}, {8, 6, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}},
      {"3x3 stride 2 over 4 images + residual", {4, 6, 10, 9}, {6, 6, 3, 3}, {1, 0, 1, 1}, {2, 2}, {1, 1}, 1, DType::kF32, "full"},
      {"1-D kernel 3 dilated 2 over 31 steps", {1, 8, 31}, {12, 8, 3}, {2, 2}, {1}, {2}},
      {"1-D kernel 2 stride 2 + residual", {1, 8, 29}, {8, 8, 2}, {1, 0}, {2}, {1}, 1, DType::kF32, "full"},
      {"3x3 of 28 output channels", {1, 5, 8, 9}, {28, 5, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}},
      {"1x1 of 26 output channels + residual", {1, 6, 7, 5}, {26, 6, 1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, DType::kF32, "full"},
      {"depthwise 3x3 of 27 channels", {1, 27, 6, 5}, {27, 1, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 27},
      {"3x3 of 25 groups of 2 -> 3 + per-channel", {1, 50, 5, 6}, {75, 2, 3, 3}, {1, 0, 1, 2}, {1, 1}, {1, 1}, 25, DType::kF32, "channels"},
      // Weights outweighing the activations: channels-last bands of output channels, each
      // run into dense memory of its own and copied into its channel slice.
      {"1x1 256 -> 96 over 6x2 + residual", {1, 256, 6, 2}, {96, 256, 1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, DType::kF32, "full"},
      {"3x3 32 -> 96 over 4x3", {1, 32, 4, 3}, {96, 32, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}},
      {"3x3 32 -> 96 over 4x3 + residual", {1, 32, 4, 3}, {96, 32, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, DType::kF32, "full"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const DType t = c.dtype;
    GraphBuilder b(22);  // bf16 Conv
    AttributeMap attrs = ints_attribute("pads", c.pads);
    attrs.set_ints("strides", c.strides);
    attrs.set_ints("dilations", c.dilations);
    attrs.set_int("group", c.group);
    Tensor weights = x(c.w, 2);
    for (int64_t i = 0; i < weights.num_elements(); ++i) weights.data<float>()[i] /= 4.0f;
    ValueId y = b.op("Conv", {b.input("x", t, c.x), b.constant("w", kernel_test::converted(weights, t)),
                              b.constant("bias", kernel_test::converted(x({c.w[0]}, 3), t))}, attrs);
    std::map<std::string, Tensor> inputs = {{"x", kernel_test::converted(x(c.x), t)}};
    if (c.residual) {
      Shape r(c.x.size(), 1);  // per channel: {1, C, 1, ...}
      r[1] = c.w[0];
      const size_t spatial = c.strides.size();
      for (size_t d = 2; std::string_view(c.residual) == "full" && d < r.size(); ++d) {
        r[0] = c.x[0];
        r[d] = (c.x[d] + c.pads[d - 2] + c.pads[d - 2 + spatial] - c.dilations[d - 2] * (c.w[d] - 1) - 1) / c.strides[d - 2] + 1;
      }
      inputs["r"] = kernel_test::converted(x(r, 4), t);
      y = b.op("Relu", {b.op("Add", {y, b.input("r", t, r)})});
    }
    b.output(y);
    Graph unfused = b.build();
    ASSERT_TRUE(infer_and_fold(unfused).is_ok());
    Graph fused = unfused;
    ASSERT_TRUE(fuse_elementwise(fused).is_ok());
    ASSERT_TRUE(fuse_conv_activations(fused).is_ok());
    // Bands of rows need packed channels-last views (oneDNN runs padded ones, and bands of
    // channels-first ones, on its reference code): a channels-last plan's own values,
    // besides the catalog's layout.
    kernel_test::check_node(*device_, fused, inputs, kernel_test::ViewLayout::kPackedChannelsLast, &unfused);
    check_graph(std::move(fused), inputs, &unfused);
  }
}

// A pointwise convolution and the depthwise one that alone reads it, folded into one
// FusedPointwiseDepthwise node (passes/fuse_conv_chain.h; a session folds only where the
// device says it pays, the test always): the CPU runs it in bands whose expanded rows live
// in scratch (hal/cpu/conv_chain_kernel.cc; on cpu-split bands of one output row, so each
// band moves the rows its window shares with the last and computes the rest, over three
// chains), else the two convolutions whole. Each band's rows, pads and carried rows must
// match the unfused pair's exactly: strides 1 and 2, 3x3 and 5x5, asymmetric pads, with and
// without activations, two images, bf16. Devices without the kernel (cuda) skip.
TEST_P(KernelSuite, PointwiseThenDepthwiseInBands) {
  struct Case {
    const char* name;
    Shape x;
    int64_t expanded, kernel, stride;
    std::vector<int64_t> pads;
    const char* pointwise_activation;  // "Clip" (ReLU6), "Relu" or none
    const char* depthwise_activation;
    DType dtype = DType::kF32;
  };
  const std::vector<Case> cases = {
      {"6 -> 24, 3x3 stride 2, ReLU6 both", {1, 6, 13, 11}, 24, 3, 2, {1, 1, 1, 1}, "Clip", "Clip"},
      {"8 -> 16, 3x3 stride 1, Relu then none", {1, 8, 10, 7}, 16, 3, 1, {1, 1, 1, 1}, "Relu", nullptr},
      {"5 -> 20, 5x5 stride 2, pads 2 2 1 2, none then Clip", {1, 5, 15, 9}, 20, 5, 2, {2, 2, 1, 2}, nullptr, "Clip"},
      {"4 -> 16, 3x3 stride 1, pads 0 1 2 1, two images", {2, 4, 9, 6}, 16, 3, 1, {0, 1, 2, 1}, "Clip", "Clip"},
      {"8 -> 32, 3x3 stride 2, bf16", {1, 8, 12, 10}, 32, 3, 2, {1, 1, 1, 1}, "Clip", "Clip", DType::kBF16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const DType t = c.dtype;
    GraphBuilder b(22);
    int clips = 0;
    auto activation = [&](ValueId v, const char* op) {
      if (!op) return v;
      if (std::string_view(op) == "Relu") return b.op("Relu", {v});
      ++clips;
      return b.op("Clip", {v, b.constant(fmt::format("lo{}", clips), kernel_test::converted(scalar(0.0f), t)),
                           b.constant(fmt::format("hi{}", clips), kernel_test::converted(scalar(6.0f), t))});
    };
    auto weights = [&](const Shape& shape, uint32_t seed) {
      Tensor w = x(shape, seed);
      for (int64_t i = 0; i < w.num_elements(); ++i) w.data<float>()[i] /= 3.0f;
      return kernel_test::converted(w, t);
    };
    ValueId e = b.op("Conv", {b.input("x", t, c.x), b.constant("w1", weights({c.expanded, c.x[1], 1, 1}, 2)),
                              b.constant("b1", kernel_test::converted(x({c.expanded}, 3), t))});
    AttributeMap attrs = ints_attribute("pads", c.pads);
    attrs.set_ints("strides", {c.stride, c.stride});
    attrs.set_int("group", c.expanded);
    ValueId y = b.op("Conv", {activation(e, c.pointwise_activation), b.constant("w2", weights({c.expanded, 1, c.kernel, c.kernel}, 4)),
                              b.constant("b2", kernel_test::converted(x({c.expanded}, 5), t))}, attrs);
    b.output(activation(y, c.depthwise_activation));
    Graph unfused = b.build();
    ASSERT_TRUE(infer_and_fold(unfused).is_ok());
    Graph fused = unfused;
    ASSERT_TRUE(fuse_conv_activations(fused).is_ok());
    Result<int> chains = fuse_pointwise_depthwise(fused, [](int64_t) { return true; });
    ASSERT_TRUE(chains.is_ok() && *chains == 1) << (chains.is_ok() ? "" : chains.status().to_string());
    if (!device_->has_kernel(kFusedPointwiseDepthwiseOp)) GTEST_SKIP() << device_->name() << " has no kernel for it";
    const std::map<std::string, Tensor> inputs = {{"x", kernel_test::converted(x(c.x), t)}};
    kernel_test::check_node(*device_, fused, inputs, kernel_test::ViewLayout::kPackedChannelsLast, &unfused);
    check_graph(std::move(fused), inputs, &unfused);
  }
}

// Products the CPU cuts into pieces under its own team (hal/cpu/matmul_kernels.cc's
// BandedMatMul; on cpu-split three pieces, none dividing the sizes): rows when A is the
// larger operand, columns when B is (pieces of a dense output run into scratch of their own
// and are copied out), the leading batch dim; constant weights (reordered once and shared
// by pieces of rows), a Gemm's bias and alpha, and a residual added by the product's
// epilogue.
TEST_P(KernelSuite, ProductsInPieces) {
  struct Case {
    const char* name;
    Shape a, b;
    bool constant_b;
  };
  const std::vector<Case> cases = {
      {"rows", {40, 16}, {16, 12}, false},     {"rows, constant B", {2, 25, 16}, {16, 12}, true},
      {"columns", {7, 20}, {20, 61}, true},    {"columns, runtime B", {7, 20}, {20, 61}, false},
      {"batch", {5, 9, 6}, {5, 6, 10}, false},
  };
  for (const Case& c : cases) {
    for (const char* form : {"MatMul", "Gemm", "MatMul + residual"}) {
      const std::string f = form;
      if (f == "Gemm" && c.a.size() != 2) continue;
      SCOPED_TRACE(fmt::format("{}, {}", c.name, form));
      Shape out = c.a;
      out.back() = c.b.back();
      GraphBuilder g;
      ValueId w = c.constant_b ? g.constant("w", x(c.b, 2)) : g.input("w", DType::kF32, c.b);
      std::map<std::string, Tensor> inputs = {{"a", x(c.a)}};
      if (!c.constant_b) inputs["w"] = x(c.b, 2);
      ValueId y;
      if (f == "Gemm") {
        AttributeMap attrs;
        attrs.set_float("alpha", 0.5f);
        y = g.op("Gemm", {g.input("a", DType::kF32, c.a), w, g.constant("c", x({c.b.back()}, 3))}, attrs);
      } else {
        y = g.op("MatMul", {g.input("a", DType::kF32, c.a), w});
      }
      if (f == "MatMul + residual") {
        inputs["r"] = x(out, 4);
        y = g.op("Add", {y, g.input("r", DType::kF32, out)});
      }
      g.output(y);
      Graph unfused = g.build();
      ASSERT_TRUE(infer_and_fold(unfused).is_ok());
      Graph fused = unfused;
      ASSERT_TRUE(fuse_elementwise(fused).is_ok());
      ASSERT_TRUE(fuse_matmul_epilogues(fused).is_ok());
      check_graph(std::move(fused), inputs, &unfused);
    }
  }
  // A 1x1 convolution over channel slices is a product over [pixels, channels] views whose
  // rows are strided: each piece of rows runs into scratch of its own and copies its rows
  // out (the catalog's channel-slice layouts).
  GraphBuilder g;
  g.output(g.op("Conv", {g.input("x", DType::kF32, {1, 16, 9, 7}), g.constant("w", x({24, 16, 1, 1}, 2)),
                         g.constant("bias", x({24}, 3))}));
  Graph conv = g.build();
  ASSERT_TRUE(infer_and_fold(conv).is_ok());
  Graph reference = conv;
  check_graph(std::move(conv), {{"x", x({1, 16, 9, 7})}}, &reference);
}

// The gate of WaveNet-style units, tanh(a) * sigmoid(b) + residual, which the CPU runs as
// one gated row (hal/cpu/vector_math.h), over long runs (computed where they lie), short
// strided ones (gathered) and channel slices (the rows path); and with tanh's result read
// twice, where the three instructions run one by one.
TEST_P(KernelSuite, FusedGatedActivation) {
  for (bool tanh_read_twice : {false, true}) {
    SCOPED_TRACE(tanh_read_twice ? "tanh read twice" : "gate");
    GraphBuilder b(17);
    const Shape shape = {2, 24, 3, 50};
    ValueId t = b.op("Tanh", {b.input("a", DType::kF32, shape)});
    ValueId gate = b.op("Mul", {t, b.op("Sigmoid", {b.input("b", DType::kF32, shape)})});
    ValueId out = b.op("Add", {b.input("c", DType::kF32, shape), gate});
    b.output(tanh_read_twice ? b.op("Add", {out, t}) : out);
    Graph unfused = b.build();
    ASSERT_TRUE(infer_and_fold(unfused).is_ok());
    Graph fused = unfused;
    ASSERT_TRUE(fuse_elementwise(fused).is_ok());
    Tensor a = x(shape, 1);
    for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] *= 4.0f;  // tanh's flat ends too
    check_graph(std::move(fused), {{"a", a}, {"b", x(shape, 2)}, {"c", x(shape, 3)}}, &unfused);
  }
}

// A fused program whose operands are broadcast along the innermost run (a scalar constant,
// a per-row input [2, 1]): runs of 300 (computed where they lie, the broadcast rows filled)
// and, in the catalog's strided layouts, shorter runs gathered into tiles.
TEST_P(KernelSuite, FusedProgramWithBroadcastOperands) {
  GraphBuilder b(17);
  ValueId a = b.input("a", DType::kF32, {3, 2, 300});
  ValueId shifted = b.op("Add", {a, b.constant("shift", scalar(1.5f))});
  ValueId scaled = b.op("Mul", {shifted, b.input("row", DType::kF32, {2, 1})});
  b.output(b.op("Sub", {b.op("Sigmoid", {scaled}), b.constant("half", scalar(0.5f))}));
  Graph unfused = b.build();
  ASSERT_TRUE(infer_and_fold(unfused).is_ok());
  Graph fused = unfused;
  ASSERT_TRUE(fuse_elementwise(fused).is_ok());
  int programs = 0;
  for (NodeId n = 0; n < fused.num_nodes(); ++n) programs += fused.node(n).op_type == kFusedElementwiseOp;
  ASSERT_EQ(programs, 1);
  check_graph(std::move(fused), {{"a", x({3, 2, 300})}, {"row", x({2, 1}, 2)}}, &unfused);
}

// ---- FusedMatMul: a MatMul and its epilogue, fused by the pass, vs the unfused reference --
// Each epilogue either maps onto oneDNN's post-ops (bias, erf GELU grouped both ways, tanh
// GELU, SiLU times an operand, a residual add, a scale, Relu) or runs as the matmul then a
// pass (a value read twice). On CUDA the adds of a bias row and of a residual run inside
// cuBLASLt (its bias epilogue and C, in either order), anything else as one map over the
// output after it; there the cases without f32 constants run in bf16 too.
TEST_P(KernelSuite, FusedMatMulEpilogues) {
  const float kSqrt2 = std::sqrt(2.0f);
  using Epilogue = std::function<ValueId(GraphBuilder&, ValueId, DType)>;
  struct Case {
    const char* name;
    bool constants;  // holds f32 constants (f32 only)
    Epilogue epilogue;
  };
  std::vector<Case> cases = {
      {"bias", false, [](GraphBuilder& b, ValueId y, DType t) { return b.op("Add", {y, b.input("bias", t, {6})}); }},
      {"bias then erf GELU", true, [&](GraphBuilder& b, ValueId y, DType t) {
         ValueId s = b.op("Add", {b.input("bias", t, {6}), y});
         ValueId e = b.op("Erf", {b.op("Div", {s, b.constant("sqrt2", scalar(kSqrt2))})});
         ValueId p = b.op("Add", {e, b.constant("one", scalar(1.0f))});
         return b.op("Mul", {b.op("Mul", {s, p}), b.constant("half", scalar(0.5f))});
       }},
      {"GELU, the half first", true, [&](GraphBuilder& b, ValueId y, DType) {
         ValueId e = b.op("Erf", {b.op("Mul", {y, b.constant("rsqrt2", scalar(1.0f / kSqrt2))})});
         ValueId p = b.op("Mul", {b.constant("half", scalar(0.5f)), b.op("Add", {b.constant("one", scalar(1.0f)), e})});
         return b.op("Mul", {y, p});
       }},
      {"bias, residual", false, [](GraphBuilder& b, ValueId y, DType t) {
         ValueId s = b.op("Add", {y, b.input("bias", t, {6})});
         return b.op("Add", {b.input("residual", t, {2, 5, 6}), s});
       }},
      {"residual, bias row", false, [](GraphBuilder& b, ValueId y, DType t) {
         ValueId s = b.op("Add", {b.input("residual", t, {2, 5, 6}), y});
         return b.op("Add", {s, b.input("bias", t, {1, 6})});
       }},
      {"residual (Llama)", false, [](GraphBuilder& b, ValueId y, DType t) {
         return b.op("Add", {b.input("residual", t, {2, 5, 6}), y});
       }},
      {"residual broadcast over the batch", false, [](GraphBuilder& b, ValueId y, DType t) {
         return b.op("Add", {y, b.input("residual", t, {5, 6})});
       }},
      {"scale, relu", false, [](GraphBuilder& b, ValueId y, DType t) {
         return b.op("Relu", {b.op("Mul", {y, b.input("scale", t, {5, 1})})});
       }},
      {"bias then tanh GELU (GPT-2)", true, [](GraphBuilder& b, ValueId y, DType t) {
         ValueId s = b.op("Add", {b.input("bias", t, {6}), y});
         ValueId cube = b.op("Mul", {s, b.op("Mul", {s, s})});
         ValueId inner = b.op("Add", {s, b.op("Mul", {b.constant("k", scalar(0.044715f)), cube})});
         ValueId th = b.op("Tanh", {b.op("Mul", {b.constant("c", scalar(std::sqrt(2.0f / float(M_PI)))), inner})});
         return b.op("Mul", {b.constant("half", scalar(0.5f)), b.op("Mul", {s, b.op("Add", {b.constant("one", scalar(1.0f)), th})})});
       }},
      {"SiLU gate times up (Llama)", false, [](GraphBuilder& b, ValueId y, DType t) {
         return b.op("Mul", {b.op("Mul", {y, b.op("Sigmoid", {y})}), b.input("residual", t, {2, 5, 6})});
       }},
      {"read twice (no post-op)", false, [](GraphBuilder& b, ValueId y, DType) {
         return b.op("Mul", {b.op("Tanh", {y}), y});
       }},
  };
  std::vector<DType> dtypes = {DType::kF32};
  if (on_cuda()) dtypes.push_back(DType::kBF16);
  for (DType t : dtypes)
    for (const Case& c : cases) {
      if (t != DType::kF32 && c.constants) continue;
      SCOPED_TRACE(fmt::format("{} {}", c.name, dtype_name(t)));
      GraphBuilder b(17);
      ValueId y = b.op("MatMul", {b.input("a", t, {2, 5, 4}), b.input("w", t, {4, 6})});
      b.output(c.epilogue(b, y, t));
      Graph unfused = b.build();
      Result<Graph> fused = fuse_once(unfused, [](Graph& g) { return fuse_matmul_epilogues(g); });
      ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
      std::map<std::string, Tensor> inputs = {{"a", random_tensor(t, {2, 5, 4}, 1)}, {"w", random_tensor(t, {4, 6}, 2)}};
      uint32_t seed = 3;
      for (const char* extra : {"bias", "residual", "scale"})
        if (auto v = unfused.find_value(extra)) inputs[extra] = random_tensor(t, unfused.value(*v).shape, seed++);
      check_graph(std::move(fused).value(), inputs, &unfused);
    }
}

}  // namespace
}  // namespace strider
