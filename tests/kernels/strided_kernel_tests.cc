// Every CPU kernel on views that are not dense: permuted (channels-last style) with padded
// strides and a storage offset, and reversed (negative stride) — for inputs and for the
// output, which lies inside a larger poisoned buffer. Each result must match the float64
// reference, and no byte of the buffer outside the output's elements may change.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "check/compare.h"
#include "hal/cpu/copy.h"
#include "hal/cpu/cpu_kernels.h"
#include "ir/builder.h"
#include "ops/elementwise_params.h"
#include "ops/op_registry.h"
#include "reference/reference.h"

namespace strider {
namespace {

enum class Layout { kDense, kPermutedPadded, kReversed };
constexpr uint8_t kPoison = 0xA5;

// Host memory for one view, poisoned, with an Allocation that describes it.
struct Buffer {
  std::vector<std::byte> bytes;
  std::unique_ptr<Allocation> allocation;
  explicit Buffer(int64_t size)
      : bytes(size_t(size), std::byte{kPoison}),
        allocation(std::make_unique<Allocation>(7, "test", "cpu", bytes.data(), size, 64, StorageMode::kHost, true)) {}
};

// A view with the given logical sizes in `layout`, inside a fresh buffer.
TensorView make_layout_view(DType dtype, const Shape& sizes, Layout layout, std::vector<std::unique_ptr<Buffer>>& keep) {
  size_t rank = sizes.size();
  Strides strides(rank);
  int64_t offset = 0, span = 1;
  if (layout == Layout::kPermutedPadded) {
    // Innermost storage dim is logical dim 1 (channels-last for NCHW), others in reverse
    // order; every dim padded by one element; the view starts 3 elements in.
    std::vector<size_t> order;
    if (rank > 1) order.push_back(1);
    for (size_t d = rank; d-- > 0;)
      if (d != 1 || rank == 1) order.push_back(d);
    for (size_t d : order) {
      strides[d] = span;
      span *= sizes[d] + 1;
    }
    offset = 3;
  } else {
    strides = contiguous_strides(sizes);
    span = std::max<int64_t>(num_elements(sizes), 1);
    if (layout == Layout::kReversed) {
      for (size_t d = 0; d < rank; ++d)
        if (sizes[d] > 1) {  // reverse the outermost non-trivial dim
          offset = (sizes[d] - 1) * strides[d];
          strides[d] = -strides[d];
          break;
        }
    }
  }
  int64_t esize = dtype_size(dtype);
  keep.push_back(std::make_unique<Buffer>((span + 8) * esize));
  auto view = make_view(*keep.back()->allocation, offset * esize, dtype, sizes, strides, "test view");
  EXPECT_TRUE(view.is_ok()) << view.status().to_string();
  return *view;
}

std::vector<double> download(const TensorView& view) {
  Tensor dense(view.dtype, view.sizes);
  Strides strides = contiguous_strides(view.sizes);
  cpu::copy_strided(view.sizes, dense.bytes(), strides.data(), view.host_data(), view.strides.data(),
                    dtype_size(view.dtype));
  std::vector<double> v;
  for (int64_t i = 0; i < dense.num_elements(); ++i) v.push_back(dense.element_as_double(i));
  return v;
}

// Bytes of `buffer` that hold elements of `view`.
std::set<int64_t> element_bytes(const TensorView& view) {
  std::set<int64_t> bytes;
  Shape index(view.sizes.size(), 0);
  for (int64_t i = 0; i < view.num_elements(); ++i) {
    int64_t offset = view.byte_offset;
    for (size_t d = 0; d < index.size(); ++d) offset += index[d] * view.strides[d] * dtype_size(view.dtype);
    for (int64_t b = 0; b < dtype_size(view.dtype); ++b) bytes.insert(offset + b);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < view.sizes[d]) break;
      index[d] = 0;
    }
  }
  return bytes;
}

