// strider's own CUDA reductions, softmax, pooling and resize kernels against the float64
// reference on dense, channels-last padded and offset, reversed and channel-slice views,
// in f32 and bf16, with rows short enough for a thread and long enough for a block.
// Without a GPU every test is skipped.
#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "ops/op_registry.h"

namespace strider::cuda_test {
namespace {

class CudaReducePoolResize : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { STRIDER_REQUIRE_GPU(); }
  DType dtype() const { return GetParam(); }
  Tensor x(const Shape& shape, uint32_t seed = 1) const { return random_tensor(dtype(), shape, seed); }
};

TEST_P(CudaReducePoolResize, Reductions) {
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;  // empty: attribute absent
    int64_t keepdims;
  };
  // Short rows (a thread each), long rows (a block each), all axes, inner and outer axes.
  const std::vector<Case> cases = {{{2, 3, 5}, {0, 2}, 0}, {{2, 3, 5}, {1}, 1},     {{3, 700}, {1}, 0},
                                   {{2, 40, 6}, {1}, 1},   {{4, 5, 6}, {}, 0},      {{2, 3, 4, 5}, {-1, 1}, 1},
                                   {{1, 3, 70, 9}, {2, 3}, 1}};
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}) {
    for (const Case& c : cases) {
      GraphBuilder b(13);  // axes attribute for all but ReduceSum, which takes an input
      AttributeMap a = int_attribute("keepdims", c.keepdims);
      std::vector<ValueId> in{b.input("a", dtype(), c.shape)};
      if (std::string(op) == "ReduceSum") {
        if (!c.axes.empty()) in.push_back(b.constant("axes", i64_tensor(c.axes)));
      } else if (!c.axes.empty()) {
        a.set_ints("axes", c.axes);
      }
      b.output(b.op(op, in, a));
      SCOPED_TRACE(std::string(op) + " " + shape_to_string(c.shape));
      check_node_all_layouts(b.build(), {{"a", x(c.shape)}});
    }
  }
  GraphBuilder n(18);  // noop_with_empty_axes: a copy
  AttributeMap noop = int_attribute("noop_with_empty_axes", 1);
  n.output(n.op("ReduceMax", {n.input("a", dtype(), {2, 3, 4})}, noop));
  check_node_all_layouts(n.build(), {{"a", x({2, 3, 4})}});
  GraphBuilder m(18);  // opset 18: axes as an input
  m.output(m.op("ReduceMean", {m.input("a", dtype(), {2, 3, 4}), m.constant("axes", i64_tensor({0, 2}))}, int_attribute("keepdims", 0)));
  check_node_all_layouts(m.build(), {{"a", x({2, 3, 4})}});
}

TEST_P(CudaReducePoolResize, SoftmaxAndLogSoftmax) {
  struct Case {
    int opset;
    Shape shape;
    int64_t axis;
  };
  // Opset 11 coerces to 2-D at axis; 13 normalizes one axis. [1, 4, 16, 50] over axis 2
  // is the detector head's distribution softmax (short strided rows, many of them).
  const std::vector<Case> cases = {{11, {2, 3, 5}, 1}, {13, {2, 3, 5}, 1}, {13, {2, 3, 5}, -1},
                                   {13, {4, 1000}, 1}, {11, {3, 4, 90}, 1}, {13, {1, 4, 16, 50}, 2}};
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (const Case& c : cases) {
      GraphBuilder b(c.opset);
      b.output(b.op(op, {b.input("a", dtype(), c.shape)}, int_attribute("axis", c.axis)));
      SCOPED_TRACE(std::string(op) + " opset " + std::to_string(c.opset) + " " + shape_to_string(c.shape));
      check_node_all_layouts(b.build(), {{"a", x(c.shape)}});
    }
  }
}

