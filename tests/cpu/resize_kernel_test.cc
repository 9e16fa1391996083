// The CPU Resize/Upsample kernel: hand-computed cases, strided (channels-last, sliced) views
// that must give the numbers of dense ones, dtypes, errors, and the ONNX node tests
// (test_resize_*, test_upsample_*) when their folder existed at configure time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>

#include "base/float16.h"
#include "hal/cpu/cpu_kernels.h"
#include "ir/builder.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "ops/op_registry.h"

namespace strider {
namespace {

// Host memory behind an Allocation, poisoned so an unwritten element shows.
class HostBuffer {
 public:
  explicit HostBuffer(int64_t bytes)
      : words_(size_t(std::max<int64_t>(bytes, 8) + 7) / 8, 0xA5A5A5A5A5A5A5A5ull),
        allocation_(std::make_unique<Allocation>(
            next_id(), "test", "cpu", reinterpret_cast<std::byte*>(words_.data()),
            std::max<int64_t>(bytes, 8), 8, StorageMode::kHost, true)) {}
  const Allocation& allocation() const { return *allocation_; }

 private:
  static uint64_t next_id() {
    static uint64_t id = 100;
    return ++id;
  }
  std::vector<uint64_t> words_;
  std::unique_ptr<Allocation> allocation_;
};

// Where a view's logical dims live in memory: storage_order lists the logical dims from
// the outermost in memory to the innermost (identity = dense). `pad_dim` gets `pad` extra
// elements on each side in memory, and the view is the slice in the middle.
struct Layout {
  std::vector<size_t> storage_order;
  int pad_dim = -1;
  int64_t pad = 0;
};

Layout dense_layout(size_t rank) {
  Layout l;
  l.storage_order.resize(rank);
  std::iota(l.storage_order.begin(), l.storage_order.end(), 0);
  return l;
}
// NCHW logical, NHWC in memory (and the N-D generalization: dim 1 innermost).
Layout channels_last(size_t rank, bool slice_channels) {
  Layout l;
  l.storage_order.push_back(0);
  for (size_t d = 2; d < rank; ++d) l.storage_order.push_back(d);
  l.storage_order.push_back(1);
  if (slice_channels) {
    l.pad_dim = 1;
    l.pad = 3;
  }
  return l;
}

// A view of fresh poisoned memory with `layout`; the buffer is appended to `keep`.
TensorView make_layout_view(DType dtype, const Shape& sizes, const Layout& layout,
                            std::vector<std::unique_ptr<HostBuffer>>& keep) {
  Shape physical;
  for (size_t d : layout.storage_order)
    physical.push_back(sizes[d] + (int(d) == layout.pad_dim ? 2 * layout.pad : 0));
  keep.push_back(std::make_unique<HostBuffer>(num_elements(physical) * dtype_size(dtype)));
  TensorView dense = *make_dense_view(keep.back()->allocation(), 0, dtype, physical, "t");
  std::vector<int64_t> perm(sizes.size());
  for (size_t j = 0; j < layout.storage_order.size(); ++j)
    perm[layout.storage_order[j]] = int64_t(j);
  TensorView view = *permute_view(dense, perm);
  if (layout.pad_dim >= 0)
    view = *slice_view(view, layout.pad_dim, layout.pad, layout.pad + sizes[size_t(layout.pad_dim)],
                       1);
  return view;
}

// Visits every element of `sizes` in row-major order with its view element offset.
template <typename Fn>
void for_each_index(const Shape& sizes, const Strides& strides, Fn fn) {
  int64_t n = num_elements(sizes);
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < sizes.size(); ++d) offset += index[d] * strides[d];
    fn(i, offset);
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

void copy_into_view(const Tensor& t, const TensorView& v) {
  const int64_t size = dtype_size(t.dtype());
  for_each_index(v.sizes, v.strides, [&](int64_t i, int64_t offset) {
    std::memcpy(v.host_data() + offset * size, t.bytes() + i * size, size_t(size));
  });
}

Tensor copy_from_view(const TensorView& v) {
  Tensor t(v.dtype, v.sizes);
  const int64_t size = dtype_size(v.dtype);
  for_each_index(v.sizes, v.strides, [&](int64_t i, int64_t offset) {
    std::memcpy(t.bytes() + i * size, v.host_data() + offset * size, size_t(size));
  });
  return t;
}

// Counts the bytes of `buffer` outside `view`'s elements that are no longer the poison.
int64_t touched_outside(const TensorView& view) {
  const Allocation& a = *view.allocation;
  std::vector<bool> inside(size_t(a.size()), false);
  const int64_t size = dtype_size(view.dtype);
  for_each_index(view.sizes, view.strides, [&](int64_t, int64_t offset) {
    for (int64_t b = 0; b < size; ++b) inside[size_t(view.byte_offset + offset * size + b)] = true;
  });
  int64_t touched = 0;
  for (int64_t b = 0; b < a.size(); ++b)
    if (!inside[size_t(b)] && a.address()[b] != std::byte{0xA5}) ++touched;
  return touched;
}

// Runs node `node` of `g` (shapes inferred) on `x`, input and output in the given layouts.
Result<Tensor> run_resize(const Graph& g, NodeId node, const Tensor& x, const Layout& in_layout,
                          const Layout& out_layout) {
  const Node& n = g.node(node);
  std::vector<std::unique_ptr<HostBuffer>> keep;
  std::vector<TensorView> inputs(n.inputs.size());
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == kNoValue) continue;
    const Value& v = g.value(n.inputs[i]);
    const Tensor& data = i == 0 ? x : *v.constant;
    Layout layout = i == 0 ? in_layout : dense_layout(size_t(data.rank()));
    inputs[i] = make_layout_view(data.dtype(), data.shape(), layout, keep);
    copy_into_view(data, inputs[i]);
  }
  const Value& out = g.value(n.outputs[0]);
  TensorView y = make_layout_view(out.dtype, out.shape, out_layout, keep);
  STRIDER_ASSIGN_OR_RETURN(auto kernel, cpu::create_kernel(KernelRequest{g, n, inputs, {y}}));
  STRIDER_RETURN_IF_ERROR(kernel->run(QueueContext{}));
  if (int64_t touched = touched_outside(y); touched != 0)
    return internal_error(fmt::format("{} bytes written outside the output view", touched));
  return copy_from_view(y);
}