Tensor random_tensor(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kF32) t.data<float>()[i] = normal(rng);
    else if (dtype == DType::kF64) t.data<double>()[i] = normal(rng);
    else if (dtype == DType::kI64) t.data<int64_t>()[i] = int64_t(rng() % 3);
    else if (dtype == DType::kBool) t.data<uint8_t>()[i] = uint8_t(rng() & 1);
    else if (dtype == DType::kI8) t.data<int8_t>()[i] = int8_t(int(rng() % 200) - 90);
  }
  return t;
}

// Runs the graph's single node on views in `layout` and checks it against the reference.
void check_node(Graph graph, const std::map<std::string, Tensor>& inputs, Layout layout) {
  ASSERT_EQ(graph.num_nodes(), 1);
  InferContext context(graph, 0);
  Node& node = graph.node(0);
  ASSERT_TRUE(find_op_schema("", node.op_type)->infer(context).is_ok());
  auto expected = evaluate_reference(graph, inputs);
  ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
  std::vector<std::unique_ptr<Buffer>> buffers;
  KernelRequest request{graph, node, {}, {}};
  for (ValueId id : node.inputs) {
    if (id == kNoValue) {
      request.inputs.emplace_back();
      continue;
    }
    const Value& v = graph.value(id);
    const Tensor& value = v.is_constant() ? *v.constant : inputs.at(v.name);
    TensorView view = make_layout_view(v.dtype, v.shape, v.is_constant() ? Layout::kDense : layout, buffers);
    Strides dense = contiguous_strides(v.shape);
    cpu::copy_strided(v.shape, view.host_data(), view.strides.data(), value.bytes(), dense.data(), dtype_size(v.dtype));
    request.inputs.push_back(view);
  }
  for (ValueId id : node.outputs)
    request.outputs.push_back(make_layout_view(graph.value(id).dtype, graph.value(id).shape, layout, buffers));
  auto kernel = cpu::create_kernel(request);
  // A fast kernel may refuse views only a slow path could take (the planner then packs
  // them); packed operands must always be accepted.
  bool packed = true;
  for (const auto* views : {&request.inputs, &request.outputs})
    for (const TensorView& v : *views) packed &= !v.allocation || is_packed(v);
  if (!kernel.is_ok() && kernel.status().code() == StatusCode::kUnsupported && !packed) return;
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
  ASSERT_TRUE((*kernel)->run(QueueContext{}).is_ok());
  for (size_t i = 0; i < request.outputs.size(); ++i) {
    const TensorView& out = request.outputs[i];
    std::vector<double> reference;
    for (int64_t k = 0; k < expected->outputs[i].num_elements(); ++k)
      reference.push_back(expected->outputs[i].element_as_double(k));
    Comparison c = compare_values(download(out), reference, {1e-5, 1e-6, 0.99999}, !is_floating(out.dtype));
    EXPECT_TRUE(c.passed) << node.op_type << " output " << i << ": " << c.reason;
    // Nothing outside the output's elements was written.
    std::set<int64_t> mine = element_bytes(out);
    const auto& bytes = buffers[buffers.size() - request.outputs.size() + i]->bytes;
    for (size_t b = 0; b < bytes.size(); ++b)
      if (!mine.count(int64_t(b))) ASSERT_EQ(uint8_t(bytes[b]), kPoison) << node.op_type << " wrote byte " << b;
  }
}

class StridedKernels : public ::testing::TestWithParam<Layout> {
 protected:
  void check(GraphBuilder& b, const std::map<std::string, Tensor>& inputs) {
    check_node(b.build(), inputs, GetParam());
  }
  Tensor x(const Shape& shape, uint32_t seed = 1) { return random_tensor(DType::kF32, shape, seed); }
};


TEST_P(StridedKernels, BinaryWithBroadcast) {
  GraphBuilder b;
  b.output(b.op("Add", {b.input("a", DType::kF32, {2, 3, 4, 5}), b.input("c", DType::kF32, {3, 1, 5})}));
  check(b, {{"a", x({2, 3, 4, 5})}, {"c", x({3, 1, 5}, 2)}});
}