TEST_P(CudaReducePoolResize, MaxPoolWithIndices) {
  struct Case {
    Shape shape;
    AttributeMap attributes;
  };
  AttributeMap basic = ints_attribute("kernel_shape", {3, 3});
  basic.set_ints("pads", {1, 1, 1, 1});
  basic.set_ints("strides", {2, 2});
  AttributeMap column = basic;
  column.set_int("storage_order", 1);
  AttributeMap dilated = ints_attribute("kernel_shape", {2, 2});
  dilated.set_ints("dilations", {2, 3});
  dilated.set_int("ceil_mode", 1);
  dilated.set_ints("strides", {2, 2});
  AttributeMap same = ints_attribute("kernel_shape", {3, 2});
  same.set_string("auto_pad", "SAME_UPPER");
  AttributeMap one_d = ints_attribute("kernel_shape", {3});
  one_d.set_ints("strides", {2});
  AttributeMap three_d = ints_attribute("kernel_shape", {2, 2, 2});
  three_d.set_ints("pads", {0, 1, 0, 1, 0, 1});
  // A declared kernel far past the input: only the taps inside it are visited.
  AttributeMap huge = ints_attribute("kernel_shape", {int64_t(1) << 32, 3});
  huge.set_string("auto_pad", "SAME_UPPER");
  const std::vector<Case> cases = {{{1, 3, 7, 6}, basic},     {{2, 3, 7, 6}, column}, {{1, 2, 9, 11}, dilated},
                                   {{1, 4, 5, 7}, same},      {{2, 3, 11}, one_d},    {{1, 2, 4, 5, 6}, three_d},
                                   {{1, 2, 8, 8}, huge}};
  for (const Case& c : cases) {
    GraphBuilder b(12);
    auto outs = b.ops("MaxPool", {b.input("x", dtype(), c.shape)}, 2, c.attributes);
    b.output(outs[0]);
    b.output(outs[1]);
    SCOPED_TRACE(shape_to_string(c.shape));
    check_node_all_layouts(b.build(), {{"x", x(c.shape)}});
  }
}

TEST_P(CudaReducePoolResize, AveragePoolAndGlobalPools) {
  std::vector<AttributeMap> variants;
  AttributeMap include = ints_attribute("kernel_shape", {2, 3});
  include.set_int("count_include_pad", 1);
  include.set_ints("pads", {0, 1, 1, 1});
  variants.push_back(include);
  AttributeMap exclude = include;
  exclude.set_int("count_include_pad", 0);
  exclude.set_int("ceil_mode", 1);
  exclude.set_ints("strides", {2, 2});
  variants.push_back(exclude);
  AttributeMap dilated = ints_attribute("kernel_shape", {2, 2});
  dilated.set_ints("dilations", {2, 2});
  dilated.set_ints("pads", {1, 1, 1, 1});
  variants.push_back(dilated);
  for (const AttributeMap& a : variants) {
    GraphBuilder b(19);
    b.output(b.op("AveragePool", {b.input("x", dtype(), {2, 3, 5, 6})}, a));
    check_node_all_layouts(b.build(), {{"x", x({2, 3, 5, 6})}});
  }
  // Planes of 20 elements (a thread each), of 1600 (a block each), and MobileNetV2's last
  // 7x7 planes at batch 32 (many rows: a thread each again).
  for (const Shape& shape : {Shape{2, 3, 4, 5}, Shape{1, 4, 40, 40}, Shape{2, 3, 7}, Shape{32, 640, 7, 7}}) {
    for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
      GraphBuilder b;
      b.output(b.op(op, {b.input("x", dtype(), shape)}));
      SCOPED_TRACE(std::string(op) + " " + shape_to_string(shape));
      check_node_all_layouts(b.build(), {{"x", x(shape)}});
    }
  }
}

