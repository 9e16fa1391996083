// Reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin) and Softmax / LogSoftmax on
// the GPU, with the CPU kernels' semantics: resolve_reduce's axes, keepdims and
// noop_with_empty_axes; Softmax over the flattened tail from `axis` before opset 13 and
// over the single `axis` from 13. The launches live in reduce.cu.
#include <fmt/format.h>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/launch.h"
#include "ops/shape_ops.h"

namespace strider::cuda {

using KernelPtr = std::unique_ptr<Kernel>;
namespace {

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(std::string name, ReduceLaunch launch) : name_(std::move(name)), launch_(launch) {}
  Status run(const QueueContext& context) override { return run_reduce(launch_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:" + name_; }

 private:
  std::string name_;
  ReduceLaunch launch_;
};

// Splits the input dims into rows (dims where `reduced` is false) and inner dims. The
// output holds the rows: at the input's positions when it has the input's rank
// (keepdims, or no reduction), else in order.
ReduceSpec split_dims(ReduceKind kind, const TensorView& in, const TensorView& out, const std::vector<bool>& reduced) {
  ReduceSpec s;
  s.kind = kind;
  s.in = in;
  s.out = out;
  const bool same_rank = out.rank() == in.rank();
  size_t kept = 0;
  for (size_t d = 0; d < size_t(in.rank()); ++d) {
    if (reduced[d]) {
      s.inner_sizes.push_back(in.sizes[d]);
      s.in_inner_strides.push_back(in.strides[d]);
      s.out_inner_strides.push_back(same_rank ? out.strides[d] : 0);
    } else {
      s.row_sizes.push_back(in.sizes[d]);
      s.in_row_strides.push_back(in.strides[d]);
      s.out_row_strides.push_back(out.strides[same_rank ? d : kept]);
      ++kept;
    }
  }
  return s;
}

Result<KernelPtr> make_kernel(const KernelRequest& r, const ReduceSpec& spec) {
  ReduceLaunch launch;
  Status s = prepare_reduce(spec, &launch);
  if (s.code() == StatusCode::kUnsupported)
    return unsupported(fmt::format("{} on {} is not supported: {}", r.node.op_type, dtype_name(spec.in.dtype), s.message()));
  STRIDER_RETURN_IF_ERROR(s);
  return KernelPtr(new ReduceKernel(r.node.op_type, launch));
}

Result<KernelPtr> make_reduce(const KernelRequest& r, ReduceKind kind) {
  STRIDER_ASSIGN_OR_RETURN(ReduceParams p, resolve_reduce(NodeInputs(r.graph, r.node)));
  const TensorView& in = r.inputs[0];
  const TensorView& out = r.outputs[0];
  // Max and Min of booleans are "any" and "all"; sums of booleans are not defined.
  if (in.dtype == DType::kBool && kind != ReduceKind::kMax && kind != ReduceKind::kMin)
    return unsupported(fmt::format("{} on bool", r.node.op_type));
  const bool float_only = kind == ReduceKind::kL2 || kind == ReduceKind::kLogSum || kind == ReduceKind::kLogSumExp;
  if (float_only && !is_floating(in.dtype)) return unsupported(fmt::format("{} on {}", r.node.op_type, dtype_name(in.dtype)));
  if (out.dtype != in.dtype)
    return invalid_argument(fmt::format("{} from {} to {}", r.node.op_type, dtype_name(in.dtype), dtype_name(out.dtype)));
  std::vector<bool> reduced(size_t(in.rank()), false);
  if (!p.noop)
    for (int64_t a : p.axes) reduced[size_t(a)] = true;
  ReduceSpec spec = split_dims(kind, in, out, reduced);
  if (num_elements(spec.row_sizes) != out.num_elements())
    return invalid_argument(fmt::format("{} of {} into {}", r.node.op_type, in.to_string(), out.to_string()));
  return make_kernel(r, spec);
}

Result<KernelPtr> make_softmax(const KernelRequest& r, ReduceKind kind) {
  const TensorView& in = r.inputs[0];
  const TensorView& out = r.outputs[0];
  int64_t rank = in.rank();
  STRIDER_ASSIGN_OR_RETURN(int64_t axis, r.node.attributes.get_int("axis", r.node.opset < 13 ? 1 : -1));
  if (axis < 0) axis += rank;
  // Before opset 13 the input is coerced to 2-D at `axis`: every dim from it on is reduced.
  int64_t last = r.node.opset < 13 ? rank - 1 : axis;
  if (rank == 0) axis = last = 0;
  if (rank > 0 && (axis < 0 || axis >= rank)) return invalid_argument(fmt::format("axis {} of a rank {} input", axis, rank));
  if (!is_floating(in.dtype)) return unsupported(fmt::format("{} on {}", r.node.op_type, dtype_name(in.dtype)));
  if (out.dtype != in.dtype || out.sizes != in.sizes)
    return invalid_argument(fmt::format("{} from {} to {}", r.node.op_type, in.to_string(), out.to_string()));
  std::vector<bool> reduced(size_t(rank), false);
  for (int64_t d = axis; d <= last && d < rank; ++d) reduced[size_t(d)] = true;
  return make_kernel(r, split_dims(kind, in, out, reduced));
}

template <ReduceKind kKind>
Result<KernelPtr> reduce(const KernelRequest& r, const CudaContext&) {
  return make_reduce(r, kKind);
}
template <ReduceKind kKind>
Result<KernelPtr> softmax(const KernelRequest& r, const CudaContext&) {
  return make_softmax(r, kKind);
}

class ArgReduceKernel final : public Kernel {
 public:
  ArgReduceKernel(std::string name, ArgReduceLaunch launch) : name_(std::move(name)), launch_(launch) {}
  Status run(const QueueContext& context) override { return run_arg_reduce(launch_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:" + name_; }

 private:
  std::string name_;
  ArgReduceLaunch launch_;
};

Result<KernelPtr> make_arg_reduce(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(ArgReduceParams p, resolve_arg_reduce(NodeInputs(r.graph, r.node)));
  ArgReduceLaunch launch;
  Status s = prepare_arg_reduce(r.inputs[0], r.outputs[0], p.axis, p.max, p.last, &launch);
  if (!s.is_ok()) return s;
  return KernelPtr(new ArgReduceKernel(r.node.op_type, launch));
}

class CumSumKernel final : public Kernel {
 public:
  explicit CumSumKernel(CumSumLaunch launch) : launch_(launch) {}
  Status run(const QueueContext& context) override { return run_cumsum(launch_, stream_of(context)); }
  std::string implementation() const override { return launch_.product ? "strider-cuda:CumProd" : "strider-cuda:CumSum"; }

 private:
  CumSumLaunch launch_;
};

Result<KernelPtr> make_cumsum(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(CumSumParams p, resolve_cumsum(NodeInputs(r.graph, r.node)));
  CumSumLaunch launch;
  STRIDER_RETURN_IF_ERROR(prepare_cumsum(r.inputs[0], r.outputs[0], p.axis, p.exclusive, p.reverse, p.product, &launch));
  return KernelPtr(new CumSumKernel(launch));
}

class TopKKernel final : public Kernel {
 public:
  explicit TopKKernel(TopKLaunch launch) : launch_(launch) {}
  Status run(const QueueContext& context) override { return run_topk(launch_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:TopK"; }

 private:
  TopKLaunch launch_;
};

Result<KernelPtr> make_topk(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(TopKParams p, resolve_topk(NodeInputs(r.graph, r.node)));
  if (r.outputs.size() < 2 || !r.outputs[1].allocation) return unsupported("TopK without its Indices output");
  TopKLaunch launch;
  STRIDER_RETURN_IF_ERROR(prepare_topk(r.inputs[0], r.outputs[0], r.outputs[1], p.axis, p.k, p.largest, &launch));
  return KernelPtr(new TopKKernel(launch));
}

}  // namespace

void register_reduce_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"TopK", make_topk});
  table.push_back({"CumSum", make_cumsum});
  table.push_back({"CumProd", make_cumsum});
  table.push_back({"ArgMax", make_arg_reduce});
  table.push_back({"ArgMin", make_arg_reduce});
  table.push_back({"ReduceSum", reduce<ReduceKind::kSum>});
  table.push_back({"ReduceMean", reduce<ReduceKind::kMean>});
  table.push_back({"ReduceMax", reduce<ReduceKind::kMax>});
  table.push_back({"ReduceMin", reduce<ReduceKind::kMin>});
  table.push_back({"ReduceProd", reduce<ReduceKind::kProd>});
  table.push_back({"ReduceL1", reduce<ReduceKind::kL1>});
  table.push_back({"ReduceL2", reduce<ReduceKind::kL2>});
  table.push_back({"ReduceSumSquare", reduce<ReduceKind::kSumSquare>});
  table.push_back({"ReduceLogSum", reduce<ReduceKind::kLogSum>});
  table.push_back({"ReduceLogSumExp", reduce<ReduceKind::kLogSumExp>});
  table.push_back({"Softmax", softmax<ReduceKind::kSoftmax>});
  table.push_back({"LogSoftmax", softmax<ReduceKind::kLogSoftmax>});
}

}  // namespace strider::cuda
