// `strider bench`: latency and throughput of a model on a device: median and p90 device
// time of the steps (CUDA events on a GPU; inputs already on the device, outputs left
// there, as a framework benchmark measures a model call), the host-to-host latency of
// run(), and the memory the plan allocates.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_common.h"
#include "commands.h"
#include "strider/printable.h"
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
  // Alternating the two figures' samples keeps a drift of the machine's speed (another
  // tenant, the clock) out of their difference: run() minus device time is the per-run cost.
  // Steps on several queues overlap, so they have no device time of their own: run() is
  // then the only figure.
  // run() first: the device-time sample reruns the steps on the inputs of the last run.
  bool timed_steps = true;
  int64_t bytes_in = 0, bytes_out = 0;  // what run() moves between host and device
  for (const Tensor& t : run.inputs) bytes_in += int64_t(t.byte_size());
  for (int i = 0; i < o.iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    Result<std::vector<Tensor>> outputs = session.run(run.inputs);
    host_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    STRIDER_RETURN_IF_ERROR(outputs.status());
    bytes_out = 0;
    for (const Tensor& t : *outputs) bytes_out += int64_t(t.byte_size());
    if (timed_steps) {
      Result<double> ms = time_device_steps(session);
      if (!ms.is_ok() && ms.status().code() != StatusCode::kUnsupported) return ms.status();
      timed_steps = ms.is_ok();
      if (timed_steps) device_ms.push_back(*ms);
    }
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
                        {"device_ms_median", timed_steps ? nlohmann::json(device.median) : nlohmann::json()},
                        {"device_ms_p90", timed_steps ? nlohmann::json(device.p90) : nlohmann::json()},
                        {"run_ms_median", host.median},   {"run_ms_p90", host.p90},
                        {"throughput_per_s", 1000.0 * double(batch) / (timed_steps ? device.median : host.median)},
                        {"planned_bytes", planned},       {"allocations", allocations},
                        {"bytes_in", bytes_in},           {"bytes_out", bytes_out}};
}

// Each step timed alone over `rounds` passes: the median per step, slowest first, and the
// time per op type.
Result<nlohmann::json> profile_steps(Session& session, int rounds) {
  std::vector<StepTime> steps;
  std::vector<std::vector<double>> samples;
  for (int r = 0; r < rounds; ++r) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<StepTime> pass, time_each_step(session));
    if (steps.empty()) {
      steps = pass;
      samples.resize(steps.size());
    }
    for (size_t s = 0; s < pass.size() && s < samples.size(); ++s) samples[s].push_back(pass[s].ms);
  }
  double total = 0;
  for (size_t s = 0; s < steps.size(); ++s) total += steps[s].ms = percentiles(samples[s]).median;
  std::vector<size_t> order(steps.size());
  for (size_t s = 0; s < order.size(); ++s) order[s] = s;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return steps[a].ms > steps[b].ms; });
  nlohmann::json by_step = nlohmann::json::array(), by_op = nlohmann::json::object();
  for (size_t s : order) {
    const StepTime& t = steps[s];
    const double seconds = std::max(t.ms, 1e-9) * 1e-3;
    by_step.push_back({{"step", t.step}, {"op_type", t.op_type}, {"node", t.node}, {"implementation", t.implementation},
                       {"ms", t.ms}, {"bytes", t.bytes}, {"flops", t.flops}, {"gb_per_s", double(t.bytes) / seconds * 1e-9},
                       {"tflop_per_s", t.flops / seconds * 1e-12}});
    nlohmann::json& op = by_op[t.op_type];
    if (op.is_null()) op = {{"ms", 0.0}, {"steps", 0}};
    op["ms"] = op["ms"].get<double>() + t.ms;
    op["steps"] = op["steps"].get<int>() + 1;
  }
  return nlohmann::json{{"rounds", rounds}, {"steps_ms_sum", total}, {"steps", by_step}, {"op_types", by_op}};
}

struct Ceilings {
  double gb_per_s = 0, tflop_per_s = 0;  // 0: not given
};