TEST_P(CudaReducePoolResize, ResizeModes) {
  struct Case {
    int opset;
    const char* mode;
    const char* coordinates;
    std::vector<float> scales;
    bool antialias = false;
  };
  const std::vector<Case> cases = {
      {13, "nearest", "asymmetric", {1, 1, 1.5f, 0.75f}},   {13, "linear", "half_pixel", {1, 1, 1.5f, 0.75f}},
      {13, "cubic", "align_corners", {1, 1, 1.5f, 0.75f}},  {11, "nearest", "tf_half_pixel_for_nn", {1, 1, 1.5f, 0.75f}},
      {19, "linear", "half_pixel_symmetric", {1, 1, 1.5f, 0.75f}}, {18, "linear", "half_pixel", {1, 1, 0.5f, 0.6f}, true},
      {18, "cubic", "pytorch_half_pixel", {1, 1, 0.5f, 1.25f}, true}, {10, "nearest", "asymmetric", {1, 1, 2, 0.5f}},
      {13, "nearest", "asymmetric", {1, 1, 2, 2}},  // the detector neck's 2x upsample
  };
  for (const Case& c : cases) {
    GraphBuilder b(c.opset);
    AttributeMap attrs;
    attrs.set_string("mode", c.mode);
    if (c.opset >= 11) attrs.set_string("coordinate_transformation_mode", c.coordinates);
    if (c.antialias) attrs.set_int("antialias", 1);
    Tensor scales = f32({4}, c.scales);
    std::vector<ValueId> in{b.input("x", dtype(), {1, 3, 6, 8})};
    if (c.opset >= 11) in.push_back(b.constant("roi", Tensor(DType::kF32, {0})));
    in.push_back(b.constant("scales", scales));
    b.output(b.op("Resize", in, attrs));
    SCOPED_TRACE(std::string(c.mode) + " " + c.coordinates + " opset " + std::to_string(c.opset));
    check_node_all_layouts(b.build(), {{"x", x({1, 3, 6, 8})}});
  }
}

TEST_P(CudaReducePoolResize, ResizeCropExtrapolateSizesAndUpsample) {
  GraphBuilder crop(13);  // tf_crop_and_resize: coordinates outside the crop extrapolate
  AttributeMap attrs;
  attrs.set_string("mode", "linear");
  attrs.set_string("coordinate_transformation_mode", "tf_crop_and_resize");
  attrs.set_float("extrapolation_value", 0.25f);
  Tensor roi = f32({8}, {0, 0, -0.2f, 0.1f, 1, 1, 0.9f, 1.3f});
  crop.output(crop.op("Resize", {crop.input("x", dtype(), {1, 2, 5, 6}), crop.constant("roi", roi), kNoValue,
                                 crop.constant("sizes", i64_tensor({1, 2, 7, 4}))}, attrs));
  check_node_all_layouts(crop.build(), {{"x", x({1, 2, 5, 6})}});
  GraphBuilder cubic(13);  // cubic with exclude_outside and sizes
  AttributeMap c;
  c.set_string("mode", "cubic");
  c.set_int("exclude_outside", 1);
  c.set_float("cubic_coeff_a", -0.5f);
  cubic.output(cubic.op("Resize", {cubic.input("x", dtype(), {2, 3, 4, 5}), cubic.constant("roi", Tensor(DType::kF32, {0})),
                                   kNoValue, cubic.constant("sizes", i64_tensor({2, 3, 7, 3}))}, c));
  check_node_all_layouts(cubic.build(), {{"x", x({2, 3, 4, 5})}});
  GraphBuilder up(9);  // Upsample
  up.output(up.op("Upsample", {up.input("x", dtype(), {1, 2, 3, 4}), up.constant("scales", f32({4}, {1, 1, 2, 3}))}));
  check_node_all_layouts(up.build(), {{"x", x({1, 2, 3, 4})}});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaReducePoolResize, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

TEST(CudaReducePoolResizeInts, IntegerReductionsPoolsAndNearestResize) {
  STRIDER_REQUIRE_GPU();
  for (DType t : {DType::kI32, DType::kI64, DType::kI8, DType::kU8}) {
    for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin"}) {
      GraphBuilder b(13);
      std::vector<ValueId> in{b.input("a", t, {3, 50, 4})};
      AttributeMap a = int_attribute("keepdims", 0);
      if (std::string(op) == "ReduceSum") in.push_back(b.constant("axes", i64_tensor({1})));
      else a.set_ints("axes", {1});
      b.output(b.op(op, in, a));
      SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(t)));
      check_node_all_layouts(b.build(), {{"a", random_tensor(t, {3, 50, 4}, 1)}});
    }
  }
  for (DType t : {DType::kI8, DType::kU8}) {
    GraphBuilder p(12);
    AttributeMap k = ints_attribute("kernel_shape", {2, 2});
    k.set_ints("strides", {2, 2});
    p.output(p.op("MaxPool", {p.input("x", t, {1, 3, 6, 5})}, k));
    check_node_all_layouts(p.build(), {{"x", random_tensor(t, {1, 3, 6, 5}, 2)}});
    GraphBuilder padded(12);  // windows wholly in the padding: the type's lowest value
    AttributeMap pk = ints_attribute("kernel_shape", {2, 2});
    pk.set_ints("pads", {0, 0, 4, 4});
    padded.output(padded.op("MaxPool", {padded.input("x", t, {1, 2, 4, 5})}, pk));
    check_node_all_layouts(padded.build(), {{"x", random_tensor(t, {1, 2, 4, 5}, 3)}});
    GraphBuilder r(13);
    AttributeMap nearest;
    nearest.set_string("mode", "nearest");
    r.output(r.op("Resize", {r.input("x", t, {1, 3, 4, 5}), r.constant("roi", Tensor(DType::kF32, {0})),
                             r.constant("scales", f32({4}, {1, 1, 2, 2}))}, nearest));
    check_node_all_layouts(r.build(), {{"x", random_tensor(t, {1, 3, 4, 5}, 4)}});
  }
  GraphBuilder any;
  any.output(any.op("ReduceMax", {any.input("a", DType::kBool, {3, 40})}, ints_attribute("axes", {1})));
  check_node_all_layouts(any.build(), {{"a", random_tensor(DType::kBool, {3, 40}, 5)}});
}

