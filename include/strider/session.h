// Session: a model prepared for one device, with static shapes, ready to run many times.
//
//   strider::SessionOptions options;             // cpu, f32
//   auto session = strider::Session::load("model.onnx", options);
//   if (!session.is_ok()) { /* session.status().to_string() names what and where */ }
//   auto outputs = (*session)->run({input_tensor});
//
// Creation does all the work that can fail because of the model: import, shape inference
// with constant folding, precision lowering, planning, and creating every kernel. An
// unsupported model fails here with one error listing every unsupported op and its nodes.
// run() checks the inputs (names, dtypes, shapes) and fails without writing anything when
// they are wrong.
//
// Threads: run() may be called from several threads; runs of one Session are serialized
// (each takes the session's lock for its whole duration), so concurrent callers take turns
// and never see each other's outputs. Separate Sessions are independent and run
// concurrently. Execution is asynchronous inside a run: kernels run on the device's queues
// after submit, and run() returns once the outputs are downloaded and every queue is idle.
// On the CPU with one queue (the default) the kernels run in the thread that called run(),
// which leads the session's OpenMP team: a session called from many threads in turn has a
// team's pool in each of them.
//
// Memory: inputs are read where the caller's tensors are (no copy through a Tensor; see
// the lifetime rule in strider/tensor.h) and copied once, into the session's input
// memory on its device. Outputs come back as new tensors, or are written into tensors the
// caller passes (its own memory, borrowed), with no further copy.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strider/dtype.h"
#include "strider/io_binding.h"
#include "strider/options.h"
#include "strider/status.h"
#include "strider/tensor.h"

namespace strider {

struct SessionOptions {
  std::string device = "cpu";
  // f32, or bf16: weights and activations in bf16 with f32 accumulation. Inputs and
  // outputs keep the model's dtypes either way (f32 inputs are rounded to bf16).
  DType dtype = DType::kF32;
  // Memory layout of activations (strider/options.h).
  Layout layout = Layout::kAuto;
  // Sizes for inputs whose dimensions the model leaves dynamic (or to confirm static ones).
  std::map<std::string, Shape> input_shapes;
  // Values of model inputs to fix at session creation; they are then constants and no
  // longer inputs of the session. Shapes are static, so an input that decides a shape (a
  // Reshape's target shape, a Slice's bounds, Resize's sizes) must be given here.
  std::map<std::string, Tensor> constant_inputs;
  // Fill every buffer with NaN (floats) or 0xA5 bytes before its first writer in each run,
  // so an element no kernel wrote shows up in the output. For checking; costs a pass over
  // memory. The sim device always does it.
  bool poison_memory = false;
  // Device queues to spread independent branches over (the host is one more).
  int queues = 1;
  // cpu: threads each kernel may use (0: every core the process may use).
  int threads = 0;
  // cpu: take part in the process's core budget: a run's kernels hold as many cores as
  // their threads while they run, and wait (asleep) until that many are free, so sessions
  // that do never keep more team threads busy at once than the process has cores. Off by
  // default: measured on two cores, two sessions of two threads each taking turns ran
  // fewer runs per second (122-153) than the same sessions oversubscribing (270-298),
  // since the callers' own copies still take a core from the running team (bench/RESULTS.md).
  // Off: this session's threads run whenever it runs (ONNX Runtime's per-session threads).
  bool share_cores = false;
  // Check with vector clocks that every pair of conflicting accesses is ordered; a run
  // with findings fails with a HAZARD status. (The library reads no environment variables;
  // the CLI turns this on for STRIDER_SANITIZE=1.)
  bool sanitize = false;
  // The sim device's execution order.
  uint64_t sim_seed = 0;
  // cuda: where memory lives (strider/options.h; the CLI reads STRIDER_STORAGE_MODE). A
  // performance choice only: every mode computes the same results.
  StorageMode storage_mode = StorageMode::kDevice;
  // cuda: let f32 matmuls and convolutions use TF32 (faster, no longer true f32).
  bool allow_tf32 = false;
  // cpu: f32 3x3 stride-1 convolutions with 32+ channels may run as Winograd F(4x4, 3x3):
  // four times fewer multiplies, rounding error about 5x the direct sum's (2-6e-6 of the
  // output's magnitude; docs/ARCHITECTURE.md). Off: oneDNN's direct convolution everywhere.
  bool winograd = true;
  // cuda: with one queue, capture the whole plan once as a CUDA graph and replay it.
  bool cuda_graph = true;
  // The most memory the session may hold, in bytes: the model's constants and those folded
  // at creation, the arena, inputs and outputs, on the host and on the device. Asking for
  // more is a RESOURCE_EXHAUSTED error naming what asked. 0: 80% of physical memory for
  // the host (and the CPU devices), 90% of the GPU's memory on cuda.
  int64_t max_memory_bytes = 0;
  // Fold groups of elementwise ops (SiLU's Sigmoid and Mul, a gated unit) into one kernel
  // each, so their intermediates are never stored. Off only to rule fusion out.
  bool fusion = true;
};

struct ValueInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;                          // -1 for a dim the model leaves dynamic
  std::vector<std::string> dim_params;  // per dim: the model's symbolic name, or empty
};

class Model;  // strider/model.h

class Session {
 public:
  static Result<std::unique_ptr<Session>> load(const std::string& model_path,
                                               const SessionOptions& options = {});
  // The same from a model imported once (strider/model.h): its weights are shared, not copied.
  static Result<std::unique_ptr<Session>> create(const Model& model, const SessionOptions& options = {});
  ~Session();

  // Inputs and outputs as the caller sees them (the model's dtypes, static shapes).
  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;

  // Inputs by position (in inputs() order) or by name. Outputs in outputs() order, as
  // owning tensors; on cuda those of 64 KiB or more hold pinned host memory of the device's
  // (Tensor::adopt: the download was one DMA), freed or reused when the tensor is destroyed.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);
  Result<std::vector<Tensor>> run(const std::map<std::string, Tensor>& inputs);
  // The same, writing into `outputs`: one tensor per output, in outputs() order, with its
  // dtype and shape (Tensor::borrow puts one over the caller's memory). Checked before
  // anything runs: a wrong count, dtype or shape is INVALID_ARGUMENT naming the output.
  // If the run itself fails (a device error), their contents are unspecified.
  Status run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);
  Status run(const std::map<std::string, Tensor>& inputs, std::vector<Tensor>& outputs);
  // Runs on memory the caller owns, on the device or the host, with no copy in or out
  // (strider/io_binding.h: what may be bound, ordering and lifetime).
  Status run(IoBinding& binding);

  struct Impl;  // private: src/exec/session.cc
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  friend struct SessionAccess;  // the library's own tools (inspect, check, bench)
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strider