Status infer_node(Graph& g, NodeId node) {
  const OpSchema* schema = find_op_schema("", g.node(node).op_type);
  if (schema == nullptr) return unsupported("no schema for " + g.node(node).op_type);
  InferContext ctx(g, node);
  return schema->infer(ctx);
}

double element(const Tensor& t, int64_t i) { return t.element_as_double(i); }

// An empty string when every element is within atol + rtol * |expected|, else the first
// mismatch.
std::string compare(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  if (actual.shape() != expected.shape())
    return fmt::format("shape {} vs expected {}", shape_to_string(actual.shape()),
                       shape_to_string(expected.shape()));
  for (int64_t i = 0; i < expected.num_elements(); ++i) {
    double a = element(actual, i), e = element(expected, i);
    if (!(std::abs(a - e) <= atol + rtol * std::abs(e)))
      return fmt::format("element {}: {} vs expected {}", i, a, e);
  }
  return "";
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) m = std::max(m, std::abs(element(t, i)));
  return m;
}

Tensor make_tensor(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor f64 = Tensor::from_values(DType::kF64, shape, std::span<const double>(values));
  if (dtype == DType::kF64) return f64;
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double v = values[size_t(i)];
    switch (dtype) {
      case DType::kF32: t.data<float>()[i] = float(v); break;
      case DType::kBF16: t.data<bf16>()[i] = bf16::from_float(float(v)); break;
      case DType::kF16: t.data<f16>()[i] = f16::from_float(float(v)); break;
      case DType::kI64: t.data<int64_t>()[i] = int64_t(v); break;
      case DType::kI32: t.data<int32_t>()[i] = int32_t(v); break;
      case DType::kI8: t.data<int8_t>()[i] = int8_t(v); break;
      case DType::kU8: t.data<uint8_t>()[i] = uint8_t(v); break;
      default: t.data<float>()[i] = float(v); break;
    }
  }
  return t;
}

