// The batcher (tools/serve/batcher.h) over real DynamicSessions, without a server: which
// requests merge (same non-batch sizes only), that each gets its own rows, that a delay
// gathers the requests that come within it, and that an expired request never runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>

#include "batcher.h"

namespace strider::serve {
namespace {

const std::string kBert = std::string(STRIDER_SOURCE_DIR) + "/models/dynamic/BertEncoder_dynamic/model.onnx";

std::unique_ptr<DynamicSession> bert() {
  SessionOptions options;
  options.threads = 1;
  auto session = DynamicSession::load(kBert, options);
  EXPECT_TRUE(session.is_ok()) << session.status().to_string();
  return std::move(*session);
}

// Token ids in the vocabulary and a padding mask, `rows` x `length`, seeded.
std::map<std::string, Tensor> tokens(int64_t rows, int64_t length, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor ids(DType::kI64, {rows, length}), mask(DType::kI64, {rows, length});
  for (int64_t i = 0; i < rows * length; ++i) {
    ids.data<int64_t>()[i] = int64_t(rng() % 100);
    mask.data<int64_t>()[i] = i % length < length - int64_t(seed % 3) ? 1 : 0;
  }
  return {{"input_ids", ids}, {"attention_mask", mask}};
}

// Submits every request from its own thread at once; their outcomes in order.
std::vector<Batcher::Outcome> submit_together(Batcher& batcher, const std::vector<std::map<std::string, Tensor>>& requests,
                                              const RequestLimits& limits = {}) {
  std::vector<Batcher::Outcome> outcomes(requests.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < requests.size(); ++k)
    threads.emplace_back([&, k] { outcomes[k] = batcher.submit(requests[k], limits); });
  for (std::thread& t : threads) t.join();
  return outcomes;
}

TEST(Batcher, RequestsOfOneLengthMergeAndEachGetsItsOwnRows) {
  auto session = bert();
  ASSERT_EQ(Batcher::batchable(*session), "");
  // A long delay: every request below arrives within it, so what merges is decided by shape.
  Batcher batcher({session.get()}, 8, std::chrono::milliseconds(400), /*measured=*/false);
  std::vector<std::map<std::string, Tensor>> requests = {tokens(1, 6, 1), tokens(2, 6, 2), tokens(1, 9, 3),
                                                         tokens(1, 6, 4)};
  std::vector<Batcher::Outcome> outcomes = submit_together(batcher, requests);
  EXPECT_EQ(batcher.stats().batches.load(), 2) << "length 6 (4 rows) and length 9 (1 row)";
  EXPECT_EQ(batcher.stats().rows.load(), 5);
  auto alone = bert();
  for (size_t k = 0; k < requests.size(); ++k) {
    ASSERT_TRUE(outcomes[k].outputs.is_ok()) << outcomes[k].outputs.status().to_string();
    auto expected = alone->run(requests[k]);
    ASSERT_TRUE(expected.is_ok());
    for (size_t o = 0; o < expected->size(); ++o) {
      const Tensor &got = (*outcomes[k].outputs)[o], &want = (*expected)[o];
      ASSERT_EQ(got.shape(), want.shape()) << "request " << k << " output " << o;
      for (int64_t i = 0; i < want.num_elements(); ++i)
        ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4f * (1 + std::abs(want.data<float>()[i])))
            << "request " << k << " output " << o << " element " << i;
    }
  }
}

TEST(Batcher, ARequestPastItsDeadlineOrCancelledNeverRuns) {
  auto session = bert();
  Batcher batcher({session.get()}, 8, std::chrono::milliseconds(100), /*measured=*/false);
  RequestLimits past;
  past.deadline = Clock::now();
  Batcher::Outcome late = batcher.submit(tokens(1, 5, 1), past);
  EXPECT_FALSE(late.outputs.is_ok());
  EXPECT_EQ(late.outputs.status().message(), "the request's timeout passed while it waited");
  RequestLimits gone;
  gone.cancelled = [] { return true; };
  Batcher::Outcome left = batcher.submit(tokens(1, 5, 2), gone);
  EXPECT_EQ(left.outputs.status().message(), "the client went away while the request waited");
  EXPECT_EQ(batcher.stats().batches.load(), 0) << "neither ran";
  EXPECT_TRUE(batcher.submit(tokens(1, 5, 3), {}).outputs.is_ok());
  EXPECT_EQ(batcher.stats().batches.load(), 1);
}

// Where the model's other dims are static, prepare() plans and times every size and caps
// batches at the smallest whose time per row is within kMergeMargin of the best; elsewhere it plans
// nothing ahead and keeps max_batch.
TEST(Batcher, TheCapIsTheSmallestSizeNearTheBestTimePerRow) {
  SessionOptions options;
  options.threads = 1;
  auto cnn = DynamicSession::load(std::string(STRIDER_SOURCE_DIR) + "/models/dynamic/SmallCnn_dynamic_batch/model.onnx", options);
  ASSERT_TRUE(cnn.is_ok());
  Batcher measured({cnn->get()}, 4, std::chrono::microseconds(0), /*measured=*/true);
  ASSERT_TRUE(measured.prepare().is_ok());
  const std::vector<double>& seconds = measured.row_seconds();
  ASSERT_EQ(seconds.size(), 4u);
  const double best = *std::min_element(seconds.begin(), seconds.end());
  int expected = 1;
  while (seconds[size_t(expected - 1)] > best * (1.0 + Batcher::kMergeMargin)) ++expected;
  EXPECT_EQ(measured.max_batch(), expected);
  auto session = bert();
  Batcher open_length({session.get()}, 4, std::chrono::microseconds(0), /*measured=*/true);
  ASSERT_TRUE(open_length.prepare().is_ok());
  EXPECT_TRUE(open_length.row_seconds().empty()) << "BERT's sequence dim is open: nothing to plan ahead";
  EXPECT_EQ(open_length.max_batch(), 4);
}

}  // namespace
}  // namespace strider::serve