Result<Ceilings> parse_ceilings(const std::string& text) {
  Ceilings c;
  if (text.empty()) return c;
  const size_t colon = text.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    c.gb_per_s = std::stod(text.substr(0, colon));
    c.tflop_per_s = std::stod(text.substr(colon + 1));
  } catch (const std::exception&) {
    c.gb_per_s = 0;
  }
  if (!(c.gb_per_s > 0) || !(c.tflop_per_s > 0))
    return invalid_argument(fmt::format("--ceilings '{}': want GB/s:TFLOP/s, both positive (\"4300:790\")", text));
  return c;
}

// The larger of the step's shares of the two ceilings: how close it runs to what bounds it.
std::string share_of_ceilings(const nlohmann::json& s, const Ceilings& c) {
  if (c.gb_per_s <= 0) return "";
  const double memory = s["gb_per_s"].get<double>() / c.gb_per_s, compute = s["tflop_per_s"].get<double>() / c.tflop_per_s;
  return fmt::format("{:4.0f}% {}", 100.0 * std::max(memory, compute), compute > memory ? "flop" : "mem ");
}

void print_profile(const nlohmann::json& p, const Ceilings& ceilings) {
  const double total = std::max(p["steps_ms_sum"].get<double>(), 1e-12);
  fmt::print("  profile      each step alone, median of {} passes; the steps sum to {:.4f} ms\n",
             p["rounds"].get<int>(), total);
  if (ceilings.gb_per_s > 0)
    fmt::print("               ceilings {:.0f} GB/s, {:.0f} TFLOP/s; bytes: every operand once\n", ceilings.gb_per_s,
               ceilings.tflop_per_s);
  fmt::print("    {:>6} {:>6} {:>5}  {:>7} {:>8} {:>9}  {:<22} {:<34} {}\n", "ms", "%", "step", "GB/s", "TFLOP/s",
             ceilings.gb_per_s > 0 ? "of ceil." : "", "op", "kernel", "node");
  size_t shown = 0;
  for (const auto& s : p["steps"]) {
    if (shown++ == 20) break;
    const double tflops = s["tflop_per_s"].get<double>();
    fmt::print("    {:6.3f} {:5.1f}% {:>5}  {:7.1f} {:>8} {:>9}  {:<22} {:<34} {}\n", s["ms"].get<double>(),
               100.0 * s["ms"].get<double>() / total, s["step"].get<int>(), s["gb_per_s"].get<double>(),
               tflops > 0 ? fmt::format("{:.2f}", tflops) : "-", share_of_ceilings(s, ceilings),
               printable(s["op_type"].get<std::string>(), 22), s["implementation"].get<std::string>(),
               printable(s["node"].get<std::string>(), 60));
  }
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [op, figures] : p["op_types"].items()) ops.emplace_back(figures["ms"].get<double>(), op);
  std::sort(ops.rbegin(), ops.rend());
  std::string line;
  for (const auto& [ms, op] : ops)
    line += fmt::format("{}{} {:.3f} ms ({:.0f}%)", line.empty() ? "" : ", ", printable(op, 22), ms, 100.0 * ms / total);
  fmt::print("    by op: {}\n", line);
}

// The bytes run() moves and, given the host link's speed, its floor: the device time plus
// those bytes at that speed (nothing overlapped), and how far run() is above it.
void print_transfers(nlohmann::json& f, double link_gbps) {
  const double in = double(f["bytes_in"].get<int64_t>()), out = double(f["bytes_out"].get<int64_t>());
  std::string floor;
  if (link_gbps > 0 && !f["device_ms_median"].is_null()) {
    const double ms = f["device_ms_median"].get<double>() + (in + out) / (link_gbps * 1e9) * 1e3;
    f["floor_ms"] = ms;
    floor = fmt::format("; floor {:.4f} ms (device time + bytes at {:g} GB/s), run() {:.2f}x it", ms, link_gbps,
                        f["run_ms_median"].get<double>() / ms);
  }
  fmt::print("  transfers    {:.2f} MiB in, {:.2f} MiB out a run{}\n", in / 1048576.0, out / 1048576.0, floor);
}

