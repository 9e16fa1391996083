// Kernel: one node's computation, prepared for fixed operand views.
//
// A device creates a kernel for a node and the views its operands will have (the plan is
// static, so views are known at session creation); expensive setup such as oneDNN
// primitive creation happens then, never per run. run() reads the input views and
// writes the output views and nothing else: it must honour every stride it was given,
// including zero (broadcast) and negative ones, and it may not assume the output is
// dense. An omitted optional operand is a view whose allocation is null.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "hal/queue.h"
#include "memory/tensor_view.h"
#include "strider/status.h"

namespace strider {

struct KernelRequest {
  const Graph& graph;
  const Node& node;
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;

  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].allocation != nullptr; }
  // The constant value of input i, or nullptr (shape-like inputs are constants).
  const Tensor* constant_input(size_t i) const {
    ValueId id = node.input(i);
    return id == kNoValue ? nullptr : graph.value(id).constant.get();
  }
};

// Checked before any kernel is created for `request` (and so before a kernel can index
// memory by it): one view per operand of the node, present exactly where the node has the
// operand, of the value's dtype and sizes, and wholly inside its allocation. INTERNAL
// naming the node and the operand otherwise: a view that leaves its allocation is a
// planner bug, and this stops it from becoming a read past a buffer.
Status check_kernel_views(const KernelRequest& request);

// Whether every output of `request` is empty (zero elements): then nothing is computed,
// and no device kernel is created, since some size per-axis tables from output dims an
// empty tensor may still have in the billions ([0, 2^40]).
bool all_outputs_empty(const KernelRequest& request);

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Runs the kernel on the queue described by `context` (a CUDA kernel enqueues on its
  // stream; a CPU kernel computes in the calling worker thread).
  virtual Status run(const QueueContext& context) = 0;
  // What implements it, for `strider inspect` ("strider:elementwise", "onednn:jit:avx512").
  virtual std::string implementation() const = 0;
  // Called once the run's queues are idle: a kernel that can only find an error on the
  // device (a GPU Gather meeting an index out of range) reports it here, so the run fails
  // instead of handing out outputs it computed wrong.
  virtual Status check_completed() { return Status::ok(); }
};

// What runs for a node whose outputs are all empty: nothing.
class EmptyOutputsKernel final : public Kernel {
 public:
  Status run(const QueueContext&) override { return Status::ok(); }
  std::string implementation() const override { return "strider:empty"; }
};

}  // namespace strider
