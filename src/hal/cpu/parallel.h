// Intra-op parallelism for strider's own CPU kernels.
//
// Who runs: a kernel splits its work over the team of the thread that runs it, which
// is the queue's worker; the worker's team size is the session's thread count
// (WorkerQueue / ScopedOmpThreads). oneDNN's primitives use the same team on the same
// worker, so a strider kernel and a oneDNN one never run at once and never add threads to
// each other: a session of N threads keeps at most N cores busy per queue.
//
// How much: a kernel says how many independent items it has and about how many elements
// one item touches. Waking a team costs a few microseconds, so each thread gets at least
// kMinWorkPerThread elements, and work below twice that runs on the calling thread alone:
// small ops stay sequential, large ones use the whole team.
//
// Whose threads: strider's own team (hal/cpu/own_team.h), unless STRIDER_CPU_TEAM=openmp.
// Debian's oneDNN 2.6 is built for the OpenMP runtime (DNNL_CPU_RUNTIME_OMP), so its
// threadpool interface is not there to plug a pool into; instead, under the own team every
// oneDNN primitive is created for one thread and cut into pieces that run side by side on
// the team (BandedConv, BandedMatMul), so that OpenMP never starts a team beside it (two
// pools awake at once would oversubscribe the cores). Measured on two vCPUs, one OpenMP
// region cost about 3 us, one hand-off to the own team about two cache-line transfers.
//
// The body must not throw (an exception may not leave an OpenMP region) and items must be
// independent: they run in any order, on any thread.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "hal/cpu/own_team.h"

namespace strider::cpu {

// 8192: at 16384 the C2f block's SiLU-and-add and channel-slice copies at 40x40 (25600
// elements) ran on one thread after a two-thread convolution and read half their input
// from the other core's cache (a Materialize 4 us at one thread, 11 us at two); at 8192
// its two-thread run() went 0.257 -> 0.220-0.235 ms, other models unchanged within noise.
inline constexpr int64_t kMinWorkPerThread = 8192;

// Compiles a hot non-template row loop three times (AVX-512, AVX2 + FMA, the x86-64
// baseline) and picks one per CPU when the program loads (an ifunc): the build targets the
// baseline, so auto-vectorized loops are otherwise SSE2-wide. Callees inlined into it
// (always_inline templates) are compiled for each target too.
// Not under ThreadSanitizer: clang instruments the ifunc resolver itself (a
// __tsan_func_entry call), which then runs during relocation, before the TSan runtime
// exists, and the test binary dies on load.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRIDER_CPU_NO_CLONES 1
#endif
#endif
#if defined(STRIDER_CPU_NO_CLONES) || defined(__SANITIZE_THREAD__)
#define STRIDER_CPU_CLONES
#else
#define STRIDER_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
// The calling thread's minimum (a worker's device may lower it for tests: DeviceOptions).
inline thread_local int64_t thread_min_work_per_thread = kMinWorkPerThread;

// Whether the calling thread may start a team. Only a queue's worker may (WorkerQueue
// sets this on its thread): a caller's thread uploading inputs, or one creating a session,
// stays alone. A team started on such a thread would be a second OpenMP pool beside the
// worker's, and libgomp, seeing more pool threads than cores, stops spin-waiting in every
// pool of the process: each later parallel region then sleeps and wakes (tens of us).
inline thread_local bool thread_starts_teams = false;

// Set when the calling thread started a team of two or more (strider's parallel_for, or a
// oneDNN primitive made for the session's team): a queue's worker reads and clears it
// around each command, and a waiter spins for a command that started none, whose team left
// the other cores idle (WorkerQueue::wait).
inline thread_local bool thread_started_team = false;

// The team size a kernel with `items` items of `work_per_item` elements each should use,
// at most `cap` (a kernel's per-thread scratch count).
inline int parallel_threads(int64_t items, int64_t work_per_item, int cap = 1 << 30) {
  if (!thread_starts_teams || omp_in_parallel() || in_own_team_part()) return 1;  // not a worker, or already in a team
  const int64_t work = items * std::max<int64_t>(work_per_item, 1);
  const int64_t by_work = work / std::max<int64_t>(thread_min_work_per_thread, 1);
  return int(std::max<int64_t>(1, std::min<int64_t>({by_work, items, omp_get_max_threads(), cap})));
}

// The size of the team parallel_for may start: the bound on `thread` in its body, for
// kernels that keep scratch per thread.
inline int max_parallel_threads() { return std::max(1, omp_get_max_threads()); }

// Calls body(begin, end, thread) over a split of [0, items) into contiguous ranges, one per
// thread of a team sized by parallel_threads(items, work_per_item, cap); thread < cap.
template <typename Body>
void parallel_for(int64_t items, int64_t work_per_item, Body&& body, int cap = 1 << 30) {
  if (items <= 0) return;
  const int threads = parallel_threads(items, work_per_item, cap);
  if (threads <= 1) {
    body(int64_t(0), items, 0);
    return;
  }
  thread_started_team = true;
  if (own_team_enabled()) {
    struct Split {
      Body* body;
      int64_t items;
      int threads;
    } split{&body, items, threads};
    run_on_own_team(threads, [](void* context, int t) {
      const Split& s = *static_cast<const Split*>(context);
      const int64_t begin = s.items * t / s.threads, end = s.items * (t + 1) / s.threads;
      if (begin < end) (*s.body)(begin, end, t);
    }, &split);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t team = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = items * t / team, end = items * (t + 1) / team;
    if (begin < end) body(begin, end, int(t));
  }
}

}  // namespace strider::cpu