struct ConcurrentFigures {
  double runs_per_s = 0, run_ms_median = 0;
};

// `count` sessions of the model (sharing its weights), each run `iterations` times from a
// thread of its own, all at once: the runs per second of them all and the median call.
Result<ConcurrentFigures> measure_concurrent(const BenchOptions& o, PreparedRun& run, int count, bool share_cores) {
  SessionOptions options = run.session_options;
  options.share_cores = share_cores;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int k = 0; k < count; ++k) {
    STRIDER_ASSIGN_OR_RETURN(auto session, Session::create(*run.model, options));
    for (int i = 0; i < o.warmup; ++i) STRIDER_RETURN_IF_ERROR(session->run(run.inputs).status());
    sessions.push_back(std::move(session));
  }
  std::vector<std::vector<double>> call_ms(static_cast<size_t>(count));
  std::vector<Status> failed(static_cast<size_t>(count));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int k = 0; k < count; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < o.iterations && failed[size_t(k)].is_ok(); ++i) {
        auto begin = std::chrono::steady_clock::now();
        failed[size_t(k)] = sessions[size_t(k)]->run(run.inputs).status();
        call_ms[size_t(k)].push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count());
      }
    });
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> all;
  for (int k = 0; k < count; ++k) {
    STRIDER_RETURN_IF_ERROR(failed[size_t(k)]);
    all.insert(all.end(), call_ms[size_t(k)].begin(), call_ms[size_t(k)].end());
  }
  return ConcurrentFigures{double(all.size()) / seconds, percentiles(all).median};
}

// One more run, traced, written as a Chrome trace: what ran where and what waited for what.
Status write_trace(const BenchOptions& o, PreparedRun& prepared) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<TraceEvent> events, trace_run(*prepared.session, prepared.inputs));
  const std::string title = fmt::format("strider {} on {} ({})", o.model.model, o.model.device, o.model.dtype);
  STRIDER_RETURN_IF_ERROR(write_text_file(o.trace_file, chrome_trace_json(events, title) + "\n", "--trace"));
  double last = 0;
  for (const TraceEvent& e : events) last = std::max(last, e.end_ms);
  fmt::print("  trace        {} commands over {:.4f} ms written to {}\n", events.size(), last, o.trace_file);
  return Status::ok();
}

}  // namespace

void add_bench_command(CLI::App& app, BenchOptions& options) {
  CLI::App* bench = app.add_subcommand("bench", "measure latency, throughput and memory of a model");
  add_model_options(*bench, options.model);
  bench->add_option("--warmup", options.warmup, "runs before timing (default 20)");
  bench->add_option("--iterations", options.iterations, "timed runs (default 200)");
  bench->add_option("--sessions", options.sessions,
                    "also run this many sessions at once, each from its own thread, with the process's cores "
                    "shared and with threads of their own")
      ->check(CLI::Range(1, 64));
  bench->add_flag("--profile", options.profile,
                  "time each step alone and print the slowest, with their kernels, and the time per op type");
  bench->add_option("--ceilings", options.ceilings,
                    "with --profile: the device's memory GB/s and TFLOP/s as GBPS:TFLOPS (e.g. 4300:790), to print "
                    "each step's share of them");
  bench->add_option("--link-gbps", options.link_gbps,
                    "the host link's GB/s (e.g. 53: pinned copies on the H200 machine, bench/cuda_transfer_probe), "
                    "to print run()'s floor: device time plus the bytes it moves at that speed")
      ->check(CLI::PositiveNumber);
  bench->add_option("--json", options.json_file, "write the figures as JSON here");
  bench->add_option("--trace", options.trace_file,
                    "write a Chrome trace of one more run here (ui.perfetto.dev, chrome://tracing): each command "
                    "on its queue, stamped where it runs (CUDA events on a GPU), each cross-queue wait an arrow; "
                    "the steps run one by one, not as one CUDA graph");
  bench->footer(
      "Device time: the steps alone, inputs already on the device, timed with CUDA events on\n"
      "a GPU (host clock on the CPU); run(): host tensors in, host tensors out.\n\n"
      "Examples:\n"
      "  strider bench model.onnx --device cuda --dtype bf16\n"
      "  strider bench model.onnx --device cuda --shape images:32x3x320x320 --json bench.json");
  bench->callback([&options] { options.selected = true; });
}

