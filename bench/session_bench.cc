// strider_bench: latency of one run of the seed models on the CPU, by configuration:
// planner on (nchw / nhwc) or off, 1 or 2 queues, sanitizer off or on; and the time to
// create a session for an LSTM unrolled over T steps (SessionCreation/LSTM/T, with the
// fitted complexity: it should stay near O(N), N the graph's nodes). Run:
//   build/bench/strider_bench --benchmark_min_time=0.5
// Each run benchmark reports the median time per run() (inputs uploaded, outputs downloaded).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>

#include "ir/builder.h"

#include "exec/session_internal.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

struct Config {
  const char* layout;
  bool planner;
  int queues;
  bool sanitize;
};

void run_model(benchmark::State& state, const std::string& model, Config config) {
  fs::path dir = fs::path(STRIDER_SOURCE_DIR) / "models/seed" / model;
  auto graph = import_model_file((dir / "model.onnx").string());
  auto input = read_tensor_pb((dir / "test_data_set_0/input_0.pb").string());
  if (!graph.is_ok() || !input.is_ok()) {
    state.SkipWithError("cannot load the model");
    return;
  }
  SessionOptions options;
  options.queues = config.queues;
  options.sanitize = config.sanitize;
  PlanOptions plan = config.planner ? PlanOptions{} : unoptimized_plan_options();
  plan.layout = *parse_layout(config.layout);
  auto session = create_session(*graph, options, plan);
  if (!session.is_ok()) {
    state.SkipWithError(session.status().to_string().c_str());
    return;
  }
  std::vector<Tensor> inputs = {*input};
  for (auto _ : state) {
    auto out = (*session)->run(inputs);
    if (!out.is_ok()) state.SkipWithError(out.status().to_string().c_str());
    benchmark::DoNotOptimize(out);
  }
  const PlanStats& stats = inspect_session(**session).plan->stats;
  state.counters["arena_KiB"] = double(stats.arena_bytes) / 1024;
  state.counters["kernels"] = stats.kernels;
}

Tensor random_tensor(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.3f, 0.3f);
  std::vector<float> values(size_t(num_elements(shape)));
  for (float& v : values) v = dist(rng);
  return Tensor::from_values<float>(DType::kF32, std::move(shape), values);
}

// One LSTM layer (hidden 16, input 8, batch 2) over `steps` time steps: the CPU runs it
// unrolled, about nine nodes a step, so this times passes and planning on a long graph.
void create_unrolled_lstm(benchmark::State& state) {
  const int64_t steps = state.range(0), hidden = 16, features = 8;
  GraphBuilder b(17);
  ValueId x = b.input("x", DType::kF32, {steps, 2, features});
  AttributeMap attributes;
  attributes.set_int("hidden_size", hidden);
  b.output(b.op("LSTM",
                {x, b.constant("W", random_tensor({1, 4 * hidden, features}, 1)),
                 b.constant("R", random_tensor({1, 4 * hidden, hidden}, 2)),
                 b.constant("B", random_tensor({1, 8 * hidden}, 3))},
                attributes, "lstm"));
  const Graph graph = b.build();
  int64_t planned_steps = 0;
  for (auto _ : state) {
    auto session = create_session(graph, SessionOptions{}, PlanOptions{});
    if (!session.is_ok()) {
      state.SkipWithError(session.status().to_string().c_str());
      return;
    }
    planned_steps = int64_t(inspect_session(**session).plan->steps.size());
  }
  state.counters["steps"] = double(planned_steps);
  state.SetComplexityN(planned_steps);
}

void register_all() {
  const Config configs[] = {{"nchw", true, 1, false}, {"nhwc", true, 1, false}, {"nchw", false, 1, false},
                            {"nhwc", true, 2, false}, {"nhwc", true, 1, true}};
  for (const char* model : {"C2f_split_op17", "PointwiseC2f_split_op17", "LinearChunkLastDim_split_op17"})
    for (const Config& c : configs) {
      std::string name = std::string(model) + "/" + c.layout + (c.planner ? "/planned" : "/unplanned") + "/queues:" +
                         std::to_string(c.queues) + (c.sanitize ? "/sanitize" : "");
      benchmark::RegisterBenchmark(name.c_str(), [model, c](benchmark::State& s) { run_model(s, model, c); })
          ->Unit(benchmark::kMicrosecond)
          ->ComputeStatistics("median", [](const std::vector<double>& v) {
            std::vector<double> sorted = v;
            std::sort(sorted.begin(), sorted.end());
            return sorted[sorted.size() / 2];
          });
    }
  benchmark::RegisterBenchmark("SessionCreation/LSTM", create_unrolled_lstm)
      ->RangeMultiplier(4)
      ->Range(64, 1024)
      ->Unit(benchmark::kMillisecond)
      ->Complexity();
}

}  // namespace
}  // namespace strider

int main(int argc, char** argv) {
  strider::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