std::vector<double> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-4.0, 4.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

// A one-node Resize graph (or Upsample), shapes inferred; the node is node 0.
struct ResizeGraph {
  Graph graph;
  NodeId node = 0;
};

struct ResizeSpec {
  std::string op = "Resize";
  int opset = 19;
  DType dtype = DType::kF32;
  Shape input;
  std::vector<float> scales;   // as the scales input (empty: absent)
  std::vector<int64_t> sizes;  // as the sizes input (empty: absent)
  std::vector<float> roi;      // as the roi input (empty: absent)
  AttributeMap attributes;
};

Result<ResizeGraph> make_resize(const ResizeSpec& s) {
  GraphBuilder b(s.opset);
  ValueId x = b.input("x", s.dtype, s.input);
  auto f32 = [](const std::vector<float>& v) {
    return Tensor::from_values(DType::kF32, {int64_t(v.size())}, std::span<const float>(v));
  };
  std::vector<ValueId> inputs{x};
  if (s.op == "Upsample" && s.opset < 9) {
    // scales is an attribute
  } else if (s.op == "Upsample" || s.opset < 11) {
    inputs.push_back(b.constant("scales", f32(s.scales)));
  } else {
    inputs.push_back(s.roi.empty() ? kNoValue : b.constant("roi", f32(s.roi)));
    inputs.push_back(s.scales.empty() ? kNoValue : b.constant("scales", f32(s.scales)));
    if (!s.sizes.empty())
      inputs.push_back(
          b.constant("sizes", Tensor::from_values(DType::kI64, {int64_t(s.sizes.size())},
                                                  std::span<const int64_t>(s.sizes))));
  }
  b.output(b.op(s.op, inputs, s.attributes, "resize"));
  ResizeGraph rg{b.build(), 0};
  STRIDER_RETURN_IF_ERROR(infer_node(rg.graph, rg.node));
  return rg;
}

AttributeMap attrs(std::initializer_list<std::pair<const char*, const char*>> strings) {
  AttributeMap a;
  for (const auto& [k, v] : strings) a.set_string(k, v);
  return a;
}

Tensor run_ok(const ResizeGraph& g, const Tensor& x, const Layout& in, const Layout& out) {
  Result<Tensor> y = run_resize(g.graph, g.node, x, in, out);
  EXPECT_TRUE(y.is_ok()) << y.status().to_string();
  return y.is_ok() ? *y : Tensor();
}

Tensor run_dense(const ResizeGraph& g, const Tensor& x) {
  return run_ok(g, x, dense_layout(size_t(x.rank())), dense_layout(size_t(x.rank())));
}

TEST(ResizeKernel, NearestUpsample2xIsARepeatInBothLayouts) {
  // The YOLO neck: Resize-13 scales [1, 1, 2, 2], asymmetric, floor.
  ResizeSpec s;
  s.opset = 13;
  s.input = {1, 3, 2, 3};
  s.scales = {1, 1, 2, 2};
  s.attributes = attrs({{"mode", "nearest"},
                        {"coordinate_transformation_mode", "asymmetric"},
                        {"nearest_mode", "floor"}});
  auto g = make_resize(s);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  std::vector<double> xs(18);
  std::iota(xs.begin(), xs.end(), 1.0);
  Tensor x = make_tensor(DType::kF32, s.input, xs);
  std::vector<double> expected;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t w = 0; w < 6; ++w) expected.push_back(xs[size_t(c * 6 + (h / 2) * 3 + w / 2)]);
  Tensor want = make_tensor(DType::kF32, {1, 3, 4, 6}, expected);
  EXPECT_EQ(compare(run_dense(*g, x), want, 0, 0), "");
  EXPECT_EQ(compare(run_ok(*g, x, channels_last(4, false), channels_last(4, true)), want, 0, 0),
            "");
  EXPECT_EQ(compare(run_ok(*g, x, dense_layout(4), channels_last(4, true)), want, 0, 0), "");
}