int bench_command(const BenchOptions& o) {
  auto ceilings = parse_ceilings(o.ceilings);
  if (!ceilings.is_ok()) return report_error(ceilings.status());
  auto prepared = prepare_run(o.model, o.model.model, o.model.inputs_dir);
  if (!prepared.is_ok()) return report_error(prepared.status());
  auto figures = measure(o, *prepared);
  if (!figures.is_ok()) return report_error(figures.status());
  nlohmann::json& f = *figures;
  if (o.profile) {
    auto profile = profile_steps(*prepared->session, std::clamp(o.iterations, 1, 50));
    if (!profile.is_ok()) return report_error(profile.status());
    f["profile"] = *profile;
  }
  if (o.sessions > 1) {
    for (bool shared : {true, false}) {
      auto concurrent = measure_concurrent(o, *prepared, o.sessions, shared);
      if (!concurrent.is_ok()) return report_error(concurrent.status());
      const std::string key = shared ? "concurrent_shared_cores" : "concurrent_own_threads";
      f[key] = {{"sessions", o.sessions},
                {"runs_per_s", concurrent->runs_per_s},
                {"run_ms_median", concurrent->run_ms_median}};
    }
  }
  const bool cuda = o.model.device.rfind("cuda", 0) == 0;
  const std::string graph = cuda ? fmt::format("cuda graph {}", f["cuda_graph"].get<bool>() ? "on" : "off")
                                 : f["cuda_graph"].get<bool>() ? "steps as one command" : "a command per step";
  fmt::print("strider bench {} on {} ({}, {}, {} queue{}, {}), batch {}\n", o.model.model, o.model.device, o.model.dtype,
             f["layout"].get<std::string>(), o.model.queues, o.model.queues > 1 ? "s" : "", graph, f["batch"].get<int64_t>());
  if (f["device_ms_median"].is_null())
    fmt::print("  device time  not measured: the steps run on {} queues at once ({} runs after {} warm-up)\n",
               o.model.queues, o.iterations, o.warmup);
  else
    fmt::print("  device time  median {:.4f} ms  p90 {:.4f} ms  ({} runs after {} warm-up)\n",
               f["device_ms_median"].get<double>(), f["device_ms_p90"].get<double>(), o.iterations, o.warmup);
  fmt::print("  run()        median {:.4f} ms  p90 {:.4f} ms  (host tensors in and out)\n",
             f["run_ms_median"].get<double>(), f["run_ms_p90"].get<double>());
  print_transfers(f, o.link_gbps);
  fmt::print("  throughput   {:.1f} inferences/s\n", f["throughput_per_s"].get<double>());
  fmt::print("  memory       {:.2f} MiB planned (arena, constants, inputs, outputs; kernel workspaces apart)\n",
             double(f["planned_bytes"].get<int64_t>()) / (1 << 20));
  if (o.profile) print_profile(f["profile"], *ceilings);
  if (o.sessions > 1) {
    for (const char* key : {"concurrent_shared_cores", "concurrent_own_threads"})
      fmt::print("  {} sessions at once, {}: {:.1f} runs/s, run() median {:.4f} ms\n", o.sessions,
                 std::string(key) == "concurrent_shared_cores" ? "sharing the process's cores" : "threads of their own",
                 f[key]["runs_per_s"].get<double>(), f[key]["run_ms_median"].get<double>());
  }
  if (!o.trace_file.empty()) {
    Status s = write_trace(o, *prepared);
    if (!s.is_ok()) return report_error(s);
  }
  if (!o.json_file.empty()) {
    Status s = write_text_file(o.json_file, f.dump(2) + "\n", "--json");
    if (!s.is_ok()) return report_error(s);
  }
  return kExitOk;
}

}  // namespace strider::cli
