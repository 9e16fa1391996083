// copy_bench: the CPU's strided copy (hal/cpu/copy.h) on the transposes a channels-last plan
// does: an image uploaded NCHW into NHWC, a detector head's NHWC values concatenated into an
// NCHW output, and a plain NHWC -> NCHW download. Run:
//   build/bench/copy_bench --benchmark_min_time=0.3
// Reports GB/s moved (read + written), one thread (the caller's thread starts no team).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "hal/cpu/copy.h"

namespace strider::cpu {
namespace {

struct Case {
  const char* name;
  std::vector<int64_t> sizes, dst_strides, src_strides;
  int64_t dst_elements, src_elements;
};

void run_copy(benchmark::State& state, const Case& c) {
  std::vector<float> src(size_t(c.src_elements)), dst(size_t(c.dst_elements));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  for (float& v : src) v = uniform(rng);
  int64_t elements = 1;
  for (int64_t s : c.sizes) elements *= s;
  for (auto _ : state) {
    copy_strided(c.sizes, reinterpret_cast<std::byte*>(dst.data()), c.dst_strides.data(),
                 reinterpret_cast<const std::byte*>(src.data()), c.src_strides.data(), 4);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * elements * 8);
}

void register_all() {
  static const Case cases[] = {
      {"image_nchw_to_nhwc_1x3x320x320", {1, 3, 320, 320}, {307200, 1, 960, 3}, {307200, 102400, 320, 1}, 307200,
       307200},
      {"head_nhwc_into_nchw_concat_1x144x1600", {1, 144, 1600}, {302400, 2100, 1}, {144, 1, 144}, 302400, 230400},
      {"nhwc_to_nchw_1x64x80x80", {1, 64, 80, 80}, {409600, 6400, 80, 1}, {409600, 1, 5120, 64}, 409600, 409600},
      {"nchw_to_nhwc_1x32x40x40", {1, 32, 40, 40}, {51200, 1, 1280, 32}, {51200, 1600, 40, 1}, 51200, 51200},
      {"nhwc_to_nchw_1x32x40x40", {1, 32, 40, 40}, {51200, 1600, 40, 1}, {51200, 1, 1280, 32}, 51200, 51200},
      {"image_nchw_to_nhwc_1x3x224x224", {1, 3, 224, 224}, {150528, 1, 672, 3}, {150528, 50176, 224, 1}, 150528,
       150528},
      {"dense_1x64x80x80", {1, 64, 80, 80}, {409600, 6400, 80, 1}, {409600, 6400, 80, 1}, 409600, 409600},
  };
  for (const Case& c : cases)
    benchmark::RegisterBenchmark(c.name, [&c](benchmark::State& s) { run_copy(s, c); })->Unit(benchmark::kMicrosecond);
}

}  // namespace
}  // namespace strider::cpu

int main(int argc, char** argv) {
  strider::cpu::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
