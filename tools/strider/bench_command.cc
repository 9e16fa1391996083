// `strider bench`: latency and throughput of a model on a device: median and p90 device
// time of the steps (CUDA events on a GPU; inputs already on the device, outputs left
// there, as a framework benchmark measures a model call), the host-to-host latency of
// run(), and the memory the plan allocates.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "strider/tools.h"

namespace strider::cli {
namespace {

struct Percentiles {
  double median = 0, p90 = 0;
};

Percentiles percentiles(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  if (samples.empty()) return {};
  return {samples[samples.size() / 2], samples[std::min(samples.size() - 1, samples.size() * 9 / 10)]};
}

Result<nlohmann::json> measure(const BenchOptions& o, PreparedRun& run) {
  Session& session = *run.session;
  for (int i = 0; i < o.warmup; ++i) STRIDER_RETURN_IF_ERROR(session.run(run.inputs).status());
  std::vector<double> device_ms, host_ms;
  for (int i = 0; i < o.iterations; ++i) {
    STRIDER_ASSIGN_OR_RETURN(double ms, time_device_steps(session));
    device_ms.push_back(ms);
  }
  for (int i = 0; i < o.iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    STRIDER_RETURN_IF_ERROR(session.run(run.inputs).status());
    host_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  Percentiles device = percentiles(device_ms), host = percentiles(host_ms);
  PlanSummary plan = plan_summary(session);
  int64_t planned = 0;
  nlohmann::json allocations;
  for (const auto& [label, bytes] : plan.allocations) {
    planned += bytes;
    allocations[label] = bytes;
  }
  int64_t batch = run.inputs.empty() || run.inputs[0].rank() == 0 ? 1 : run.inputs[0].shape()[0];
  return nlohmann::json{{"model", o.model.model},         {"device", o.model.device},
                        {"dtype", o.model.dtype},         {"layout", plan.layout},
                        {"queues", o.model.queues},       {"cuda_graph", plan.uses_cuda_graph},
                        {"batch", batch},                 {"iterations", o.iterations},
                        {"device_ms_median", device.median}, {"device_ms_p90", device.p90},
                        {"run_ms_median", host.median},   {"run_ms_p90", host.p90},
                        {"throughput_per_s", device.median > 0 ? 1000.0 * double(batch) / device.median : 0.0},
                        {"planned_bytes", planned},       {"allocations", allocations}};
}

}  // namespace

void add_bench_command(CLI::App& app, BenchOptions& options) {
  CLI::App* bench = app.add_subcommand("bench", "measure latency, throughput and memory of a model");
  add_model_options(*bench, options.model);
  bench->add_option("--warmup", options.warmup, "runs before timing (default 20)");
  bench->add_option("--iterations", options.iterations, "timed runs (default 200)");
  bench->add_option("--json", options.json_file, "write the figures as JSON here");
  bench->footer(
      "Device time: the steps alone, inputs already on the device, timed with CUDA events on\n"
      "a GPU (host clock on the CPU); run(): host tensors in, host tensors out.\n\n"
      "Examples:\n"
      "  strider bench model.onnx --device cuda --dtype bf16\n"
      "  strider bench model.onnx --device cuda --shape images:32x3x320x320 --json bench.json");
  bench->callback([&options] { options.selected = true; });
}

int bench_command(const BenchOptions& o) {
  auto prepared = prepare_run(o.model, o.model.model, o.model.inputs_dir);
  if (!prepared.is_ok()) return report_error(prepared.status());
  auto figures = measure(o, *prepared);
  if (!figures.is_ok()) return report_error(figures.status());
  const nlohmann::json& f = *figures;
  const bool cuda = o.model.device.rfind("cuda", 0) == 0;
  const std::string graph = cuda ? fmt::format("cuda graph {}", f["cuda_graph"].get<bool>() ? "on" : "off")
                                 : f["cuda_graph"].get<bool>() ? "steps as one command" : "a command per step";
  fmt::print("strider bench {} on {} ({}, {}, {} queue{}, {}), batch {}\n", o.model.model, o.model.device, o.model.dtype,
             f["layout"].get<std::string>(), o.model.queues, o.model.queues > 1 ? "s" : "", graph, f["batch"].get<int64_t>());
  fmt::print("  device time  median {:.4f} ms  p90 {:.4f} ms  ({} runs after {} warm-up)\n",
             f["device_ms_median"].get<double>(), f["device_ms_p90"].get<double>(), o.iterations, o.warmup);
  fmt::print("  run()        median {:.4f} ms  p90 {:.4f} ms  (host tensors in and out)\n",
             f["run_ms_median"].get<double>(), f["run_ms_p90"].get<double>());
  fmt::print("  throughput   {:.1f} inferences/s\n", f["throughput_per_s"].get<double>());
  fmt::print("  memory       {:.2f} MiB planned (arena, constants, inputs, outputs; kernel workspaces apart)\n",
             double(f["planned_bytes"].get<int64_t>()) / (1 << 20));
  if (!o.json_file.empty()) {
    Status s = write_text_file(o.json_file, f.dump(2) + "\n", "--json");
    if (!s.is_ok()) return report_error(s);
  }
  return kExitOk;
}

}  // namespace strider::cli
