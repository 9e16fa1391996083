// What strider's own tools (`strider inspect`, `check`, `bench`, the Python package's
// strider.check/inspect) need beyond running a model: the plan as text, JSON or SVG,
// device timing, each step's output as it was right after the step, and sessions with the
// switches that prove the checkers work. The CLI is written on this header, strider/model.h,
// strider/session.h, strider/reference.h, strider/compare.h and strider/tensor_file.h alone.
//
// Not for serving: these run a session's steps outside run()'s usual path (taps download
// every value; timing reruns the last inputs), and drop_waits makes wrong answers on purpose.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strider/model.h"
#include "strider/session.h"

namespace strider {

struct ToolSessionOptions {
  // Drop every cross-queue wait, to show that the sim device and the sanitizer catch the
  // damage (`strider check --debug-drop-waits`). Never for real use.
  bool drop_waits = false;
};
// Session::create with tool switches.
Result<std::unique_ptr<Session>> create_tool_session(const Model& model, const SessionOptions& options,
                                                     const ToolSessionOptions& tool_options);

// The session's plan: every step's operands (allocation+offset, dtype, sizes, strides, how
// the value got its bytes) and kernel, as text (`strider inspect`), JSON, or an SVG of the
// arena's memory timeline.
std::string plan_text(const Session& session);
std::string plan_json(const Session& session);
std::string plan_svg(const Session& session);

struct PlanSummary {
  std::string layout;                                       // "nchw" or "nhwc"
  bool uses_cuda_graph = false;  // the steps replay as one unit: a CUDA graph, or one command on the CPU
  std::vector<std::pair<std::string, int64_t>> allocations; // label, bytes: arena, constants, ...
};
PlanSummary plan_summary(const Session& session);

// Runs the session's steps once more on the inputs of its last run and returns the device
// time in ms (CUDA events on a GPU); outputs stay on the device. For benchmarks.
Result<double> time_device_steps(Session& session);

// One step's device time, timed alone (CUDA events on a GPU, the worker's clock on the CPU).
struct StepTime {
  int step = 0;
  std::string op_type, node;  // in the session's graph (after fusion)
  std::string implementation; // the kernel ("onednn:brgconv:avx512_core", "strider:fused")
  double ms = 0;
  // The least the step moves and computes (exec/step_cost.h): every operand view's bytes
  // once, and 2 FLOPs a multiply-add for convolutions, products and attention (else 0).
  int64_t bytes = 0;
  double flops = 0;
};
// Runs the session's steps once more, each alone after the previous one finished, on the
// inputs of its last run; returns the kernel steps in plan order. For profiles: the sum is
// above a run's device time (nothing overlaps, every step waits for the last).
Result<std::vector<StepTime>> time_each_step(Session& session);

// One command of a traced run (`strider bench --trace FILE`): an upload, a step or a
// download, on its queue, with the commands of other queues it waited for.
struct TraceEvent {
  std::string label;               // "Conv '/m.0/cv1/conv/Conv'", "upload 'images'"
  int queue = 0;                   // 0: the host queue; 1..: the device's queues
  double start_ms = 0, end_ms = 0; // after the run's first stamp: the host clock where work runs as
                                   // it executes (cpu, sim), events on the streams on a GPU
  std::vector<size_t> waited_for;  // indices of earlier events on other queues it waited for
};
// Runs `session` on `inputs` as Session::run does, step by step (no captured graph, so each
// step is stamped), and returns every command in submission order. The outputs are dropped.
Result<std::vector<TraceEvent>> trace_run(Session& session, const std::vector<Tensor>& inputs);
// The events as a Chrome trace (chrome://tracing, ui.perfetto.dev): one track per queue,
// each command a slice, each cross-queue wait a flow arrow from the end of the command
// waited for to the start of the one that waited.
std::string chrome_trace_json(const std::vector<TraceEvent>& events, const std::string& title);

// A kernel step's output as it was right after the step ran.
struct TappedValue {
  std::string value, node, op_type;  // names in the session's graph (after fusion)
  Tensor tensor;                     // in the session's compute dtype
};
// Runs `session` on `inputs` as Session::run does (same plan, step by step) and returns
// every kernel step's outputs in step order, for locating the first node that went wrong.
Result<std::vector<TappedValue>> run_with_taps(Session& session, const std::vector<Tensor>& inputs);

// The SHA-256 of a file's bytes, hex (what `check --json` records of the model).
Result<std::string> file_sha256(const std::string& path);

// "" when this CPU computes `dtype` on instructions of its own (always for f32); else one
// sentence saying how it runs instead, for a tool to print once (`--dtype bf16` on a CPU
// without AVX512-BF16 or AMX).
std::string cpu_dtype_notice(DType dtype);

// "strider 0.1.0 (commit ...)" and the versions of the libraries it uses, one per line.
std::string version_text();

}  // namespace strider
