// The hazard tracker and the sanitizer on interval cases: partial overlap, nested views,
// interleaved slices, reuse after release, and the fewest waits.
#include <gtest/gtest.h>

#include "exec/hazard_tracker.h"
#include "exec/sanitizer.h"
#include "hal/device.h"

#include <cstring>

namespace strider {
namespace {

class TrackerTest : public ::testing::Test {
 protected:
  std::vector<std::byte> bytes = std::vector<std::byte>(1 << 14);
  Allocation arena{1, "arena", "cpu", bytes.data(), 1 << 14, 64, StorageMode::kHost, true};
  Allocation other{2, "other", "cpu", bytes.data(), 1 << 14, 64, StorageMode::kHost, true};

  TensorView dense(int64_t offset_elements, Shape sizes, const Allocation* a = nullptr) {
    return *make_dense_view(a ? *a : arena, offset_elements * 4, DType::kF32, std::move(sizes), "v");
  }
  static MemoryAccess read(TensorView v) { return {std::move(v), false, "r"}; }
  static MemoryAccess write(TensorView v) { return {std::move(v), true, "w"}; }
};

TEST_F(TrackerTest, RawWarWawAcrossQueuesNoneWithinOne) {
  HazardTracker t(3);
  TensorView x = dense(0, {64});
  EXPECT_TRUE(t.record({1, 1}, std::vector{write(x)}).empty());
  // Same queue: in order, no wait.
  EXPECT_TRUE(t.record({1, 2}, std::vector{read(x)}).empty());
  // RAW from queue 2: waits for the write (1, 1)... and the read (1, 2) is no conflict.
  auto raw = t.record({2, 1}, std::vector{read(x)});
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(raw[0].queue, 1);
  EXPECT_EQ(raw[0].value, 1u);
  // WAR: a write on the host waits for both readers, (1, 2) and (2, 1); neither implies
  // the other ((2, 1) waited only for (1, 1)).
  auto war = t.record({0, 1}, std::vector{write(x)});
  ASSERT_EQ(war.size(), 2u);
  // WAW: queue 1 writing again is ordered after its own read, but must wait for the host.
  auto waw = t.record({1, 3}, std::vector{write(x)});
  ASSERT_EQ(waw.size(), 1u);
  EXPECT_EQ(waw[0].queue, 0);
}

// An executor's lists are recorded by address (record_lasting), not copied: the waits must
// be the same as for copies, run after run, with the history bounded. The lists change
// between runs here only through the views they hold, as a plan's never do.
TEST_F(TrackerTest, LastingAccessesGiveTheWaitsCopiesGive) {
  HazardTracker copied(2), lasting(2);  // the host queue and one device queue
  const std::vector<MemoryAccess> upload = {write(dense(0, {32}))};
  const std::vector<MemoryAccess> steps = {read(dense(0, {32})), write(dense(32, {16})), read(dense(32, {8})),
                                           write(dense(64, {32}))};
  const std::vector<MemoryAccess> download = {read(dense(64, {32}))};
  uint64_t value[2] = {0, 0};
  for (int run = 0; run < 200; ++run) {
    for (const auto* accesses : {&upload, &steps, &download}) {
      const int queue = accesses == &steps ? 1 : 0;
      const Timepoint self{queue, ++value[queue]};
      auto want = copied.record(self, *accesses);
      auto got = lasting.record_lasting(self, *accesses);
      ASSERT_EQ(got.size(), want.size()) << "run " << run;
      for (size_t w = 0; w < want.size(); ++w) {
        EXPECT_EQ(got[w].queue, want[w].queue);
        EXPECT_EQ(got[w].value, want[w].value);
      }
      // The steps wait for the upload, the download for the steps; the next upload, which
      // overwrites what the steps read, is ordered after them through the download.
      EXPECT_EQ(want.size(), accesses == &upload ? 0u : 1u) << "run " << run;
    }
  }
  EXPECT_LT(lasting.history_size(), 64u);
  EXPECT_EQ(lasting.history_size(), copied.history_size());
}

TEST_F(TrackerTest, WaitsOnAQueueAreImpliedThroughAnotherQueue) {
  HazardTracker t(3);
  TensorView a = dense(0, {16}), b = dense(64, {16});
  t.record({1, 1}, std::vector{write(a)});
  // Queue 2 reads a (waits on (1, 1)) and writes b.
  auto first = t.record({2, 1}, std::vector{read(a), write(b)});
  ASSERT_EQ(first.size(), 1u);
  // The host reads a and b: waiting for (2, 1) implies (1, 1), so one wait.
  auto host = t.record({0, 1}, std::vector{read(a), read(b)});
  ASSERT_EQ(host.size(), 1u);
  EXPECT_EQ(host[0].queue, 2);
}

TEST_F(TrackerTest, PartialOverlapConflictsDisjointRangesDoNot) {
  HazardTracker t(3);
  t.record({1, 1}, std::vector{write(dense(0, {100}))});
  EXPECT_EQ(t.record({2, 1}, std::vector{read(dense(99, {10}))}).size(), 1u);  // shares element 99
  EXPECT_TRUE(t.record({2, 2}, std::vector{read(dense(100, {10}))}).empty());   // starts after it
  EXPECT_TRUE(t.record({2, 3}, std::vector{read(dense(0, {10}, &other))}).empty());  // another allocation
}

TEST_F(TrackerTest, NestedViewsAreTrackedOnTheirRoot) {
  HazardTracker t(3);
  TensorView root = dense(0, {12, 16});
  TensorView chunk = *slice_view(root, 1, 8, 16, 1);     // columns 8..15
  TensorView inner = *slice_view(chunk, 0, 6, 12, 1);    // rows 6..11 of that
  t.record({1, 1}, std::vector{write(inner)});
  // Reading the other columns of the same rows is no conflict; the root is.
  EXPECT_TRUE(t.record({2, 1}, std::vector{read(*slice_view(*slice_view(root, 1, 0, 8, 1), 0, 6, 12, 1))}).empty());
  EXPECT_EQ(t.record({2, 2}, std::vector{read(root)}).size(), 1u);
}

TEST_F(TrackerTest, InterleavedConcatSlicesDoNotConflict) {
  HazardTracker t(4);
  // Channels-last [1, 16, 4, 4]: channel slices interleave in memory.
  TensorView whole = *make_view(arena, 0, DType::kF32, {1, 16, 4, 4}, {256, 1, 64, 16}, "concat");
  t.record({1, 1}, std::vector{write(*slice_view(whole, 1, 0, 8, 1))});
  EXPECT_TRUE(t.record({2, 1}, std::vector{write(*slice_view(whole, 1, 8, 16, 1))}).empty());
  // The consumer of the whole concat waits for both producers.
  EXPECT_EQ(t.record({3, 1}, std::vector{read(whole)}).size(), 2u);
}

TEST_F(TrackerTest, ReusedBytesOrderTheNewWriterAfterTheOldReaders) {
  HazardTracker t(3);
  TensorView old_value = dense(0, {256}), new_value = dense(128, {64});  // the arena reused
  t.record({1, 1}, std::vector{write(old_value)});
  t.record({2, 1}, std::vector{read(old_value)});
  auto reuse = t.record({1, 2}, std::vector{write(new_value)});
  ASSERT_EQ(reuse.size(), 1u);  // WAR on queue 2's read
  EXPECT_EQ(reuse[0].queue, 2);
}

TEST_F(TrackerTest, HistoryStaysBoundedOverManyRuns) {
  HazardTracker t(3);
  TensorView x = dense(0, {64}), y = dense(64, {64});
  uint64_t host = 0, q1 = 0, q2 = 0;
  for (int run = 0; run < 1000; ++run) {
    t.record({0, ++host}, std::vector{write(x)});
    t.record({1, ++q1}, std::vector{read(x), write(y)});
    t.record({2, ++q2}, std::vector{read(y)});
    t.record({0, ++host}, std::vector{read(y)});
  }
  EXPECT_LT(t.history_size(), 200u);
}

// A queue that never records (told so) does not keep the history alive; the waits of the
// queues that do are the same as with every queue used.
TEST_F(TrackerTest, HistoryStaysBoundedWithAQueueThatNeverRecords) {
  HazardTracker told(3, {true, true, false}), untold(3);
  TensorView x = dense(0, {64}), y = dense(64, {64});
  uint64_t host = 0, q1 = 0;
  for (int run = 0; run < 1000; ++run) {
    for (auto* t : {&told, &untold}) {
      EXPECT_TRUE(t->record({0, host + 1}, std::vector{write(x)}).size() <= 1u);
      auto steps = t->record({1, q1 + 1}, std::vector{read(x), write(y)});
      ASSERT_EQ(steps.size(), 1u);
      EXPECT_EQ(steps[0].queue, 0);
      ASSERT_EQ(t->record({0, host + 2}, std::vector{read(y)}).size(), 1u);
    }
    host += 2;
    ++q1;
  }
  EXPECT_LT(told.history_size(), 200u);
  EXPECT_GT(untold.history_size(), 2000u) << "the unused queue 2 is never ordered after anything";
}

// A CUDA graph is one command with every step's accesses: a run is three records (upload,
// graph, download), so pruning every 64 records would let thousands of entries pile up.
TEST_F(TrackerTest, HistoryStaysBoundedWhenFewCommandsCarryManyAccesses) {
  HazardTracker t(2);
  TensorView input = dense(0, {64}), output = dense(64, {64});
  std::vector<MemoryAccess> graph{read(input), write(output)};
  for (int step = 0; step < 500; ++step) graph.push_back(write(dense(128 + 4 * step, {4})));
  uint64_t host = 0, device = 0;
  for (int run = 0; run < 100; ++run) {
    t.record({0, ++host}, std::vector{write(input)});
    EXPECT_EQ(t.record({1, ++device}, graph).size(), 1u);  // waits for the upload only
    EXPECT_EQ(t.record({0, ++host}, std::vector{read(output)}).size(), 1u);
  }
  EXPECT_LT(t.history_size(), 3 * graph.size());
}

TEST_F(TrackerTest, SanitizerReportsAMissingWaitAndAcceptsAPresentOne) {
  Sanitizer ordered(3), racy(3);
  TensorView x = dense(0, {64});
  std::vector<MemoryAccess> w = {{x, true, "x"}}, r = {{x, false, "x"}};
  std::vector<Timepoint> wait = {{1, 1}}, none;
  ordered.on_submit("Conv 'a'", {1, 1}, none, w);
  ordered.on_submit("Relu 'b'", {2, 1}, wait, r);
  EXPECT_TRUE(ordered.take_findings().empty());
  racy.on_submit("Conv 'a'", {1, 1}, none, w);
  racy.on_submit("Relu 'b'", {2, 1}, none, r);
  auto findings = racy.take_findings();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].find("RAW on cpu arena [0x0, 0x100)"), std::string::npos) << findings[0];
  EXPECT_NE(findings[0].find("Relu 'b' (queue 2)"), std::string::npos) << findings[0];
  EXPECT_NE(findings[0].find("Conv 'a' (queue 1)"), std::string::npos) << findings[0];
}

