// Checked arithmetic, printable text and the memory budget: the pieces every size, name
// and allocation from a model passes through.
#include <gtest/gtest.h>

#include <limits>

#include "base/check.h"
#include "base/checked_math.h"
#include "base/memory_budget.h"
#include "strider/printable.h"
#include "hal/kernel.h"
#include "ir/builder.h"
#include "passes/infer_shapes.h"
#include "strider/tensor.h"

namespace strider {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(CheckedInt, OverflowStaysInvalidAndExactResultsPass) {
  EXPECT_EQ((CheckedInt(6) * 7 + 1 - 3).get(), 40);
  EXPECT_FALSE((CheckedInt(kMax) + 1).ok());
  EXPECT_FALSE((CheckedInt(kMin) - 1).ok());
  EXPECT_FALSE((CheckedInt(int64_t(1) << 62) * 4).ok());
  EXPECT_FALSE((CheckedInt(kMin) / -1).ok());  // would trap
  EXPECT_FALSE((CheckedInt(5) / 0).ok());
  EXPECT_FALSE(((CheckedInt(kMax) + 1) - 5 + 5).ok());  // once invalid, always invalid
  EXPECT_EQ(checked_ceil_div(7, 2).get(), 4);
  EXPECT_EQ(checked_ceil_div(8, 2).get(), 4);
}

TEST(CheckedElementCount, BoundsBytesNotJustElements) {
  EXPECT_EQ(checked_element_count(std::vector<int64_t>{2, 3, 4}, 4), 24);
  EXPECT_EQ(checked_element_count(std::vector<int64_t>{}, 4), 1);
  EXPECT_EQ(checked_element_count(std::vector<int64_t>{0, int64_t(1) << 50}, 4), 0);
  EXPECT_FALSE(checked_element_count(std::vector<int64_t>{0, int64_t(1) << 40, int64_t(1) << 40}, 4));  // strides would overflow
  EXPECT_FALSE(checked_element_count(std::vector<int64_t>{int64_t(1) << 62, 4}, 4));  // wraps to 0 unchecked
  EXPECT_FALSE(checked_element_count(std::vector<int64_t>{int64_t(1) << 31, int64_t(1) << 31}, 4));
  EXPECT_FALSE(checked_element_count(std::vector<int64_t>{3, -1}, 4));
  EXPECT_TRUE(checked_element_count(std::vector<int64_t>{int64_t(1) << 50}, 4));
  EXPECT_FALSE(checked_element_count(std::vector<int64_t>{int64_t(1) << 51}, 4));  // 2^53 bytes
}

TEST(CheckedConversions, FloatToIntegerIsDefinedForEveryInput) {
  EXPECT_EQ(checked_double_to_int(3.9), 3);
  EXPECT_FALSE(checked_double_to_int(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(checked_double_to_int(std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(checked_double_to_int(9.3e18));
  EXPECT_FALSE(checked_double_to_int(-5, 0));
  EXPECT_EQ(saturate_to_int<int32_t>(1e30), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(saturate_to_int<uint8_t>(-std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(saturate_to_int<int8_t>(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(saturate_to_int<int64_t>(-2.5), -2);
  EXPECT_EQ(wrapping_mul<int64_t>(8, -9223372036854775806), 16);
  EXPECT_EQ(wrapping_neg<int64_t>(kMin), kMin);
  EXPECT_EQ(wrapping_add<int32_t>(std::numeric_limits<int32_t>::max(), 1), std::numeric_limits<int32_t>::min());
}

TEST(Printable, EscapesControlBytesAndCutsLongNames) {
  EXPECT_EQ(printable("conv_1"), "conv_1");
  EXPECT_EQ(printable("a\nb\x1b[31m\t\x7f"), "a\\nb\\x1b[31m\\t\\x7f");
  std::string cut = printable(std::string(1000, 'n'), 10);
  EXPECT_EQ(cut, "nnnnnnnnnn... (1000 bytes)");
  // The Status constructor escapes whatever was formatted into a message, and caps it.
  Status s = invalid_model("node 'x\ny'" + std::string(5000, 'z'));
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  EXPECT_LE(s.message().size(), Status::kMaxMessageBytes + 32);
  // A HAZARD report keeps one finding per line.
  EXPECT_NE(Status(StatusCode::kHazard, "one\ntwo").message().find('\n'), std::string::npos);
}

// An internal check names the source file, never the path the build's sources lay at.
TEST(InternalCheck, NamesTheFileNotItsPath) {
  EXPECT_DEATH(STRIDER_CHECK(1 + 1 == 3, "a planted {}", "failure"),
               "strider: internal check failed at guard_tests\\.cc:[0-9]+: 1 \\+ 1 == 3: a planted failure");
}

TEST(MemoryBudget, ReservesUntilTheLimitAndNamesWhatAsked) {
  MemoryBudget budget(1000);
  EXPECT_TRUE(budget.reserve(600, "the arena").is_ok());
  Status s = budget.reserve(500, "folded constant 'c'");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("folded constant 'c' needs"), std::string::npos) << s.message();
  EXPECT_EQ(budget.used(), 600);  // a refused reservation takes nothing
  budget.release(600);
  EXPECT_TRUE(budget.reserve(1000, "all of it").is_ok());
  EXPECT_EQ(parse_byte_size("1GiB"), int64_t(1) << 30);
  EXPECT_EQ(parse_byte_size("512M"), int64_t(512) << 20);
  EXPECT_EQ(parse_byte_size("1000"), 1000);
  EXPECT_EQ(parse_byte_size("1.5K"), 1536);
  EXPECT_FALSE(parse_byte_size("lots"));
  EXPECT_FALSE(parse_byte_size("-1G"));
  EXPECT_FALSE(parse_byte_size("1e30"));
  EXPECT_FALSE(parse_byte_size("4Q"));
}

TEST(TensorCreate, RefusesWhatCannotBeDescribedOrAfforded) {
  EXPECT_EQ(Tensor::create(DType::kF32, {int64_t(1) << 62, 4}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::create(DType::kF32, {3, -2}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::create(DType::kF32, {1 << 20}, 1 << 20).status().code(), StatusCode::kResourceExhausted);
  auto ok = Tensor::create(DType::kI64, {3, 5}, 1 << 20);
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(ok->byte_size(), 120u);
}

// The last line before a kernel indexes memory: a view that leaves its allocation (what a
// wrapped element count made of the 150-byte Gather model: a 0-byte buffer read by the
// declared shape) or that does not describe its value never reaches a kernel.
TEST(KernelViews, AViewPastItsAllocationOrNotItsValueIsRefused) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {4});
  b.output(b.op("Relu", {x}, {}, "relu"));
  Graph g = b.build();
  ASSERT_TRUE(infer_and_fold(g).is_ok());
  const Node& node = g.node(0);
  std::vector<std::byte> bytes(64);
  Allocation small(1, "arena", "cpu", bytes.data(), 8, 64, StorageMode::kHost, true);
  Allocation enough(2, "arena", "cpu", bytes.data(), 64, 64, StorageMode::kHost, true);
  TensorView in{&enough, 0, DType::kF32, {4}, {1}};
  TensorView out{&enough, 16, DType::kF32, {4}, {1}};
  Status fine = check_kernel_views(KernelRequest{g, node, {in}, {out}});
  EXPECT_TRUE(fine.is_ok()) << fine.to_string();
  TensorView past{&small, 0, DType::kF32, {4}, {1}};  // 16 bytes in an allocation of 8
  Status s = check_kernel_views(KernelRequest{g, node, {past}, {out}});
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("outside allocation"), std::string::npos) << s.message();
  TensorView wide{&enough, 0, DType::kF32, {8}, {1}};  // inside, but not the value's shape
  EXPECT_EQ(check_kernel_views(KernelRequest{g, node, {in}, {wide}}).code(), StatusCode::kInternal);
  TensorView overflowing{&enough, 0, DType::kF32, {4}, {int64_t(1) << 62}};
  EXPECT_EQ(check_kernel_views(KernelRequest{g, node, {overflowing}, {out}}).code(), StatusCode::kInternal);
  EXPECT_EQ(check_kernel_views(KernelRequest{g, node, {}, {out}}).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace strider