TEST_P(StridedKernels, UnaryChain) {
  for (const char* op : {"Sigmoid", "Tanh", "Relu", "HardSwish", "Exp", "Abs", "Neg", "Erf"}) {
    GraphBuilder b;
    b.output(b.op(op, {b.input("a", DType::kF32, {2, 5, 3, 4})}));
    check(b, {{"a", x({2, 5, 3, 4})}});
  }
}

// Inputs inside an op's domain (Log of a positive, Acosh of at least 1, Atanh inside
// (-1, 1)); IsNaN and IsInf get NaN and both infinities among the values.
Tensor domain_input(std::string_view op, DType dtype, const Shape& shape, uint32_t seed) {
  Tensor t = random_tensor(dtype, shape, seed);
  if (dtype != DType::kF32) return t;
  float* v = t.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (op == "Log" || op == "Sqrt") v[i] = std::fabs(v[i]) + 0.1f;
    if (op == "Acosh") v[i] = std::fabs(v[i]) + 1.0f;
    if (op == "Asin" || op == "Acos" || op == "Atanh") v[i] = 0.9f * std::tanh(v[i]);
    if ((op == "IsNaN" || op == "IsInf") && i % 7 < 3)
      v[i] = i % 7 == 0 ? NAN : (i % 7 == 1 ? INFINITY : -INFINITY);
  }
  return t;
}

