#include "strider/status.h"

#include <gtest/gtest.h>

namespace strider {
namespace {

Result<int> half(int x) {
  if (x % 2) return invalid_argument("input 'x': odd value " + std::to_string(x));
  return x / 2;
}

Result<int> quarter(int x) {
  STRIDER_ASSIGN_OR_RETURN(int h, half(x));
  STRIDER_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(Status, OkAndErrorCarryCodeAndMessage) {
  EXPECT_TRUE(Status::ok().is_ok());
  Status s = invalid_argument("input 'images' dim 2: got 1600, expected 640");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.to_string(), "INVALID_ARGUMENT: input 'images' dim 2: got 1600, expected 640");
  EXPECT_EQ(s.with_context("node 'Conv_3'").to_string(),
            "INVALID_ARGUMENT: node 'Conv_3': input 'images' dim 2: got 1600, expected 640");
}

TEST(Status, ResultPropagatesTheFirstError) {
  EXPECT_EQ(*quarter(12), 3);
  Result<int> r = quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "input 'x': odd value 3");
}

TEST(StatusDeathTest, ValueOfAnErrorAborts) {
  Result<int> r = invalid_argument("no");
  EXPECT_DEATH((void)r.value(), "");
}

}  // namespace
}  // namespace strider
