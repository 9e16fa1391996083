// Sessions under repetition and concurrency: bit-identical results over 200 runs, four
// sessions of two models from four threads, a session destroyed while another runs, and
// more than 64 host uploads between two synchronizations.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "exec/session_internal.h"
#include "ir/builder.h"
#include "support/test_util.h"

namespace strider {
namespace {

using testing::load_seed_model;
using testing::SeedModel;

std::unique_ptr<Session> open(const SeedModel& m, const std::string& layout, int queues = 2) {
  SessionOptions options;
  options.layout = *parse_layout(layout);
  options.queues = queues;
  auto session = create_session(m.graph, options);
  EXPECT_TRUE(session.is_ok()) << session.status().to_string();
  return session.is_ok() ? std::move(session).value() : nullptr;
}

Tensor run_once(Session& s, const Tensor& input) {
  auto out = s.run({input});
  EXPECT_TRUE(out.is_ok()) << out.status().to_string();
  return out.is_ok() ? (*out)[0] : Tensor();
}

TEST(Concurrency, TwoHundredRunsAreBitIdentical) {
  SeedModel m = load_seed_model("C2f_split_op17");
  auto session = open(m, "nhwc");
  ASSERT_NE(session, nullptr);
  Tensor first = run_once(*session, m.input);
  for (int i = 1; i < 200; ++i) ASSERT_TRUE(testing::same_tensor(run_once(*session, m.input), first)) << "run " << i;
}

TEST(Concurrency, FourSessionsOfTwoModelsFromFourThreads) {
  SeedModel a = load_seed_model("PointwiseC2f_split_op17"), b = load_seed_model("C2f_split_op17");
  Tensor lone_a = run_once(*open(a, "nhwc", 1), a.input), lone_b = run_once(*open(b, "nchw", 1), b.input);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const SeedModel& m = t % 2 ? b : a;
      auto session = open(m, t % 2 ? "nchw" : "nhwc");
      for (int i = 0; i < 30 && session; ++i)
        if (!testing::same_tensor(run_once(*session, m.input), t % 2 ? lone_b : lone_a)) ++mismatches;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, 0);
}

TEST(Concurrency, DestroyingASessionLeavesAnotherCorrect) {
  SeedModel a = load_seed_model("C2f_split_op17"), b = load_seed_model("PointwiseC2f_split_op17");
  auto keeper = open(a, "nhwc");
  Tensor expected = run_once(*keeper, a.input);
  std::atomic<bool> done{false};
  std::atomic<int> mismatches{0};
  std::thread runner([&] {
    while (!done)
      if (!testing::same_tensor(run_once(*keeper, a.input), expected)) ++mismatches;
  });
  for (int i = 0; i < 20; ++i) {
    auto doomed = open(b, "nchw", 3);
    run_once(*doomed, b.input);
    doomed.reset();  // destroyed while `keeper` runs on its own queues
  }
  done = true;
  runner.join();
  EXPECT_EQ(mismatches, 0);
}

// 70 inputs uploaded by the host before any synchronization, each read back intact
// through one concat (a well-known GPU runtime reused its 64 staging slots too early).
TEST(Concurrency, SeventyHostUploadsBetweenSynchronizations) {
  GraphBuilder b;
  std::vector<ValueId> inputs;
  for (int i = 0; i < 70; ++i) inputs.push_back(b.input("x" + std::to_string(i), DType::kF32, {3}));
  AttributeMap axis;
  axis.set_int("axis", 0);
  b.output(b.op("Concat", inputs, axis));
  Graph graph = b.build();
  for (const char* device : {"cpu", "sim"}) {
    SessionOptions options;
    options.device = device;
    options.queues = 2;
    options.sanitize = true;
    auto session = create_session(graph, options);
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    for (uint32_t round = 0; round < 3; ++round) {
      std::vector<Tensor> values;
      for (uint32_t i = 0; i < 70; ++i) values.push_back(testing::random_tensor(DType::kF32, {3}, 100 * round + i));
      auto out = (*session)->run(values);
      ASSERT_TRUE(out.is_ok()) << out.status().to_string();
      for (size_t i = 0; i < 70; ++i)
        for (int k = 0; k < 3; ++k)
          ASSERT_EQ((*out)[0].data<float>()[3 * i + size_t(k)], values[i].data<float>()[k]) << device << " input " << i;
    }
  }
}

}  // namespace
}  // namespace strider