TEST(ResizeKernel, BilinearHalfPixelMatchesTheSpecExample) {
  ResizeSpec s;
  s.input = {1, 1, 2, 2};
  s.scales = {1, 1, 2, 2};
  s.attributes = attrs({{"mode", "linear"}});
  auto g = make_resize(s);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  Tensor x = make_tensor(DType::kF32, s.input, {1, 2, 3, 4});
  Tensor want = make_tensor(DType::kF32, {1, 1, 4, 4},
                            {1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5,  //
                             2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0});
  EXPECT_EQ(compare(run_dense(*g, x), want, 1e-6, 0), "");
}

TEST(ResizeKernel, CubicWeightsAndExcludeOutside) {
  // 1-D align_corners 4 -> 7 samples x = 0, 0.5, 1, ...; at x = 0.5 the Keys weights
  // (A = -0.75) of taps -1, 0, 1, 2 are -0.09375, 0.59375, 0.59375, -0.09375, tap -1
  // clamped to 0. exclude_outside drops it and renormalizes by 1.09375.
  for (bool exclude : {false, true}) {
    ResizeSpec s;
    s.input = {4};
    s.sizes = {7};
    s.attributes = attrs({{"mode", "cubic"}, {"coordinate_transformation_mode", "align_corners"}});
    s.attributes.set_int("exclude_outside", exclude ? 1 : 0);
    auto g = make_resize(s);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    Tensor y = run_dense(*g, make_tensor(DType::kF32, {4}, {1, 5, 2, 8}));
    ASSERT_EQ(y.shape(), Shape{7});
    EXPECT_NEAR(element(y, 0), 1.0, 1e-6);
    EXPECT_NEAR(element(y, 2), 5.0, 1e-6);
    EXPECT_NEAR(element(y, 6), 8.0, 1e-6);
    double half = exclude ? (0.59375 + 0.59375 * 5 - 0.09375 * 2) / 1.09375
                          : -0.09375 + 0.59375 + 0.59375 * 5 - 0.09375 * 2;
    EXPECT_NEAR(element(y, 1), half, 1e-5);
  }
}

TEST(ResizeKernel, MultilinearAlignCornersReproducesAnAffineFunction) {
  // 5-D input, three axes resized (one of them outer): multilinear interpolation of
  // f = 1 + 2i + 3j - k + 0.5l is exact, with x_original = x * (in - 1) / (out - 1).
  ResizeSpec s;
  s.input = {2, 3, 4, 2, 5};
  s.sizes = {5, 3, 7};
  s.attributes = attrs({{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}});
  s.attributes.set_ints("axes", {1, 3, -1});
  auto g = make_resize(s);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  auto f = [](double n, double i, double j, double k, double l) {
    return n * 10 + 1 + 2 * i + 3 * j - k + 0.5 * l;
  };
  std::vector<double> xs, want;
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 2; ++k)
          for (int l = 0; l < 5; ++l) xs.push_back(f(n, i, j, k, l));
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 3; ++k)
          for (int l = 0; l < 7; ++l)
            want.push_back(f(n, i * 2.0 / 4, j, k * 1.0 / 2, l * 4.0 / 6));
  Shape out{2, 5, 4, 3, 7};
  Tensor x = make_tensor(DType::kF64, s.input, xs);
  s.dtype = DType::kF64;
  g = make_resize(s);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(compare(run_dense(*g, x), make_tensor(DType::kF64, out, want), 1e-12, 1e-12), "");
  EXPECT_EQ(compare(run_ok(*g, x, channels_last(5, true), channels_last(5, false)),
                    make_tensor(DType::kF64, out, want), 1e-12, 1e-12),
            "");
}

