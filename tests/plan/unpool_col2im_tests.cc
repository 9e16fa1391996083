// The scatter-like ops strider writes as expansions, against the float64 reference on cpu
// and on sim (seeded random order, two queues, sanitizer), in both layouts:
// - MaxUnpool (ConstantOfShape, ScatterElements, Reshape, then Pad for output_shape) fed
//   by MaxPool's indices;
// - Col2Im (a grouped ConvTranspose with one-hot weights), including images the block
//   places do not cover exactly (the output_padding) and 1-D and 3-D images.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "plan_test_util.h"
#include "reference/reference.h"

namespace strider {
namespace {

struct UnpoolCase {
  Shape x;
  std::vector<int64_t> kernel, strides;
  std::optional<std::vector<int64_t>> output_shape;
};

Graph pool_then_unpool(const UnpoolCase& c) {
  GraphBuilder b(11);
  AttributeMap pool;
  pool.set_ints("kernel_shape", c.kernel);
  pool.set_ints("strides", c.strides);
  auto pooled = b.ops("MaxPool", {b.input("x", DType::kF32, c.x)}, 2, pool);
  std::vector<ValueId> in{pooled[0], pooled[1]};
  if (c.output_shape)
    in.push_back(b.constant("output_shape", Tensor::from_values<int64_t>(DType::kI64, {int64_t(c.output_shape->size())}, *c.output_shape)));
  b.output(b.op("MaxUnpool", in, pool, "unpool"));
  return b.build();
}

TEST(MaxUnpool, ScattersWhatMaxPoolKeptOnEveryDevice) {
  for (const UnpoolCase& c : {UnpoolCase{{2, 3, 6, 8}, {2, 2}, {2, 2}, std::nullopt}, UnpoolCase{{1, 2, 7, 5}, {3, 2}, {2, 1}, std::nullopt},
                        UnpoolCase{{2, 2, 6, 6}, {2, 2}, {2, 2}, std::vector<int64_t>{2, 2, 7, 8}},
                        UnpoolCase{{1, 2, 4, 6, 4}, {2, 2, 2}, {2, 2, 2}, std::nullopt}})
    for (const char* device : {"cpu", "sim"})
      for (Layout layout : {Layout::kNchw, Layout::kNhwc}) {
        SCOPED_TRACE(shape_to_string(c.x) + " on " + device);
        SessionOptions options;
        options.device = device;
        options.layout = layout;
        if (std::string(device) == "sim") options.queues = 2, options.sanitize = true;
        testing::expect_session_matches_reference(pool_then_unpool(c), options, testing::random_f32(c.x, 9), DType::kF32);
      }
}

struct Col2ImCase {
  std::vector<int64_t> image, block, strides, dilations, pads;
  int64_t channels, places;
};

TEST(Col2Im, SumsEveryBlockValueIntoItsPixelOnEveryDevice) {
  // places per dim: (image + pads - ((block - 1) dilation + 1)) / stride + 1
  for (const Col2ImCase& c : {Col2ImCase{{5, 6}, {2, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 3, 4 * 4},
                              Col2ImCase{{7, 6}, {3, 2}, {2, 2}, {1, 2}, {1, 0, 1, 1}, 2, 4 * 3},
                              Col2ImCase{{8}, {3}, {2}, {1}, {0, 0}, 4, 3},  // covers 7 of 8 pixels
                              Col2ImCase{{3, 4, 3}, {2, 2, 2}, {1, 2, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, 2, 2 * 2 * 2}})
    for (const char* device : {"cpu", "sim"})
      for (Layout layout : {Layout::kNchw, Layout::kNhwc}) {
        GraphBuilder b(18);
        int64_t block = 1;
        for (int64_t d : c.block) block *= d;
        const Shape x{2, c.channels * block, c.places};
        AttributeMap attributes;
        attributes.set_ints("strides", c.strides);
        attributes.set_ints("dilations", c.dilations);
        attributes.set_ints("pads", c.pads);
        auto ints = [](const std::vector<int64_t>& v) {
          return Tensor::from_values<int64_t>(DType::kI64, {int64_t(v.size())}, v);
        };
        b.output(b.op("Col2Im", {b.input("x", DType::kF32, x), b.constant("image", ints(c.image)), b.constant("block", ints(c.block))},
                      attributes, "col2im"));
        SCOPED_TRACE(shape_to_string(x) + " on " + device);
        SessionOptions options;
        options.device = device;
        options.layout = layout;
        if (std::string(device) == "sim") options.queues = 2, options.sanitize = true;
        testing::expect_session_matches_reference(b.build(), options, testing::random_f32(x, 11), DType::kF32);
      }
}

}  // namespace
}  // namespace strider
