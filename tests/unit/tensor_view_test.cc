#include "memory/tensor_view.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace strider {
namespace {

class TensorViewTest : public ::testing::Test {
 protected:
  std::vector<std::byte> storage = std::vector<std::byte>(4096);
  Allocation alloc{1, "arena#0", "cpu", storage.data(), 4096, 64, StorageMode::kHost, true};
};

TEST_F(TensorViewTest, NestedSlicesFlattenToTheRootWithAbsoluteOffsets) {
  auto base = make_dense_view(alloc, 64, DType::kF32, {12, 16}, "x");
  ASSERT_TRUE(base.is_ok());
  // Second chunk of the last dim (columns 8..15), then its second half (columns 12..15).
  auto chunk = slice_view(*base, 1, 8, 16, 1);
  ASSERT_TRUE(chunk.is_ok());
  EXPECT_EQ(chunk->allocation, &alloc);
  EXPECT_EQ(chunk->byte_offset, 64 + 8 * 4);
  EXPECT_EQ(chunk->strides, (Strides{16, 1}));
  auto inner = slice_view(*chunk, 1, 4, 8, 1);
  ASSERT_TRUE(inner.is_ok());
  EXPECT_EQ(inner->byte_offset, 64 + 12 * 4);
  // Rows 6..11 of that (first-dim chunk): offset grows by 6 rows of 16 elements.
  auto rows = slice_view(*inner, 0, 6, 12, 1);
  ASSERT_TRUE(rows.is_ok());
  EXPECT_EQ(rows->byte_offset, 64 + (12 + 6 * 16) * 4);
  EXPECT_EQ(rows->sizes, (Shape{6, 4}));
  EXPECT_FALSE(rows->is_contiguous());
}

TEST_F(TensorViewTest, NegativeStepSliceStartsAtTheLastElement) {
  auto base = make_dense_view(alloc, 0, DType::kF32, {10}, "x");
  auto reversed = slice_view(*base, 0, 9, -1, -2);  // elements 9, 7, 5, 3, 1
  ASSERT_TRUE(reversed.is_ok());
  EXPECT_EQ(reversed->sizes, (Shape{5}));
  EXPECT_EQ(reversed->strides, (Strides{-2}));
  EXPECT_EQ(reversed->byte_offset, 9 * 4);
  ByteRange range = footprint(*reversed);
  EXPECT_EQ(range.begin, 1 * 4);
  EXPECT_EQ(range.end, 10 * 4);
}

TEST_F(TensorViewTest, BroadcastUsesStrideZeroAndAFootprintOfTheSourceOnly) {
  auto row = make_dense_view(alloc, 128, DType::kF32, {1, 8}, "bias");
  auto wide = broadcast_view(*row, std::array<int64_t, 3>{4, 5, 8});
  ASSERT_TRUE(wide.is_ok());
  EXPECT_EQ(wide->strides, (Strides{0, 0, 1}));
  ByteRange range = footprint(*wide);
  EXPECT_EQ(range.begin, 128);
  EXPECT_EQ(range.end, 128 + 32);
  EXPECT_FALSE(broadcast_view(*row, std::array<int64_t, 2>{2, 3}).is_ok());
}

TEST_F(TensorViewTest, ViewOutsideItsAllocationIsAnErrorNamingBoth) {
  auto view = make_dense_view(alloc, 4000, DType::kF32, {8, 8}, "value 'x.3'");
  ASSERT_FALSE(view.is_ok());
  EXPECT_EQ(view.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(view.status().message().find("value 'x.3'"), std::string::npos);
  EXPECT_NE(view.status().message().find("arena#0"), std::string::npos);
  auto base = make_dense_view(alloc, 0, DType::kF32, {4, 4}, "x");
  // reinterpret adds to the offset: 1020 + 4 elements reaches past 4096 bytes.
  EXPECT_FALSE(reinterpret(*base, {4, 4}, {4, 1}, 1020).is_ok());
  EXPECT_TRUE(reinterpret(*base, {4, 4}, {4, 1}, 1008).is_ok());
  // A negative stride that walks below byte 0.
  EXPECT_FALSE(reinterpret(*base, {4}, {-1}, 2).is_ok());
}

TEST_F(TensorViewTest, ReinterpretOffsetIsAdditive) {
  auto base = make_dense_view(alloc, 256, DType::kF32, {4, 8}, "x");
  auto once = reinterpret(*base, {2, 8}, {8, 1}, 16);
  auto twice = reinterpret(*once, {8}, {1}, 3);
  ASSERT_TRUE(twice.is_ok());
  EXPECT_EQ(twice->byte_offset, 256 + (16 + 3) * 4);
}

TEST_F(TensorViewTest, TransposeAndReshapeOnlyWhenStridesAllow) {
  auto base = make_dense_view(alloc, 0, DType::kF32, {2, 3, 4}, "x");
  auto t = permute_view(*base, std::array<int64_t, 3>{2, 0, 1});
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->sizes, (Shape{4, 2, 3}));
  EXPECT_EQ(t->strides, (Strides{1, 12, 4}));
  // Merging the last two dims of a dense tensor is a view.
  auto merged = reshape_view(*base, std::array<int64_t, 2>{2, 12});
  ASSERT_TRUE(merged.has_value());
  EXPECT_EQ(merged->strides, (Strides{12, 1}));
  // In the transposed tensor, dims 1 and 2 (strides 12, 4) still merge; dims 0 and 1
  // (strides 1, 12) do not.
  auto tail = reshape_view(*t, std::array<int64_t, 2>{4, 6});
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(tail->strides, (Strides{1, 4}));
  EXPECT_FALSE(reshape_view(*t, std::array<int64_t, 2>{8, 3}).has_value());
  // Splitting a dim of a column slice keeps its row stride.
  auto cols = slice_view(*base, 2, 1, 3, 1);
  auto split = reshape_view(*cols, std::array<int64_t, 4>{2, 3, 1, 2});
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->strides[0], 12);
  EXPECT_EQ(split->strides[1], 4);
  EXPECT_EQ(split->strides[3], 1);
  EXPECT_FALSE(reshape_view(*cols, std::array<int64_t, 2>{3, 4}).has_value());
}

}  // namespace
}  // namespace strider