TEST(ResizeKernel, StridedViewsGiveTheNumbersOfDenseOnes) {
  struct Case {
    const char* mode;
    const char* coordinate;
    std::vector<float> scales;
    bool antialias;
  };
  const Case cases[] = {{"nearest", "half_pixel", {1, 1, 2, 2}, false},
                        {"nearest", "asymmetric", {1, 1, 0.5f, 1.5f}, false},
                        {"linear", "half_pixel", {1, 1, 2, 2}, false},
                        {"linear", "pytorch_half_pixel", {1, 1, 0.6f, 1.7f}, true},
                        {"cubic", "align_corners", {1, 1, 1.5f, 0.8f}, false},
                        {"cubic", "half_pixel", {1, 1, 0.4f, 0.7f}, true},
                        {"linear", "half_pixel_symmetric", {1, 2, 0.75f, 1.3f}, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} {} antialias {}", c.mode, c.coordinate, c.antialias));
    ResizeSpec s;
    s.input = {2, 5, 7, 6};
    s.scales = c.scales;
    s.attributes = attrs({{"mode", c.mode}, {"coordinate_transformation_mode", c.coordinate}});
    s.attributes.set_int("antialias", c.antialias ? 1 : 0);
    auto g = make_resize(s);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    Tensor x = make_tensor(DType::kF32, s.input, random_values(num_elements(s.input), 7));
    Tensor dense = run_dense(*g, x);
    double atol = 1e-6 * max_abs(dense);
    EXPECT_EQ(
        compare(run_ok(*g, x, channels_last(4, false), channels_last(4, false)), dense, 1e-6, atol),
        "");
    EXPECT_EQ(
        compare(run_ok(*g, x, channels_last(4, true), channels_last(4, true)), dense, 1e-6, atol),
        "");
    Layout reversed{{3, 2, 1, 0}, 2, 1};
    EXPECT_EQ(compare(run_ok(*g, x, reversed, channels_last(4, true)), dense, 1e-6, atol), "");
  }
}

TEST(ResizeKernel, NearestGathersIntegersExactly) {
  ResizeSpec s;
  s.input = {1, 2, 2, 3};
  s.sizes = {1, 2, 3, 5};
  s.attributes = attrs({{"mode", "nearest"}, {"nearest_mode", "round_prefer_ceil"}});
  const std::vector<double> xs{3, 17, 101, 5, 9, 127, 0, 1, 2, 44, 55, 66};
  auto g32 = make_resize(s);
  ASSERT_TRUE(g32.is_ok()) << g32.status().to_string();
  Tensor f32 = run_dense(*g32, make_tensor(DType::kF32, s.input, xs));
  for (DType dtype : {DType::kI64, DType::kI32, DType::kI8, DType::kU8}) {
    s.dtype = dtype;
    auto g = make_resize(s);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    Tensor y = run_ok(*g, make_tensor(dtype, s.input, xs), channels_last(4, false),
                      channels_last(4, true));
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_EQ(compare(y, f32, 0, 0), "") << dtype_name(dtype);
  }
  ResizeSpec linear;
  linear.dtype = DType::kI32;
  linear.input = {1, 1, 2, 2};
  linear.scales = {1, 1, 2, 2};
  linear.attributes = attrs({{"mode", "linear"}});
  auto g = make_resize(linear);
  ASSERT_TRUE(g.is_ok());
  Result<Tensor> y =
      run_resize(g->graph, g->node, make_tensor(DType::kI32, linear.input, {1, 2, 3, 4}),
                 dense_layout(4), dense_layout(4));
  ASSERT_FALSE(y.is_ok());
  EXPECT_EQ(y.status().code(), StatusCode::kUnsupported) << y.status().to_string();
}

TEST(ResizeKernel, ReducedPrecisionAndF64FollowF32) {
  ResizeSpec s;
  s.input = {1, 2, 5, 4};
  s.scales = {1, 1, 1.6f, 0.5f};
  s.attributes = attrs({{"mode", "cubic"}});
  s.attributes.set_int("antialias", 1);
  std::vector<double> xs = random_values(num_elements(s.input), 11);
  auto g32 = make_resize(s);
  ASSERT_TRUE(g32.is_ok());
  Tensor ref = run_dense(*g32, make_tensor(DType::kF32, s.input, xs));
  for (auto [dtype, tol] :
       {std::pair{DType::kBF16, 2e-2}, {DType::kF16, 2e-3}, {DType::kF64, 1e-6}}) {
    s.dtype = dtype;
    auto g = make_resize(s);
    ASSERT_TRUE(g.is_ok());
    Tensor y = run_ok(*g, make_tensor(dtype, s.input, xs), channels_last(4, true), dense_layout(4));
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_EQ(compare(y, ref, tol, tol * max_abs(ref)), "") << dtype_name(dtype);
  }
}