// Gather with indices read on the GPU: negative ones count from the end, both index dtypes,
// multi-dim indices, every layout (the indices strided too); an index out of range fails
// the run with OUT_OF_RANGE naming it.
TEST(CudaGather, RuntimeIndicesInEveryLayout) {
  STRIDER_REQUIRE_GPU();
  for (DType index_type : {DType::kI64, DType::kI32}) {
    for (int64_t axis : {0, 1, 2}) {
      const Shape data_shape = {4, 5, 6};
      const Shape index_shape = {2, 3};
      int64_t dim = data_shape[size_t(axis)];
      std::vector<double> k = {0, double(dim - 1), -1, 2, double(-dim), 1};
      GraphBuilder b;
      AttributeMap a = int_attribute("axis", axis);
      b.output(b.op("Gather", {b.input("data", DType::kF32, data_shape), b.input("indices", index_type, index_shape)}, a));
      SCOPED_TRACE("axis " + std::to_string(axis) + " " + std::string(dtype_name(index_type)));
      check_node_all_layouts(b.build(), {{"data", random_tensor(DType::kF32, data_shape, 7)},
                                         {"indices", tensor_of(index_type, index_shape, k)}});
    }
  }
  GraphBuilder bf;
  bf.output(bf.op("Gather", {bf.input("data", DType::kBF16, {3, 8}), bf.input("indices", DType::kI64, {5})},
                  int_attribute("axis", 1)));
  check_node_all_layouts(bf.build(), {{"data", random_tensor(DType::kBF16, {3, 8}, 8)},
                                      {"indices", tensor_of(DType::kI64, {5}, {7, -8, 3, 3, 0})}});
}

TEST(CudaGather, IndexOutOfRangeFailsTheRun) {
  STRIDER_REQUIRE_GPU();
  GraphBuilder b;
  b.output(b.op("Gather", {b.input("data", DType::kF32, {4, 5}), b.input("indices", DType::kI64, {3})},
                int_attribute("axis", 0)));
  Graph g = b.build();
  InferContext context(g, 0);
  ASSERT_TRUE(find_op_schema("", "Gather")->infer(context).is_ok());
  auto out = run_dense(g, {{"data", random_tensor(DType::kF32, {4, 5}, 9)},
                           {"indices", tensor_of(DType::kI64, {3}, {1, 4, -2})}});
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), StatusCode::kOutOfRange) << out.status().to_string();
  EXPECT_NE(out.status().message().find("index 4 out of range [-4, 4)"), std::string::npos) << out.status().to_string();
}

}  // namespace
}  // namespace strider::cuda_test
