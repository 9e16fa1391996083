// IoBinding: a session's inputs and outputs bound to memory the caller owns, on the
// session's device (a GPU's memory, a torch or CuPy CUDA tensor through DLPack) or, for the
// CPU devices, the host. ONNX Runtime's IoBinding is the model.
//
//   strider::IoBinding binding;
//   binding.bind_input("x", {x_ptr, strider::DType::kF32, {8, 3, 224, 224}, 0});  // cuda:0 memory
//   binding.bind_output("y", {y_ptr, strider::DType::kF32, {8, 1000}, 0});
//   for (...) { /* write x */ status = session->run(binding); /* read y */ }
//
// No copy: the session binds its plan to these addresses (plan/bind.h, ExternalMemory) and
// creates kernels that read the inputs and write the outputs where they are. Binding a new
// set of addresses makes new kernels once (a few are cached, least recently used out);
// running again with the same addresses reuses them, so keep the buffers and rebind rarely.
//
// Rules, checked at run (INVALID_ARGUMENT or UNSUPPORTED naming the value):
// - every input and output is bound, with the model's dtype and this run's shape, dense
//   row-major, 16-byte aligned, on the session's device (device_ordinal: -1 host memory
//   for cpu and sim, N for cuda:N); no output overlaps another bound tensor.
// A value the session holds differently (a bf16 session computes in bf16; a channels-last
// plan gives an activation-like input nhwc strides) stays in the session's memory and is
// copied between it and the bound memory by a Cast kernel on the device, before the steps
// (inputs) or after them (outputs): one pass over the value, no host round trip.
// Ordering: the caller's memory must hold the inputs (their producer finished) when run()
// is called; strider's work on it has completed when run() returns. Lifetime: the memory
// stays alive and is not written by anyone else during a run; the binding does not own it.
//
// Outputs strider allocates (bind_output_to_device): each run writes the output into
// memory of the session's device that strider allocates, and device_outputs() hands it to
// the caller as a DeviceOutput, a shared reference (Python exports it through DLPack with
// no copy). A later run never writes memory the caller still holds: it reuses an output's
// memory only once every reference to it is gone (so a loop that drops the last result
// before the next run keeps one address, and its cached kernels), and on a GPU it first
// waits for the work already queued there (a consumer's stream may still be reading what
// was dropped). It is complete when run() returns.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "strider/dtype.h"
#include "strider/tensor.h"

namespace strider {

// A dense row-major tensor in memory the caller owns.
struct MemoryRef {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  int device_ordinal = -1;  // -1: host memory; N: memory of CUDA device N
};

struct OutputMemory;  // opaque: the allocation and the device it lives on (src/exec/bound_run.cc)

// An output in memory strider allocated: where it is, and a reference that keeps it alive
// (and from being reused by a later run) while any copy of this object exists.
class DeviceOutput {
 public:
  DeviceOutput() = default;
  DeviceOutput(MemoryRef memory, std::shared_ptr<const OutputMemory> owner)
      : memory_(std::move(memory)), owner_(std::move(owner)) {}
  const MemoryRef& memory() const { return memory_; }
  // A copy in host memory (a download from the GPU).
  Result<Tensor> to_host() const;

 private:
  MemoryRef memory_;
  std::shared_ptr<const OutputMemory> owner_;
};

class IoBinding {
 public:
  void bind_input(const std::string& name, const MemoryRef& memory) { inputs_[name] = memory; }
  void bind_output(const std::string& name, const MemoryRef& memory) {
    to_device_.erase(name);
    outputs_[name] = memory;
  }
  // Strider allocates the output on the session's device each run (see above).
  void bind_output_to_device(const std::string& name) {
    outputs_.erase(name);
    to_device_[name] = DeviceOutput();
  }
  void clear() {
    inputs_.clear();
    outputs_.clear();
    to_device_.clear();
  }
  const std::map<std::string, MemoryRef>& inputs() const { return inputs_; }
  const std::map<std::string, MemoryRef>& outputs() const { return outputs_; }
  // The outputs bound to the device, each with what the last successful run wrote (empty
  // DeviceOutputs before one).
  const std::map<std::string, DeviceOutput>& device_outputs() const { return to_device_; }
  // For Session::run: the run's results.
  void set_device_output(const std::string& name, DeviceOutput output) { to_device_[name] = std::move(output); }

 private:
  std::map<std::string, MemoryRef> inputs_, outputs_;
  std::map<std::string, DeviceOutput> to_device_;
};

}  // namespace strider