// Reuse after release: release waits for the last use to complete, so memory handed out
// again (the same bytes, a new Allocation) can never race with the old uses; the sim
// device also poisons it.
TEST(Release, WaitsForTheLastUseAndPoisonsReusedMemory) {
  auto device = create_device("sim", DeviceOptions{2, 7});
  ASSERT_TRUE(device.is_ok());
  Device& d = **device;
  Allocation* first = *d.allocate(256, 64, "first");
  std::byte* address = first->address();
  bool written = false;
  Timepoint use = d.queue(1).submit(Command{"write", [&](const QueueContext&) {
                                              std::memset(address, 0x11, 256);
                                              written = true;
                                              return Status::ok();
                                            },
                                            {}});
  EXPECT_FALSE(written);  // the sim holds it until a synchronization
  std::vector<Timepoint> last_uses = {use};
  d.release(first, last_uses);
  EXPECT_TRUE(written);  // released only after it ran
  Allocation* second = *d.allocate(256, 64, "second");
  EXPECT_EQ(second->address(), address);  // the pool handed the same bytes back...
  for (int i = 0; i < 256; ++i) ASSERT_EQ(uint8_t(second->address()[i]), 0xFF);  // ...poisoned
  d.release(second);
}

}  // namespace
}  // namespace strider
