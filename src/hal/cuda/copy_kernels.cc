// Data-movement kernels on the GPU: Split, Slice, Concat, Transpose, Expand, Reshape and
// its relatives, Materialize; and Gather (gather.h). As on the CPU, each op is a
// view of its input (or, for Concat, of its output: ops/view_ops.h computes both, for the
// planner too) followed by strided copies; a pair
// whose source already is its destination (the planner placed it there) is dropped.
#include <fmt/format.h>

#include "hal/cuda/copy.h"
#include "hal/cuda/cuda_check.h"
#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/gather.h"
#include "ops/shape_ops.h"
#include "ops/view_ops.h"

namespace strider::cuda {

using KernelPtr = std::unique_ptr<Kernel>;
namespace {

// Copies prepared once (copy.h: the dims in the destination's order, the widest word).
class CopyKernel final : public Kernel {
 public:
  static Result<KernelPtr> make(std::string name, const std::vector<std::pair<TensorView, TensorView>>& copies) {
    auto kernel = std::make_unique<CopyKernel>();
    kernel->name_ = std::move(name);
    for (const auto& [dst, src] : copies) {
      if (same_view(dst, src)) continue;
      STRIDER_RETURN_IF_ERROR(prepare_copy(dst, src, &kernel->copies_.emplace_back()));
    }
    return KernelPtr(std::move(kernel));
  }
  Status run(const QueueContext& context) override {
    for (const CopyLaunch& copy : copies_) STRIDER_RETURN_IF_ERROR(run_copy(copy, stream_of(context)));
    return Status::ok();
  }
  std::string implementation() const override { return "strider-cuda:copy:" + name_; }

 private:
  std::string name_;
  std::vector<CopyLaunch> copies_;
};

// A reshape between views neither of which can be seen in the other's sizes (a transposed
// input into channels-last bytes): element by element in row-major order, one launch.
class ReshapeCopyKernel final : public Kernel {
 public:
  ReshapeCopyKernel(std::string name, TensorView dst, TensorView src)
      : name_(std::move(name)), dst_(std::move(dst)), src_(std::move(src)) {}
  Status run(const QueueContext& context) override { return launch_reshape_copy(dst_, src_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:reshape-copy:" + name_; }

 private:
  std::string name_;
  TensorView dst_, src_;
};

Result<KernelPtr> single_copy(const KernelRequest& r, TensorView src) {
  return CopyKernel::make(r.node.op_type, {{r.outputs[0], std::move(src)}});
}

// Materialize: the same elements in row-major order, into bytes of the output's own.
Result<KernelPtr> make_materialize(const KernelRequest& r, const CudaContext&) {
  if (auto src = reshape_view(r.inputs[0], r.outputs[0].sizes)) return single_copy(r, *src);
  if (auto dst = reshape_view(r.outputs[0], r.inputs[0].sizes))
    return CopyKernel::make(r.node.op_type, {{*dst, r.inputs[0]}});
  return KernelPtr(new ReshapeCopyKernel(r.node.op_type, r.outputs[0], r.inputs[0]));
}

// A view op whose outputs the planner gave bytes of their own: each present output is
// copied from the view of the input it is (ops/view_ops.h, what the planner computes).
Result<KernelPtr> make_view_copy(const KernelRequest& r, const CudaContext& context) {
  NodeInputs node(r.graph, r.node);
  std::vector<std::pair<TensorView, TensorView>> copies;
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    // Outputs that are constants (Dropout's all-true mask) are no views of the input.
    if (!r.outputs[i].allocation || r.graph.value(r.node.outputs[i]).is_constant()) continue;
    STRIDER_ASSIGN_OR_RETURN(std::optional<TensorView> src, output_view(node, i, r.inputs[0]));
    if (!src) return make_materialize(r, context);
    copies.emplace_back(r.outputs[i], std::move(*src));
  }
  return CopyKernel::make(r.node.op_type, copies);
}

Result<KernelPtr> make_concat(const KernelRequest& r, const CudaContext&) {
  NodeInputs node(r.graph, r.node);
  std::vector<std::pair<TensorView, TensorView>> copies;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    STRIDER_ASSIGN_OR_RETURN(TensorView part, concat_part_view(node, i, r.outputs[0]));
    copies.emplace_back(std::move(part), r.inputs[i]);
  }
  return CopyKernel::make("Concat", copies);
}

class GatherKernel final : public Kernel {
 public:
  Status init(const KernelRequest& r, int64_t axis, bool elements) {
    STRIDER_RETURN_IF_ERROR(report_.init());
    node_ = r.node.name;
    name_ = r.node.op_type;
    if (elements) return prepare_gather_elements(r.inputs[0], r.inputs[1], r.outputs[0], axis, report_.device(), &launch_);
    return prepare_gather(r.inputs[0], r.inputs[1], r.outputs[0], axis, report_.device(), &launch_);
  }
  Status run(const QueueContext& context) override { return launch_gather(launch_, stream_of(context)); }
  Status check_completed() override { return index_report_status(report_, node_); }
  std::string implementation() const override { return "strider-cuda:" + name_; }

 private:
  std::string name_;
  MappedReport report_;
  GatherLaunch launch_;
  std::string node_;
};

// Gather: indices are read on the GPU at run time; constant ones are also checked here, so
// a bad one fails at session creation.
Result<KernelPtr> make_gather(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, r.node.attributes.get_int("axis", 0));
  const TensorView& data = r.inputs[0];
  if (axis < 0) axis += data.rank();
  if (axis < 0 || axis >= data.rank()) return invalid_argument(fmt::format("axis out of range for rank {}", data.rank()));
  int64_t dim = data.sizes[size_t(axis)];
  if (const Tensor* indices = r.constant_input(1)) {
    for (int64_t j = 0; j < indices->num_elements(); ++j) {
      int64_t k = indices->element_as_int(j);
      if (k < -dim || k >= dim) return out_of_range(fmt::format("index {} out of range [{}, {})", k, -dim, dim));
    }
  }
  auto kernel = std::make_unique<GatherKernel>();
  STRIDER_RETURN_IF_ERROR(kernel->init(r, axis, false));
  return KernelPtr(std::move(kernel));
}

// GatherElements: indices read on the GPU at run time (constant ones were checked by
// shape inference).
Result<KernelPtr> make_gather_elements(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, resolve_gather_elements_axis(NodeInputs(r.graph, r.node)));
  auto kernel = std::make_unique<GatherKernel>();
  STRIDER_RETURN_IF_ERROR(kernel->init(r, axis, true));
  return KernelPtr(std::move(kernel));
}

}  // namespace

void register_copy_kernels(std::vector<KernelEntry>& table) {
  for (std::string_view op : {"Identity", "Dropout", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Split",
                              "Expand"})
    table.push_back({op, make_view_copy});
  table.push_back({"Materialize", make_materialize});
  table.push_back({"Concat", make_concat});
  table.push_back({"Gather", make_gather});
  table.push_back({"GatherElements", make_gather_elements});
}

}  // namespace strider::cuda