TEST(ResizeKernel, TfCropAndResizeExtrapolatesOutsideTheInput) {
  // roi [-0.5, 1.5] of 4 elements onto 5: x_original = -1.5 + 1.5 x.
  ResizeSpec s;
  s.input = {4};
  s.sizes = {5};
  s.roi = {-0.5f, 1.5f};
  s.attributes =
      attrs({{"mode", "linear"}, {"coordinate_transformation_mode", "tf_crop_and_resize"}});
  s.attributes.set_float("extrapolation_value", 10.0f);
  auto g = make_resize(s);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  Tensor y = run_dense(*g, make_tensor(DType::kF32, {4}, {1, 2, 3, 4}));
  EXPECT_EQ(compare(y, make_tensor(DType::kF32, {5}, {10, 1, 2.5, 4, 10}), 1e-6, 0), "");
  // With scales the output is floor(in * (roi_end - roi_start) * scale) (the spec).
  s.sizes.clear();
  s.scales = {1.0f};
  s.roi = {0.25f, 0.75f};
  g = make_resize(s);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  y = run_dense(*g, make_tensor(DType::kF32, {4}, {1, 2, 3, 4}));
  EXPECT_EQ(compare(y, make_tensor(DType::kF32, {2}, {1.75, 3.25}), 1e-6, 0), "");
}

