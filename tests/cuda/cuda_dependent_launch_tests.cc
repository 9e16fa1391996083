// strider's kernels are programmatic dependent launches (hal/cuda/dependent_launch.cuh):
// the next kernel's blocks may be resident while the one before still runs, and only the
// wait each kernel opens with orders its reads after the producer's writes. This test
// makes that wait matter: a producer of one block that runs for a long time (ReduceSum of
// 4M elements in a single row) and a consumer that reads its one-element result at once
// (a Mul). Without the wait the consumer reads the buffer before the sum lands: the
// previous run's sum, which every run changes (seeded inputs differ per run). With one
// queue (a CUDA graph replayed) and two (eager launches on each queue's stream), and with
// the whole plan as a graph turned off.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <random>

#include "ir/builder.h"
#include "exec/session_internal.h"

namespace strider {
namespace {

constexpr int64_t kRow = int64_t(1) << 22;
constexpr int64_t kColumns = 4096;

Tensor random_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Tensor t(DType::kF32, {1, n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = uniform(rng);
  return t;
}

void check_consumer_sees_the_sum(int queues, bool cuda_graph) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 1)
    GTEST_SKIP() << "no CUDA device: the dependent-launch test runs on a GPU only";
  GraphBuilder b;
  AttributeMap keep;
  keep.set_int("keepdims", 1);
  const std::vector<int64_t> axis = {1};
  ValueId sum = b.op("ReduceSum", {b.input("x", DType::kF32, {1, kRow}),
                                   b.constant("axes", Tensor::from_values<int64_t>(DType::kI64, {1}, axis))},
                     keep);
  b.output(b.op("Mul", {sum, b.input("y", DType::kF32, {1, kColumns})}));
  SessionOptions options;
  options.device = "cuda";
  options.queues = queues;
  options.cuda_graph = cuda_graph;
  auto session = create_session(b.build(), options);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  for (uint32_t run = 0; run < 6; ++run) {
    const std::vector<Tensor> inputs = {random_row(kRow, 100 + run), random_row(kColumns, 200 + run)};
    double expected_sum = 0;
    for (int64_t i = 0; i < kRow; ++i) expected_sum += inputs[0].data<float>()[i];
    auto outputs = (*session)->run(inputs);
    ASSERT_TRUE(outputs.is_ok()) << outputs.status().to_string();
    const Tensor& out = (*outputs)[0];
    for (int64_t j = 0; j < kColumns; j += 97) {
      const double want = expected_sum * inputs[1].data<float>()[j];
      ASSERT_NEAR(out.data<float>()[j], want, 1e-3 * std::abs(expected_sum) + 1e-2)
          << "run " << run << ", column " << j << ": the Mul read the sum before the ReduceSum wrote it";
    }
  }
}

TEST(DependentLaunch, ConsumerReadsWhatItsProducerWroteInAGraph) { check_consumer_sees_the_sum(1, true); }
TEST(DependentLaunch, ConsumerReadsWhatItsProducerWroteEagerly) { check_consumer_sees_the_sum(1, false); }
TEST(DependentLaunch, ConsumerReadsWhatItsProducerWroteTwoQueues) { check_consumer_sees_the_sum(2, false); }

}  // namespace
}  // namespace strider
