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
//   for cpu and sim, N for cuda:N); no output overlaps another bound tensor;
// - the session computes in the model's dtype (a bf16 session converts inputs and
//   outputs, which needs a copy: use run() with Tensors) and plans the value row-major.
// Ordering: the caller's memory must hold the inputs (their producer finished) when run()
// is called; strider's work on it has completed when run() returns. Lifetime: the memory
// stays alive and is not written by anyone else during a run; the binding does not own it.
#pragma once

#include <cstdint>
#include <map>
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

class IoBinding {
 public:
  void bind_input(const std::string& name, const MemoryRef& memory) { inputs_[name] = memory; }
  void bind_output(const std::string& name, const MemoryRef& memory) { outputs_[name] = memory; }
  void clear() {
    inputs_.clear();
    outputs_.clear();
  }
  const std::map<std::string, MemoryRef>& inputs() const { return inputs_; }
  const std::map<std::string, MemoryRef>& outputs() const { return outputs_; }

 private:
  std::map<std::string, MemoryRef> inputs_, outputs_;
};

}  // namespace strider