TEST(ResizeKernel, LegacyVersionsUseAsymmetricFloorUpAndCeilDown) {
  ResizeSpec up;
  up.op = "Upsample";
  up.opset = 7;
  up.input = {1, 1, 2, 2};
  up.attributes = attrs({{"mode", "nearest"}});
  up.attributes.set_floats("scales", {1, 1, 2, 3});
  auto g = make_resize(up);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  Tensor y = run_dense(*g, make_tensor(DType::kF32, up.input, {1, 2, 3, 4}));
  EXPECT_EQ(compare(y, make_tensor(DType::kF32, {1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                                               3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}),
                    0, 0),
            "");
  ResizeSpec down;
  down.opset = 10;
  down.input = {1, 1, 2, 4};
  down.scales = {1, 1, 0.6f, 0.6f};
  down.attributes = attrs({{"mode", "nearest"}});
  g = make_resize(down);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  y = run_dense(*g, make_tensor(DType::kF32, down.input, {1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(compare(y, make_tensor(DType::kF32, {1, 1, 1, 2}, {1, 3}), 0, 0), "");
}

TEST(ResizeKernel, MismatchedViewsAreAStatusNotACrash) {
  ResizeSpec s;
  s.input = {1, 1, 2, 2};
  s.scales = {1, 1, 2, 2};
  auto g = make_resize(s);
  ASSERT_TRUE(g.is_ok());
  const Node& n = g->graph.node(g->node);
  HostBuffer buffer(1024);
  TensorView x = *make_dense_view(buffer.allocation(), 0, DType::kF32, {1, 1, 2, 2}, "x");
  TensorView wrong = *make_dense_view(buffer.allocation(), 64, DType::kF32, {1, 1, 4, 3}, "y");
  TensorView f16_out = *make_dense_view(buffer.allocation(), 64, DType::kF16, {1, 1, 4, 4}, "y");
  EXPECT_FALSE(cpu::create_kernel(KernelRequest{g->graph, n, {x}, {wrong}}).is_ok());
  EXPECT_FALSE(cpu::create_kernel(KernelRequest{g->graph, n, {x}, {f16_out}}).is_ok());
  EXPECT_FALSE(cpu::create_kernel(KernelRequest{g->graph, n, {}, {wrong}}).is_ok());
  EXPECT_FALSE(cpu::create_kernel(KernelRequest{g->graph, n, {x}, {}}).is_ok());
}

#ifdef STRIDER_ONNX_NODE_TESTS_DIR
namespace fs = std::filesystem;

// Loads one node test into a graph whose inputs past the data are constants, so that
// shapes are static; returns the graph and the data input.
Result<std::pair<Graph, Tensor>> load_node_test(const fs::path& dir) {
  STRIDER_ASSIGN_OR_RETURN(Graph g, import_model_file((dir / "model.onnx").string()));
  if (g.num_nodes() != 1) return invalid_model(fmt::format("{} nodes", g.num_nodes()));
  const Node& node = g.node(0);
  Tensor data;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    fs::path file = dir / "test_data_set_0" / fmt::format("input_{}.pb", i);
    STRIDER_ASSIGN_OR_RETURN(Tensor t, read_tensor_pb(file.string()));
    Value& v = g.value(g.inputs()[i]);
    v.has_type = v.has_shape = true;
    v.dtype = t.dtype();
    v.shape = t.shape();
    v.dim_params.clear();
    if (g.inputs()[i] == node.input(0))
      data = std::move(t);
    else
      v.constant = std::make_shared<const Tensor>(std::move(t));
  }
  STRIDER_RETURN_IF_ERROR(infer_node(g, 0));
  return std::make_pair(std::move(g), std::move(data));
}

// "" when the case passes in a dense and a strided layout, else why not.
Result<std::string> run_node_test(const fs::path& dir) {
  STRIDER_ASSIGN_OR_RETURN(auto loaded, load_node_test(dir));
  auto& [g, x] = loaded;
  STRIDER_ASSIGN_OR_RETURN(Tensor expected,
                           read_tensor_pb((dir / "test_data_set_0" / "output_0.pb").string()));
  const double atol = 1e-5 * max_abs(expected);
  const size_t rank = size_t(x.rank());
  Layout reversed = dense_layout(rank);
  std::reverse(reversed.storage_order.begin(), reversed.storage_order.end());
  reversed.pad_dim = int(rank) - 1;
  reversed.pad = 2;
  const std::pair<const char*, Layout> layouts[] = {{"dense", dense_layout(rank)},
                                                    {"reversed-strided", reversed}};
  for (const auto& [name, layout] : layouts) {
    STRIDER_ASSIGN_OR_RETURN(Tensor y, run_resize(g, 0, x, layout, layout));
    if (std::string diff = compare(y, expected, 1e-3, atol); !diff.empty())
      return fmt::format("{}: {}", name, diff);
  }
  return std::string();
}

TEST(ResizeNodeTests, MatchTheOnnxOutputs) {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(STRIDER_ONNX_NODE_TESTS_DIR)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("test_resize_") || name.starts_with("test_upsample_"))
      dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  ASSERT_FALSE(dirs.empty());
  int passed = 0, skipped = 0, failed = 0;
  for (const fs::path& dir : dirs) {
    std::string name = dir.filename().string();
    Result<std::string> r = run_node_test(dir);
    if (!r.is_ok() && r.status().code() == StatusCode::kUnsupported &&
        r.status().message().find("type") != std::string::npos) {
      ++skipped;  // an element type strider does not have
      std::cout << "SKIP " << name << ": " << r.status().to_string() << "\n";
    } else if (!r.is_ok() || !r->empty()) {
      ++failed;
      ADD_FAILURE() << name << ": " << (r.is_ok() ? *r : r.status().to_string());
      std::cout << "FAIL " << name << "\n";
    } else {
      ++passed;
      std::cout << "PASS " << name << "\n";
    }
  }
  std::cout << "resize node tests: " << passed << " passed, " << failed << " failed, " << skipped
            << " skipped\n";
  RecordProperty("passed", passed);
}
#endif  // STRIDER_ONNX_NODE_TESTS_DIR

}  // namespace
}  // namespace strider
