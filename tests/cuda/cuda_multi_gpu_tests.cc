// Issue 17: a session given cuda:1 never touches GPU 0. A CUDA call on a thread whose current
// device was never set works on GPU 0 and makes its primary context there (hundreds of MiB
// of GPU 0's memory): a session on cuda:1 must set its device on every thread it calls CUDA
// from (its queues, the pinned-staging copy threads). The check asks the driver whether GPU
// 0's primary context is active in this process (cuDevicePrimaryCtxGetState, found in
// libcuda with dlsym: it makes no context itself), before and after a session on cuda:1 is
// created, runs with inputs large enough to use the staging threads, and is destroyed; and
// that GPU 1's is active after it (so the check sees contexts at all). Its own binary: a
// test before it in the same process could have made GPU 0's context. Skips with fewer than
// two GPUs (nvidia-h200-x2 has two).
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <random>

#include "exec/session_internal.h"
#include "ir/builder.h"

namespace strider {
namespace {

// Whether GPU `ordinal`'s primary context is active in this process; nullopt when the
// driver cannot say.
std::optional<bool> primary_context_active(int ordinal) {
  using InitFn = int (*)(unsigned);
  using StateFn = int (*)(int, unsigned*, int*);
  static void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  if (!driver) return std::nullopt;
  static auto init = reinterpret_cast<InitFn>(dlsym(driver, "cuInit"));
  static auto state = reinterpret_cast<StateFn>(dlsym(driver, "cuDevicePrimaryCtxGetState"));
  if (!init || !state || init(0) != 0) return std::nullopt;
  unsigned flags = 0;
  int active = 0;
  if (state(ordinal, &flags, &active) != 0) return std::nullopt;
  return active != 0;
}

Tensor random_matrix(int64_t rows, int64_t columns, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Tensor t(DType::kF32, {rows, columns});
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

TEST(MultiGpu, ASessionOnCuda1LeavesGpu0Untouched) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2)
    GTEST_SKIP() << "no CUDA device: a second GPU (cuda:1) is needed; this machine has " << gpus;
  ASSERT_EQ(primary_context_active(0), std::optional<bool>(false)) << "GPU 0 had a context before the session";
  {
    // 4 MiB inputs and output: several 1-MiB parts, so the staging threads copy them.
    GraphBuilder b;
    b.output(b.op("Add", {b.input("a", DType::kF32, {1024, 1024}), b.input("b", DType::kF32, {1024, 1024})}));
    SessionOptions options;
    options.device = "cuda:1";
    auto session = create_session(b.build(), options);
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    const std::vector<Tensor> inputs = {random_matrix(1024, 1024, 1), random_matrix(1024, 1024, 2)};
    for (int run = 0; run < 3; ++run) {
      auto outputs = (*session)->run(inputs);
      ASSERT_TRUE(outputs.is_ok()) << outputs.status().to_string();
      const Tensor& sum = (*outputs)[0];
      for (int64_t i = 0; i < sum.num_elements(); i += 4099)
        ASSERT_EQ(sum.data<float>()[i], inputs[0].data<float>()[i] + inputs[1].data<float>()[i]) << i;
    }
    EXPECT_EQ(primary_context_active(1), std::optional<bool>(true)) << "the session's own GPU shows no context";
  }
  EXPECT_EQ(primary_context_active(0), std::optional<bool>(false)) << "the session on cuda:1 made a context on GPU 0";
}

}  // namespace
}  // namespace strider
