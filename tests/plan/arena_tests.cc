// plan/arena.cc's packer against the plain algorithm it must equal: largest first, each
// buffer in the smallest gap among every placed buffer whose lifetime overlaps its own.
// The packer finds those buffers through an index over the steps; on seeded random
// lifetimes (long and short, some never live, some not in the arena) the offsets must be
// the plain algorithm's, and no two buffers live at once may share a byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "plan/planner_state.h"

namespace strider::plan_internal {
namespace {

// The packer before its lifetime index: every placed buffer tested.
int64_t pack_by_scanning(std::vector<PlanBuffer>& buffers) {
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].kind == StorageKind::kArena) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size) return buffers[a].size > buffers[b].size;
    return buffers[a].first_step < buffers[b].first_step;
  });
  int64_t arena = 0;
  std::vector<size_t> placed;
  for (size_t i : order) {
    PlanBuffer& b = buffers[i];
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t j : placed)
      if (buffers[j].first_step <= b.last_step && b.first_step <= buffers[j].last_step)
        taken.emplace_back(buffers[j].offset, buffers[j].offset + align_up(buffers[j].size));
    std::sort(taken.begin(), taken.end());
    int64_t best = -1, best_gap = 0, cursor = 0;
    for (const auto& [begin, end] : taken) {
      if (begin - cursor >= align_up(b.size) && (best < 0 || begin - cursor < best_gap)) best = cursor, best_gap = begin - cursor;
      cursor = std::max(cursor, end);
    }
    b.offset = best >= 0 ? best : cursor;
    arena = std::max(arena, b.offset + align_up(b.size));
    placed.push_back(i);
  }
  return arena;
}

std::vector<PlanBuffer> random_buffers(uint32_t seed, int count, int steps) {
  std::mt19937 random(seed);
  std::vector<PlanBuffer> buffers(static_cast<size_t>(count));
  for (PlanBuffer& b : buffers) {
    const int kind = int(random() % 10);
    b.kind = kind == 0 ? StorageKind::kConstant : StorageKind::kArena;
    b.size = int64_t(1 + random() % 4) * int64_t(1 + random() % 5000);  // repeated sizes too
    b.first_step = int(random() % uint32_t(steps));
    const int span = random() % 4 == 0 ? int(random() % uint32_t(steps)) : int(random() % 6);
    b.last_step = std::min(steps - 1, b.first_step + span);
    if (kind == 1) b.first_step = steps, b.last_step = -1;  // written by no step, read by none
  }
  return buffers;
}

TEST(ArenaPacking, EqualsTheBestFitOverEveryPlacedBuffer) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    const int steps = 1 + int(seed * 7 % 300);
    std::vector<PlanBuffer> indexed = random_buffers(seed, 50 + int(seed) * 10, steps), scanned = indexed;
    const int64_t arena = pack_arena(indexed, true);
    EXPECT_EQ(arena, pack_by_scanning(scanned));
    for (size_t i = 0; i < indexed.size(); ++i) EXPECT_EQ(indexed[i].offset, scanned[i].offset) << "buffer " << i;
    for (size_t i = 0; i < indexed.size(); ++i)
      for (size_t j = i + 1; j < indexed.size(); ++j) {
        const PlanBuffer &a = indexed[i], &b = indexed[j];
        if (a.kind != StorageKind::kArena || b.kind != StorageKind::kArena) continue;
        if (a.first_step > b.last_step || b.first_step > a.last_step) continue;
        const bool apart = a.offset + align_up(a.size) <= b.offset || b.offset + align_up(b.size) <= a.offset;
        EXPECT_TRUE(apart) << "buffers " << i << " and " << j << " are live together on shared bytes";
      }
  }
}

}  // namespace
}  // namespace strider::plan_internal