// Every row of the elementwise table (ops/elementwise_math.h) whose kernel the devices make
// from its functor, on each of its kinds' dtypes (f32, and int8 for the numeric ones).
TEST_P(StridedKernels, EveryElementwiseTableOp) {
  for (int code = 0; code < kElementwiseOpCount; ++code) {
    const ElementwiseOp op = ElementwiseOp(code);
    if (elementwise_kernel(op) != ElementwiseKernel::kMap) continue;
    const ElementwiseKind kind = elementwise_kind(op);
    const std::string name(elementwise_op_name(op));
    const bool logic = kind == ElementwiseKind::kLogicUnary || kind == ElementwiseKind::kLogicBinary;
    const bool numeric = kind == ElementwiseKind::kNumericUnary || kind == ElementwiseKind::kNumericBinary;
    std::vector<DType> dtypes = logic ? std::vector<DType>{DType::kBool} : std::vector<DType>{DType::kF32};
    if (numeric || kind == ElementwiseKind::kCompare) dtypes.push_back(DType::kI8);
    for (DType dtype : dtypes) {
      SCOPED_TRACE(name + " on " + std::string(dtype_name(dtype)));
      GraphBuilder b(24);
      AttributeMap attrs;
      if (name == "Mod") attrs.set_int("fmod", dtype == DType::kF32 ? 1 : 0);
      std::map<std::string, Tensor> inputs = {{"a", domain_input(name, dtype, {2, 3, 4, 5}, 1)}};
      std::vector<ValueId> operands = {b.input("a", dtype, {2, 3, 4, 5})};
      if (elementwise_arity(kind) == 2) {
        Tensor second = domain_input(name, dtype, {3, 1, 5}, 2);
        if ((name == "Div" || name == "Mod") && dtype == DType::kI8)  // no integer division by 0
          for (int64_t i = 0; i < second.num_elements(); ++i)
            second.data<int8_t>()[i] = int8_t(second.data<int8_t>()[i] >= 0 ? second.data<int8_t>()[i] % 50 + 1
                                                                             : second.data<int8_t>()[i] % 50 - 1);
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
TEST_P(StridedKernels, ReduceMaxAndMinOfInfiniteRows) {
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    SCOPED_TRACE(op);
    Tensor t = x({3, 4, 5});
    for (int64_t i = 0; i < 5; ++i) t.data<float>()[5 + i] = std::string(op) == "ReduceMax" ? -INFINITY : INFINITY;
    GraphBuilder b;
    b.output(b.op(op, {b.input("a", DType::kF32, {3, 4, 5})}, ints_attribute("axes", {2})));
    check(b, {{"a", t}});
  }
}

TEST_P(StridedKernels, MatMulBatchedAndGemmTransposed) {
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
TEST_P(StridedKernels, NaiveMatMulAndConvOnF64) {
  GraphBuilder b;
  b.output(b.op("MatMul", {b.input("a", DType::kF64, {2, 6, 7}), b.input("w", DType::kF64, {7, 5})}));
  check(b, {{"a", random_tensor(DType::kF64, {2, 6, 7}, 1)}, {"w", random_tensor(DType::kF64, {7, 5}, 2)}});
  GraphBuilder c;
  AttributeMap attrs = ints_attribute("pads", {1, 0, 1, 2});
  attrs.set_int("group", 2);
  c.output(c.op("Conv", {c.input("x", DType::kF64, {2, 4, 7, 6}), c.input("w", DType::kF64, {6, 2, 3, 3})}, attrs));
  check(c, {{"x", random_tensor(DType::kF64, {2, 4, 7, 6}, 3)}, {"w", random_tensor(DType::kF64, {6, 2, 3, 3}, 4)}});
}

// A 1x1 convolution reading and writing channel slices of concat-like buffers runs as a
// matmul over the strided views, in both layouts, instead of being refused.
TEST(PointwiseConv, ReadsAndWritesChannelSlicesAsAMatmul) {
  for (bool channels_last : {false, true}) {
    std::vector<std::unique_ptr<Buffer>> buffers;
    auto slice_of = [&](int64_t channels, int64_t first, int64_t count) {
      Shape full = {2, channels, 5, 6};
      Strides strides = channels_last ? Strides{5 * 6 * channels, 1, 6 * channels, channels} : contiguous_strides(full);
      buffers.push_back(std::make_unique<Buffer>(2 * channels * 30 * 4));
      TensorView whole = *make_view(*buffers.back()->allocation, 0, DType::kF32, full, strides, "whole");
      return *slice_view(whole, 1, first, first + count, 1);
    };
    GraphBuilder b;
    b.output(b.op("Conv", {b.input("x", DType::kF32, {2, 8, 5, 6}), b.input("w", DType::kF32, {4, 8, 1, 1}),
                           b.input("bias", DType::kF32, {4})}));
    Graph g = b.build();
    InferContext context(g, 0);
    ASSERT_TRUE(find_op_schema("", "Conv")->infer(context).is_ok());
    std::map<std::string, Tensor> inputs = {{"x", random_tensor(DType::kF32, {2, 8, 5, 6}, 1)},
                                            {"w", random_tensor(DType::kF32, {4, 8, 1, 1}, 2)},
                                            {"bias", random_tensor(DType::kF32, {4}, 3)}};
    TensorView x = slice_of(16, 8, 8), y = slice_of(12, 4, 4);
    std::vector<TensorView> params;
    for (const char* name : {"w", "bias"}) {
      buffers.push_back(std::make_unique<Buffer>(int64_t(inputs[name].byte_size())));
      params.push_back(*make_dense_view(*buffers.back()->allocation, 0, DType::kF32, inputs[name].shape(), name));
      std::memcpy(params.back().host_data(), inputs[name].bytes(), inputs[name].byte_size());
    }
    Strides dense = contiguous_strides(x.sizes);
    cpu::copy_strided(x.sizes, x.host_data(), x.strides.data(), inputs["x"].bytes(), dense.data(), 4);
    auto kernel = cpu::create_kernel(KernelRequest{g, g.node(0), {x, params[0], params[1]}, {y}});
    ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
    EXPECT_NE((*kernel)->implementation().find("onednn"), std::string::npos);
    EXPECT_EQ((*kernel)->implementation().find(":ref"), std::string::npos);
    ASSERT_TRUE((*kernel)->run(QueueContext{}).is_ok());
    auto expected = evaluate_reference(g, inputs);
    std::vector<double> reference;
    for (int64_t k = 0; k < expected->outputs[0].num_elements(); ++k)
      reference.push_back(expected->outputs[0].element_as_double(k));
    Comparison c = compare_values(download(y), reference, {1e-5, 1e-6, 0.99999}, false);
    EXPECT_TRUE(c.passed) << (channels_last ? "nhwc: " : "nchw: ") << c.reason;
  }
}

TEST_P(StridedKernels, ConvGroupedPaddedStrided) {
  GraphBuilder b;
  AttributeMap attrs = ints_attribute("pads", {1, 0, 1, 2});
  attrs.set_ints("strides", {2, 1});
  attrs.set_int("group", 2);
  b.output(b.op("Conv", {b.input("x", DType::kF32, {2, 4, 7, 6}), b.input("w", DType::kF32, {6, 2, 3, 3}),
                         b.input("bias", DType::kF32, {6})}, attrs));
  check(b, {{"x", x({2, 4, 7, 6})}, {"w", x({6, 2, 3, 3}, 2)}, {"bias", x({6}, 3)}});
}

TEST_P(StridedKernels, Pooling) {
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
  for (const char* op : {"MaxPool", "AveragePool"}) {
    GraphBuilder g;
    AttributeMap pad = ints_attribute("kernel_shape", {2, 2});
    pad.set_ints("pads", {0, 3, 5, 0});
    if (std::string(op) == "AveragePool") pad.set_int("count_include_pad", 1);
    g.output(g.op(op, {g.input("x", DType::kF32, {1, 2, 4, 5})}, pad));
    SCOPED_TRACE(op);
    check(g, {{"x", x({1, 2, 4, 5})}});
  }
  GraphBuilder bytes;  // int8: the empty windows must give -128 (-inf would not convert)
  AttributeMap bp = ints_attribute("kernel_shape", {2, 2});
  bp.set_ints("pads", {0, 0, 4, 4});
  bytes.output(bytes.op("MaxPool", {bytes.input("x", DType::kI8, {1, 2, 4, 5})}, bp));
  check(bytes, {{"x", random_tensor(DType::kI8, {1, 2, 4, 5}, 9)}});
}

TEST_P(StridedKernels, DataMovement) {
  GraphBuilder c;
  c.output(c.op("Concat", {c.input("a", DType::kF32, {2, 3, 4}), c.input("b", DType::kF32, {2, 5, 4})}, int_attribute("axis", 1)));
  check(c, {{"a", x({2, 3, 4})}, {"b", x({2, 5, 4}, 2)}});
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

TEST_P(StridedKernels, ReshapeOfAStridedInput) {
  GraphBuilder b;
  b.output(b.op("Reshape", {b.input("a", DType::kF32, {2, 3, 4}), b.constant("shape", i64_tensor({4, 6}))}));
  check(b, {{"a", x({2, 3, 4})}});
}

TEST_P(StridedKernels, GatherWhereCastClip) {
  GraphBuilder g;
  g.output(g.op("Gather", {g.input("a", DType::kF32, {4, 5, 3}), g.input("i", DType::kI64, {2, 2})}, int_attribute("axis", 1)));
  check(g, {{"a", x({4, 5, 3})}, {"i", random_tensor(DType::kI64, {2, 2}, 5)}});
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

TEST_P(StridedKernels, NormalizationAndReductions) {
  GraphBuilder s;
  s.output(s.op("Softmax", {s.input("a", DType::kF32, {2, 3, 5})}, int_attribute("axis", 1)));
  check(s, {{"a", x({2, 3, 5})}});
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

TEST_P(StridedKernels, ResizeModes) {
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

INSTANTIATE_TEST_SUITE_P(Layouts, StridedKernels,
                         ::testing::Values(Layout::kDense, Layout::kPermutedPadded, Layout::kReversed),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::string(info.param == Layout::kDense ? "Dense"
                                              : info.param == Layout::kPermutedPadded ? "PermutedPadded" : "Reversed");
                         });

}  // namespace
}  // namespace strider
