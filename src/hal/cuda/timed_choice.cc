#include "hal/cuda/timed_choice.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <string_view>

#include "hal/cuda/copy.h"
#include "hal/cuda/cuda_check.h"

namespace strider::cuda {
namespace {

constexpr int kRounds = 3, kRunsPerRound = 5;
constexpr int kDelayUs = 1500;  // covers the host enqueueing kRunsPerRound library calls

std::mutex cache_mutex;
std::map<std::string, std::string>& chosen_implementations() {
  static auto* cache = new std::map<std::string, std::string>;  // never destroyed: no exit-order hazard
  return *cache;
}

bool is_own(const Kernel& k) { return k.implementation().starts_with("strider-cuda:"); }

// Kernels whose time alone flatters them in the plan's graph, and by how much (ms) they
// must win. The small convolution's launches ran ~1.3 us longer each in C2f's graph than
// timed alone: at b1 f32 on an H100 it won three convolutions by 0.4-0.6 us alone, and the
// graph went 0.0446 -> 0.0484 ms (WaveNet's 0.1563 -> 0.1586). Its real wins are 2-30 us
// a layer (YOLOv8n's 3x3 layers on 10x10 and 20x20 maps).
constexpr struct {
  const char* prefix;
  double ms;
} kGraphSurcharges[] = {{"strider-cuda:small-conv", 0.0015}};

double graph_surcharge(const Kernel& k) {
  const std::string name = k.implementation();
  for (const auto& s : kGraphSurcharges)
    if (name.starts_with(s.prefix)) return s.ms;
  return 0.0;
}

// Mean milliseconds of one run of each candidate (infinity where a run failed), the
// candidates alternating round by round so drift falls on all alike.
// The stream trial runs go to: one per device, made on first use and never destroyed.
// A stream made and destroyed per choice cost every later run of the plan's graph about 5%
// once cuBLASLt had run on it (BERT b1 bf16 on an H100: 0.147 -> 0.155 ms with two
// identical cuBLASLt candidates timed on a fresh stream, 0.148 with this one; module
// loading played no part: CUDA_MODULE_LOADING=EAGER left the 5%). Session 29's "cuBLASLt's
// timed picks ran slower inside the graph" was this.
Result<cudaStream_t> timing_stream() {
  static std::mutex mutex;
  static auto* streams = new std::map<int, cudaStream_t>;  // never destroyed, as the cache
  int device = 0;
  STRIDER_CUDA_RETURN(cudaGetDevice(&device), "timing stream's device");
  std::lock_guard lock(mutex);
  cudaStream_t& stream = (*streams)[device];
  if (!stream) STRIDER_CUDA_RETURN(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "timing stream");
  return stream;
}

Result<std::vector<double>> time_candidates(const std::vector<std::unique_ptr<Kernel>>& candidates) {
  STRIDER_ASSIGN_OR_RETURN(cudaStream_t stream, timing_stream());
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> best(candidates.size(), std::numeric_limits<double>::infinity());
  std::vector<bool> failed(candidates.size(), false);
  const QueueContext context{0, stream};
  for (int round = 0; round <= kRounds; ++round) {  // round 0 warms up
    for (size_t k = 0; k < candidates.size(); ++k) {
      if (failed[k]) continue;
      // The device's time alone: a plan runs as one CUDA graph, where a library's host
      // cost per call (cuDNN's ~0.1 ms) is gone, so the delay hides it here too.
      failed[k] = !launch_delay(stream, kDelayUs).is_ok();
      cudaEventRecord(start, stream);
      for (int i = 0; i < kRunsPerRound && !failed[k]; ++i) failed[k] = !candidates[k]->run(context).is_ok();
      cudaEventRecord(stop, stream);
      if (cudaEventSynchronize(stop) != cudaSuccess) failed[k] = true;
      float ms = 0;
      if (!failed[k] && round > 0 && cudaEventElapsedTime(&ms, start, stop) == cudaSuccess)
        best[k] = std::min(best[k], double(ms) / kRunsPerRound);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGetLastError();  // a failed candidate's launch error must not reach the next launch
  for (size_t k = 0; k < candidates.size(); ++k)
    if (failed[k]) best[k] = std::numeric_limits<double>::infinity();
  return best;
}

// STRIDER_CUDA_KERNEL_CHOICE_LOG (a diagnostic): each timed choice's candidates and their
// device milliseconds on stderr, the winner marked, to see why a kernel lost.
void log_choice(const std::string& key, const std::vector<std::unique_ptr<Kernel>>& candidates,
                const std::vector<double>& ms, size_t fastest) {
  std::string text = fmt::format("strider: timed choice for {}\n", key);
  for (size_t k = 0; k < candidates.size(); ++k)
    text += fmt::format("  {} {:9.4f} ms  {}{}\n", k == fastest ? '*' : ' ', ms[k], candidates[k]->implementation(),
                        graph_surcharge(*candidates[k]) > 0 ? fmt::format(" (+{} ms in the graph)", graph_surcharge(*candidates[k])) : "");
  std::fputs(text.c_str(), stderr);
}

}  // namespace

Result<std::unique_ptr<Kernel>> fastest_kernel(const std::string& key, std::vector<std::unique_ptr<Kernel>> candidates) {
  if (candidates.empty()) return internal_error("fastest_kernel of no candidates");
  if (candidates.size() == 1) return std::move(candidates[0]);
  if (const char* forced = std::getenv("STRIDER_CUDA_KERNEL_CHOICE")) {
    const std::string_view want(forced);
    if (want == "own" || want == "library") {
      for (auto& k : candidates)
        if (is_own(*k) == (want == "own")) return std::move(k);
    } else {
      for (auto& k : candidates)  // an implementation's prefix; none of them: timed as usual
        if (k->implementation().starts_with(want)) return std::move(k);
    }
  }
  {
    std::lock_guard lock(cache_mutex);
    auto it = chosen_implementations().find(key);
    if (it != chosen_implementations().end())
      for (auto& k : candidates)
        if (k->implementation() == it->second) return std::move(k);
  }
  STRIDER_ASSIGN_OR_RETURN(std::vector<double> ms, time_candidates(candidates));
  size_t fastest = 0;
  for (size_t k = 1; k < ms.size(); ++k)
    if (ms[k] + graph_surcharge(*candidates[k]) < ms[fastest] + graph_surcharge(*candidates[fastest])) fastest = k;
  if (std::getenv("STRIDER_CUDA_KERNEL_CHOICE_LOG")) log_choice(key, candidates, ms, fastest);
  if (ms[fastest] == std::numeric_limits<double>::infinity())
    return device_error(fmt::format("every kernel failed its trial run ({})", key));
  std::lock_guard lock(cache_mutex);
  chosen_implementations()[key] = candidates[fastest]->implementation();
  return std::move(candidates[fastest]);
}

}  // namespace strider::cuda
