// SessionOptions::threads on the CPU device: each queue's worker starts OpenMP teams (the
// ones oneDNN's kernels run on) of that many threads, whatever the process default; a
// session run with one thread computes what the default computes (to rounding).
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "exec/session_internal.h"
#include "hal/cpu/core_budget.h"
#include "hal/cpu/own_team.h"
#include "hal/cpu/worker_queue.h"
#include "hal/device.h"
#include "ir/builder.h"
#include "onnx/tensor_proto.h"
#include "strider/session.h"
#include "support/test_util.h"

namespace strider {
namespace {

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

int threads_seen_by_a_kernel(int threads) {
  DeviceOptions options;
  options.threads = threads;
  auto device = create_device("cpu", options);
  EXPECT_TRUE(device.is_ok());
  int seen = -1;
  (*device)->queue(1).submit({"probe", [&](const QueueContext&) {
                                seen = omp_get_max_threads();
                                return Status::ok();
                              }, {}});
  EXPECT_TRUE((*device)->synchronize().is_ok());
  return seen;
}

TEST(CpuThreads, EachQueueStartsTeamsOfTheSessionsSize) {
  EXPECT_EQ(threads_seen_by_a_kernel(1), 1);
  EXPECT_EQ(threads_seen_by_a_kernel(3), 3);
  EXPECT_EQ(threads_seen_by_a_kernel(0), omp_get_max_threads()) << "0 keeps the process default";
}

std::thread::id thread_running_a_command(int threads, int queues) {
  DeviceOptions options;
  options.threads = threads;
  options.queues = queues;
  auto device = create_device("cpu", options);
  EXPECT_TRUE(device.is_ok());
  std::thread::id ran;
  (*device)->queue(1).submit({"probe", [&](const QueueContext&) {
                                ran = std::this_thread::get_id();
                                return Status::ok();
                              }, {}});
  EXPECT_TRUE((*device)->synchronize().is_ok());
  return ran;
}

// One queue: nothing to overlap, so the queue runs each command in the submitting thread
// (no hand-off, and the caller's inputs stay in its core's cache), which starts the teams.
TEST(CpuThreads, OneQueueRunsInTheCallersThread) {
  EXPECT_EQ(thread_running_a_command(1, 1), std::this_thread::get_id());
  EXPECT_EQ(thread_running_a_command(2, 1), std::this_thread::get_id());
  EXPECT_NE(thread_running_a_command(1, 2), std::this_thread::get_id()) << "two queues overlap on workers";
}

TEST(CpuThreads, OneThreadComputesWhatTheDefaultDoes) {
  const auto dir = std::filesystem::path(STRIDER_SOURCE_DIR) / "models/seed/C2f_split_op17";
  auto input = read_tensor_pb((dir / "test_data_set_0/input_0.pb").string());
  ASSERT_TRUE(input.is_ok());
  SessionOptions one, every;
  one.threads = 1;
  auto a = Session::load((dir / "model.onnx").string(), one);
  auto b = Session::load((dir / "model.onnx").string(), every);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto x = (*a)->run({*input}), y = (*b)->run({*input});
  ASSERT_TRUE(x.is_ok() && y.is_ok());
  // Not bit for bit: oneDNN splits reductions differently for different team sizes.
  for (int64_t i = 0; i < (*x)[0].num_elements(); ++i)
    ASSERT_NEAR((*x)[0].data<float>()[i], (*y)[0].data<float>()[i], 1e-4) << "element " << i;
  one.threads = -1;
  EXPECT_EQ(Session::load((dir / "model.onnx").string(), one).status().code(), StatusCode::kInvalidArgument);
}

// Two products written in place into column slices of their Concat (strided outputs over
// dense inputs), big enough to be cut into pieces of rows on three threads
// (hal/cpu/matmul_kernels.cc's BandedMatMul): each piece runs into scratch of its own and
// copies its rows out. Three threads compute what one does.
TEST(CpuThreads, ProductsIntoAConcatInPiecesComputeWhatOneThreadDoes) {
  GraphBuilder b;
  ValueId a = b.input("a", DType::kF32, {301, 64});
  b.output(b.op("Concat", {b.op("MatMul", {a, b.constant("w1", testing::random_tensor(DType::kF32, {64, 24}, 2))}),
                           b.op("MatMul", {a, b.constant("w2", testing::random_tensor(DType::kF32, {64, 40}, 3))})},
                int_attribute("axis", 1)));
  const Graph graph = b.build();
  const Tensor input = testing::random_tensor(DType::kF32, {301, 64}, 1);
  std::vector<std::vector<Tensor>> results;
  for (int threads : {1, 3}) {
    SessionOptions options;
    options.threads = threads;
    auto session = create_session(graph, options);
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    auto out = (*session)->run({input});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    results.push_back(std::move(*out));
  }
  for (int64_t i = 0; i < results[0][0].num_elements(); ++i)
    ASSERT_NEAR(results[0][0].data<float>()[i], results[1][0].data<float>()[i], 1e-4) << "element " << i;
}

int threads_of_this_process() {
  int count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) ++count;
  return count;
}

// oneDNN fixes a primitive's team size when the primitive is created, from the creating
// thread's OpenMP setting. A one-thread session's kernels are created on this thread, whose
// default is every core: unless creation runs under the session's count, its weight
// reorders start a team here and its convolutions start teams on the worker. Counted in a
// fresh process (a death test re-executes the binary), where no earlier test made a team.
TEST(CpuThreadsDeathTest, AOneThreadSessionStartsNoOpenMpThreads) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "one core: every team is one thread anyway";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto dir = std::filesystem::path(STRIDER_SOURCE_DIR) / "models/seed/C2f_split_op17";
  EXPECT_EXIT(
      {
        auto input = read_tensor_pb((dir / "test_data_set_0/input_0.pb").string());
        const int before = threads_of_this_process();
        SessionOptions one;
        one.threads = 1;
        auto session = Session::load((dir / "model.onnx").string(), one);
        if (!session.is_ok() || !input.is_ok()) std::exit(2);
        for (int k = 0; k < 3; ++k)
          if (!(*session)->run({*input}).is_ok()) std::exit(2);
        const int running = threads_of_this_process();
        session->reset();
        const int after = threads_of_this_process();
        std::fprintf(stderr, "threads: %d before, %d with the session, %d after\n", before, running, after);
        std::exit(running == before && after == before ? 0 : 1);  // no worker: one queue runs inline
      },
      ::testing::ExitedWithCode(0), "");
}

