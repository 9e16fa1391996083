// The kernel classes of scatter.h: ScatterND, ScatterElements (data copied into the output
// first) and GatherND, each holding the MappedReport its launch flags bad indices in.
#include <fmt/format.h>

#include "hal/cuda/copy.h"
#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/scatter.h"
#include "ops/scatter.h"

namespace strider::cuda {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

class ScatterKernel final : public Kernel {
 public:
  Status init(const KernelRequest& r, const ScatterParams& p) {
    STRIDER_RETURN_IF_ERROR(report_.init());
    node_ = r.node.name;
    name_ = r.node.op_type;
    data_ = r.inputs[0];
    out_ = r.outputs[0];
    return prepare_scatter(r.inputs[1], r.inputs[2], out_, name_ == "ScatterElements", p, report_.device(), &launch_);
  }
  Status run(const QueueContext& context) override {
    if (!same_view(out_, data_)) STRIDER_RETURN_IF_ERROR(launch_copy(out_, data_, stream_of(context)));
    return run_scatter(launch_, stream_of(context));
  }
  Status check_completed() override { return index_report_status(report_, node_); }
  std::string implementation() const override { return "strider-cuda:" + name_; }

 private:
  std::string name_, node_;
  TensorView data_, out_;
  MappedReport report_;
  ScatterLaunch launch_;
};

Result<KernelPtr> make_scatter(const KernelRequest& r, const CudaContext&) {
  NodeInputs node(r.graph, r.node);
  STRIDER_ASSIGN_OR_RETURN(ScatterParams p, r.node.op_type == "ScatterElements" ? resolve_scatter_elements(node)
                                                                                 : resolve_scatter_nd(node));
  auto kernel = std::make_unique<ScatterKernel>();
  STRIDER_RETURN_IF_ERROR(kernel->init(r, p));
  return KernelPtr(std::move(kernel));
}

class GatherNDKernel final : public Kernel {
 public:
  Status init(const KernelRequest& r, const GatherNDParams& p) {
    STRIDER_RETURN_IF_ERROR(report_.init());
    node_ = r.node.name;
    return prepare_gather_nd(r.inputs[0], r.inputs[1], r.outputs[0], p, report_.device(), &launch_);
  }
  Status run(const QueueContext& context) override { return run_gather_nd(launch_, stream_of(context)); }
  Status check_completed() override { return index_report_status(report_, node_); }
  std::string implementation() const override { return "strider-cuda:GatherND"; }

 private:
  std::string node_;
  MappedReport report_;
  GatherNDLaunch launch_;
};

Result<KernelPtr> make_gather_nd(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(GatherNDParams p, resolve_gather_nd(NodeInputs(r.graph, r.node)));
  auto kernel = std::make_unique<GatherNDKernel>();
  STRIDER_RETURN_IF_ERROR(kernel->init(r, p));
  return KernelPtr(std::move(kernel));
}

}  // namespace

Status index_report_status(MappedReport& report, const std::string& node) {
  GatherReport bad;
  if (!report.take(&bad)) return Status::ok();
  return out_of_range(fmt::format("node '{}': index {} out of range [{}, {})", node, bad.bad_index, -bad.dim, bad.dim));
}

void register_scatter_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"ScatterND", make_scatter});
  table.push_back({"ScatterElements", make_scatter});
  table.push_back({"GatherND", make_gather_nd});
}

}  // namespace strider::cuda
