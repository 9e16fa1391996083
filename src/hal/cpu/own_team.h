// Strider's own fork-join team: the threads that run a CPU kernel's parallel parts beside
// the thread that runs the kernel (the team's master, a queue's worker or the caller).
//
// Why not OpenMP's: on the 2-vCPU VMs this project is measured on, one libgomp parallel
// region costs about 3 us even when its threads spin (`#pragma omp parallel` with an empty
// body, OMP_WAIT_POLICY=active or not), while a cache line goes from one vCPU to the other
// in about 0.2 us. A run of the C2f block at 40x40 opens about 13 regions, 40 us of its
// 0.21 ms on two threads. This team hands a part to each thread with one cache line
// written by the master and one written back by each thread: about two line transfers.
//
// Who uses it: with STRIDER_CPU_TEAM=own (the default, see own_team_enabled) strider's
// parallel_for runs on it, and every oneDNN primitive is created for one thread and run
// as pieces (bands of rows, of the batch, of a product's rows) side by side on the team
// (hal/cpu/conv_kernels.cc, matmul_kernels.cc), so OpenMP never starts a team: two pools
// awake at once would oversubscribe the cores.
//
// Threads: each master thread has its own team, made on its first parallel part and grown
// to the largest team it asked for; the team's threads exit when their master does. An
// idle thread polls for about 300 us (a wake-up's cost on these VMs), but only while its
// own master is the last one to have handed out parts, and then sleeps until its master
// hands it a part; after its own part a master runs any part that its thread has not
// taken yet (that thread was asleep or without a core), then waits for the taken ones,
// yielding its core after a short spin. (A server runs requests on its connection threads,
// each a master: teams that kept polling took the cores the running master's team needed,
// and masters waiting for woken threads yielded ~1000 times a request.) The session's CoreBudget lease covers
// the team's threads as it covered OpenMP's.
#pragma once

#include <memory>

namespace strider::cpu {

// Whether strider's own team runs the CPU's parallel parts: STRIDER_CPU_TEAM=openmp (for
// measuring) says no, anything else yes. Read once.
bool own_team_enabled();

// Runs part(context, t) for every t in [0, threads): t = 0 on the calling thread, the
// others on its team's threads, or on the calling thread after t = 0 when a team thread
// has not taken its part by then; returns when all have returned. A part must not throw,
// nor wait for another part (two may run one after the other on one thread).
void run_on_own_team(int threads, void (*part)(void*, int), void* context);

// True on a thread while it runs a part (its own parallel_for calls then stay serial).
bool in_own_team_part();

// A team that belongs to a session instead of a thread. A session whose single queue runs
// in its callers' threads (hal/cpu/cpu_device.cc) is run by whichever thread calls it: a
// server's connection threads take turns at one model instance. With a team per thread,
// each run found its master's team asleep (another master had forked last), so its parts
// ran on the master alone or waited for a wake-up; with the session's team, the threads
// that ran the last request are still polling when the next one comes, from any thread.
class SessionTeam;
std::shared_ptr<SessionTeam> make_session_team();

// While alive, run_on_own_team on this thread uses `team`'s threads, unless another thread
// is running with that team (then this thread's own team, as without the scope). Null: no
// effect.
class ScopedSessionTeam {
 public:
  explicit ScopedSessionTeam(SessionTeam* team);
  ~ScopedSessionTeam();
  ScopedSessionTeam(const ScopedSessionTeam&) = delete;
  ScopedSessionTeam& operator=(const ScopedSessionTeam&) = delete;

 private:
  SessionTeam* held_ = nullptr;
  void* previous_ = nullptr;
};

}  // namespace strider::cpu