// A two-thread session whose kernels are all too small to split (PointwiseC2f: 2k-32k
// multiply-adds each) starts no team either: its oneDNN primitives are made for one thread,
// and a gemm-based one (the 1x1 convolutions over channel slices run as oneDNN's gemm:jit
// matmul) sizes its team when it runs, so it runs under a one-thread setting
// (onednn_execute). Before, it started a team whose idle thread spun beside the waiter.
// Under strider's own team (hal/cpu/own_team.h) no oneDNN primitive may start an OpenMP
// team: libgomp's pool thread, spinning after its region beside the team's thread, made
// the steps after a channels-first MobileNetV2's pooling 30x slower on two cores. A
// two-thread session of the detector (convolutions, products, max pooling, resizes) adds
// exactly one thread to the process while it lives: its team's (the session's own, since
// session 29: it goes with the session).
TEST(CpuThreadsDeathTest, ATwoThreadSessionAddsOnlyItsTeamsThread) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "one core: every team is one thread anyway";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto dir = std::filesystem::path(STRIDER_SOURCE_DIR) / "models/real/YOLOv8ci_128_split_op17";
  EXPECT_EXIT(
      {
        auto input = read_tensor_pb((dir / "test_data_set_0/input_0.pb").string());
        const int before = threads_of_this_process();
        SessionOptions two;
        two.threads = 2;
        bool one_more = true;
        for (Layout layout : {Layout::kNchw, Layout::kNhwc}) {
          two.layout = layout;
          auto session = Session::load((dir / "model.onnx").string(), two);
          if (!session.is_ok() || !input.is_ok()) std::exit(2);
          for (int k = 0; k < 3; ++k)
            if (!(*session)->run({*input}).is_ok()) std::exit(2);
          const int running = threads_of_this_process();
          std::fprintf(stderr, "threads: %d before, %d with the session\n", before, running);
          one_more = one_more && running == before + 1;
        }
        const int after = threads_of_this_process();
        std::fprintf(stderr, "threads: %d after the sessions\n", after);
        std::exit(one_more && after == before ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(CpuThreadsDeathTest, ATwoThreadSessionOfSmallKernelsStartsNoOpenMpThreads) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "one core: every team is one thread anyway";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto dir = std::filesystem::path(STRIDER_SOURCE_DIR) / "models/seed/PointwiseC2f_split_op17";
  EXPECT_EXIT(
      {
        auto input = read_tensor_pb((dir / "test_data_set_0/input_0.pb").string());
        const int before = threads_of_this_process();
        SessionOptions two;
        two.threads = 2;
        auto session = Session::load((dir / "model.onnx").string(), two);
        if (!session.is_ok() || !input.is_ok()) std::exit(2);
        for (int k = 0; k < 3; ++k)
          if (!(*session)->run({*input}).is_ok()) std::exit(2);
        const int running = threads_of_this_process();
        std::fprintf(stderr, "threads: %d before, %d with the session\n", before, running);
        std::exit(running == before ? 0 : 1);  // no worker either: one queue runs inline
      },
      ::testing::ExitedWithCode(0), "");
}

// Every part of a fork runs exactly once, whether its team thread takes it or the master
// does (the thread asleep or without a core when the master's own part is done): masters
// on several threads fork at once, with idle gaps longer than a team thread's polling (so
// it sleeps and the master often runs its part) and back to back (so it takes it). Half the
// masters share one session's team (a server's connection threads taking turns at one
// instance): there a team thread that read one fork's epoch may wake into the next's.
TEST(OwnTeam, EveryPartRunsOnceWhoeverRunsIt) {
  if (!cpu::own_team_enabled()) GTEST_SKIP() << "STRIDER_CPU_TEAM=openmp";
  constexpr int kMasters = 4, kForks = 1000, kThreads = 3;
  struct Fork {
    std::atomic<int> runs[kThreads] = {};
    std::atomic<int> on_master{0};
    std::thread::id master;
  };
  std::atomic<int> wrong{0}, stolen{0};
  std::shared_ptr<cpu::SessionTeam> shared = cpu::make_session_team();
  auto master = [&](int m) {
    for (int f = 0; f < kForks; ++f) {
      cpu::ScopedSessionTeam session(m % 2 ? shared.get() : nullptr);
      Fork fork;
      fork.master = std::this_thread::get_id();
      cpu::run_on_own_team(kThreads, [](void* c, int t) {
        auto* fork = static_cast<Fork*>(c);
        fork->runs[t] += 1;
        if (t > 0 && std::this_thread::get_id() == fork->master) fork->on_master += 1;
      }, &fork);
      for (int t = 0; t < kThreads; ++t) wrong += fork.runs[t].load() == 1 ? 0 : 1;
      stolen += fork.on_master.load();
      if ((f + m) % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(f % 2 ? 500 : 20));
    }
  };
  std::vector<std::thread> masters;
  for (int m = 0; m < kMasters; ++m) masters.emplace_back(master, m);
  for (std::thread& t : masters) t.join();
  EXPECT_EQ(wrong.load(), 0);
  // Not asserted: how many parts the masters ran (it depends on the machine's scheduling).
  std::printf("parts run by their master instead of a sleeping team thread: %d of %d\n", stolen.load(),
              kMasters * kForks * (kThreads - 1));
}

// Two sessions of every core each, sharing the process's cores, run at once from two
// threads: without the core budget their teams overlap and keep twice the cores busy; with
// it they take turns, and every result stays right.
TEST(CpuThreads, SessionsRunningAtOnceKeepAtMostTheProcessCoresBusy) {
  const int cores = cpu::CoreBudget::process().cores();
  if (cores < 2) GTEST_SKIP() << "one core: a one-thread team cannot oversubscribe it";
  // strider's own team (hal/cpu/own_team.h) is instrumented; OpenMP's runtime is not.
  if (kThreadSanitizer && !cpu::own_team_enabled())
    GTEST_SKIP() << "ThreadSanitizer: OpenMP's runtime is not instrumented, so the teams of several threads this "
                    "test needs read as races inside it (it runs in the Release and ASan builds)";
  const auto dir = std::filesystem::path(STRIDER_SOURCE_DIR) / "models/seed/C2f_split_op17";
  auto input = read_tensor_pb((dir / "test_data_set_0/input_0.pb").string());
  ASSERT_TRUE(input.is_ok());
  SessionOptions options;
  options.threads = cores;
  options.share_cores = true;
  auto a = Session::load((dir / "model.onnx").string(), options);
  auto b = Session::load((dir / "model.onnx").string(), options);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto expected = (*a)->run({*input});
  ASSERT_TRUE(expected.is_ok());
  cpu::reset_busy_team_threads_peak();
  std::atomic<int> wrong{0};
  auto runs = [&](Session& session) {
    for (int k = 0; k < 200; ++k) {
      auto y = session.run({*input});
      if (!y.is_ok()) {
        ++wrong;
        continue;
      }
      for (int64_t i = 0; i < (*y)[0].num_elements(); ++i)
        if (std::abs((*y)[0].data<float>()[i] - (*expected)[0].data<float>()[i]) > 1e-4f) {
          ++wrong;
          break;
        }
    }
  };
  std::thread first([&] { runs(**a); }), second([&] { runs(**b); });
  first.join();
  second.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(cpu::busy_team_threads_peak(), cores) << "the runs were counted";
  EXPECT_LE(cpu::busy_team_threads_peak(), cores) << "two sessions' teams ran at once";
}

// A one-thread session on two cores leaves its waiter a core, and a waiter for a short
// command polls it (a wake-up costs more than such a command). For a long command it must
// sleep through most of it: polling through a 4-ms run kept a second core busy, and two
// one-thread processes on two cores each ran at half speed.
double waiter_cpu_ms_for_a_command_of(std::chrono::milliseconds length, cpu::WorkerQueue& queue) {
  auto busy = [length](const QueueContext&) {
    const auto until = std::chrono::steady_clock::now() + length;
    while (std::chrono::steady_clock::now() < until) {
    }
    return Status::ok();
  };
  EXPECT_TRUE(queue.wait(queue.submit({"first", busy, {}}).value).is_ok());  // the length the waiter expects
  timespec before{}, after{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &before);
  EXPECT_TRUE(queue.wait(queue.submit({"second", busy, {}}).value).is_ok());
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &after);
  return (after.tv_sec - before.tv_sec) * 1e3 + (after.tv_nsec - before.tv_nsec) * 1e-6;
}

TEST(CpuThreads, AWaiterSleepsThroughMostOfALongCommand) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: a waiter never polls";
  cpu::WorkerQueue* self = nullptr;
  cpu::WorkerQueue queue(1, [&](int) -> Queue& { return *self; }, 1);
  self = &queue;
  // A waiter that does not sleep first polls 1 ms + a quarter of the command (26 ms here)
  // before it sleeps; a sleeping one spends its wake-up and the final poll. The bound is
  // loose on purpose: under AddressSanitizer with another test process on the second
  // core, the final poll once ran 5 ms (the worker it waited for was preempted).
  const double waiter_ms = waiter_cpu_ms_for_a_command_of(std::chrono::milliseconds(100), queue);
  EXPECT_LT(waiter_ms, 12.0) << "the waiter polled through much of the 100-ms command";
}

// First come, first served: a two-core lease waiting behind a held core is not overtaken
// by a one-core lease asked later, though that one would fit at once.
TEST(CoreBudget, ALeaseWaitsForItsCoresAndLaterOnesWaitBehindIt) {
  cpu::CoreBudget budget(2);
  std::vector<int> order;
  std::mutex order_mutex;
  auto take = [&](int id, int cores) {
    auto lease = budget.acquire(cores);
    std::lock_guard lock(order_mutex);
    order.push_back(id);
    EXPECT_EQ(lease.cores(), std::min(cores, 2)) << "clamped to the budget";
  };
  auto taken = [&] {
    std::lock_guard lock(order_mutex);
    return order.size();
  };
  // Until `waiters` are waiting or some lease was granted (bounded: a broken budget fails,
  // never hangs).
  auto settle = [&](int waiters) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (budget.waiting() < waiters && taken() == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
  };
  std::optional<cpu::CoreBudget::Lease> held(budget.acquire(1));
  std::thread two([&] { take(2, 5); });
  settle(1);
  std::thread one([&] { take(1, 1); });
  settle(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard lock(order_mutex);
    EXPECT_TRUE(order.empty()) << "a later, smaller lease overtook the waiting one";
  }
  held.reset();
  two.join();
  one.join();
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
}

}  // namespace
}  // namespace strider
