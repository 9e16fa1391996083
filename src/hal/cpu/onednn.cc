#include "hal/cpu/onednn.h"

#include "hal/cpu/parallel.h"

#include <oneapi/dnnl/dnnl_debug.h>
#include <fmt/format.h>

#include <algorithm>

#include "hal/cpu/worker_queue.h"

namespace strider::cpu {

dnnl::engine& onednn_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& onednn_stream() {
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

dnnl::primitive_attr onednn_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

std::optional<dnnl::memory::data_type> onednn_type(DType dtype) {
  using dt = dnnl::memory::data_type;
  switch (dtype) {
    case DType::kF32: return dt::f32;
    case DType::kBF16: return dt::bf16;
    case DType::kI32: return dt::s32;
    case DType::kI8: return dt::s8;
    case DType::kU8: return dt::u8;
    default: return std::nullopt;
  }
}

namespace {

// The stride of a size-1 dim never moves an address, but oneDNN reads all strides to
// recognize a layout: a batch-1 channel slice with the concat's batch stride would look
// non-plain and get the reference implementation. Give each size-1 dim the stride a dense
// tensor in the same order would have.
dnnl::memory::dims canonical_strides(const Shape& sizes, const Strides& strides) {
  dnnl::memory::dims result(strides.begin(), strides.end());
  int64_t extent = 1;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1) extent = std::max(extent, strides[d] * sizes[d]);
  bool before_first = true;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1) {
      before_first = false;
      continue;
    }
    size_t next = d + 1;
    while (next < sizes.size() && sizes[next] <= 1) ++next;
    result[d] = before_first ? extent : next < sizes.size() ? strides[next] * sizes[next] : 1;
  }
  return result;
}

}  // namespace

dnnl::memory::desc onednn_desc(DType dtype, const Shape& sizes, const Strides& strides) {
  dnnl::memory::dims dims(sizes.begin(), sizes.end());
  return dnnl::memory::desc(dims, *onednn_type(dtype), canonical_strides(sizes, strides));
}

dnnl::memory::desc onednn_desc(const TensorView& view) {
  return onednn_desc(view.dtype, view.sizes, view.strides);
}

dnnl::memory onednn_memory(const TensorView& view, const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, onednn_engine(), view.host_data());
}

std::string onednn_impl_name(const dnnl::primitive_desc_base& pd) {
  return std::string("onednn:") + pd.impl_info_str();
}

std::optional<OneDnnEltwise> onednn_eltwise_of(const FusedProgram& p) {
  using dnnl::algorithm;
  const auto& code = p.code;
  if (code.size() == 2 && code[0].op == FusedOp::kSigmoid && code[0].a == 0 && code[1].op == FusedOp::kMul &&
      ((code[1].a == 0 && code[1].b == 1) || (code[1].a == 1 && code[1].b == 0)))
    return OneDnnEltwise{algorithm::eltwise_swish, 1.0f};  // x * sigmoid(1 * x)
  if (code.size() != 1 || code[0].a != 0) return std::nullopt;
  const FusedInstruction& i = code[0];
  switch (i.op) {
    case FusedOp::kRelu: return OneDnnEltwise{algorithm::eltwise_relu};
    case FusedOp::kLeakyRelu: return OneDnnEltwise{algorithm::eltwise_relu, i.alpha};
    case FusedOp::kSigmoid: return OneDnnEltwise{algorithm::eltwise_logistic};
    case FusedOp::kTanh: return OneDnnEltwise{algorithm::eltwise_tanh};
    case FusedOp::kElu: return OneDnnEltwise{algorithm::eltwise_elu, i.alpha};
    case FusedOp::kHardSwish: return OneDnnEltwise{algorithm::eltwise_hardswish};
    case FusedOp::kGelu: return OneDnnEltwise{i.alpha == 0 ? algorithm::eltwise_gelu_erf : algorithm::eltwise_gelu_tanh};
    // oneDNN clips to max(low, min(high, x)); ONNX gives high everywhere when low > high.
    case FusedOp::kClip:
      if (i.alpha > i.beta) return std::nullopt;
      return OneDnnEltwise{algorithm::eltwise_clip, i.alpha, i.beta};
    default: return std::nullopt;
  }
}

void append_post_ops(std::span<const OneDnnPostOp> ops, dnnl::post_ops& post_ops,
                     std::vector<std::pair<int, const TensorView*>>& binary_args, std::string& names) {
  for (const OneDnnPostOp& op : ops) {
    if (!op.is_binary) {
      post_ops.append_eltwise(1.0f, op.eltwise.algorithm, op.eltwise.alpha, op.eltwise.beta);
      names += std::string("+") + dnnl_alg_kind2str(dnnl::convert_to_c(op.eltwise.algorithm));
      continue;
    }
    binary_args.push_back({post_ops.len(), &op.operand});
    post_ops.append_binary(op.binary, onednn_desc(op.operand));
    names += std::string("+") + dnnl_alg_kind2str(dnnl::convert_to_c(op.binary));
  }
}

bool onednn_fast_binary_post_ops(const std::string& impl) {
  return impl.find("gemm") == std::string::npos && impl.find("ref") == std::string::npos;
}

bool has_binary(std::span<const OneDnnPostOp> ops) {
  for (const OneDnnPostOp& op : ops)
    if (op.is_binary) return true;
  return false;
}

dnnl::memory reorder_constant(const dnnl::memory& source, const dnnl::memory::desc& layout) {
  dnnl::memory packed(layout, onednn_engine());
  ScopedOmpThreads alone(1);
  dnnl::reorder(source, packed).execute(onednn_stream(), const_cast<dnnl::memory&>(source), packed);
  onednn_stream().wait();
  return packed;
}

void onednn_execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args, bool team) {
  // Under strider's own team an OpenMP team would be a second pool awake beside it
  // (hal/cpu/own_team.h): every primitive runs on the calling thread then.
  if (team && !own_team_enabled()) {
    thread_started_team = true;
    primitive.execute(onednn_stream(), args);
  } else {
    // Not every implementation keeps the team it was created for: gemm-based ones size it
    // when they run, from the running thread's setting (a one-thread "gemm:jit" matmul ran
    // on the session's two threads, and its idle pool thread then spun beside a waiter).
    ScopedOmpThreads alone(1);
    primitive.execute(onednn_stream(), args);
  }
  onednn_stream().wait();
}

Result<TensorView> part_of(const TensorView& v, int axis, int64_t i0, int64_t i1, int64_t extent) {
  if (axis < 0 || v.rank() <= axis || (v.sizes[size_t(axis)] != extent && v.sizes[size_t(axis)] != 1))
    return unsupported("an operand of another shape");
  return v.sizes[size_t(axis)] == 1 ? v : slice_view(v, axis, i0, i1, 1);
}

Status cut_binary_operands(std::vector<OneDnnPostOp>& ops, int axis, int64_t i0, int64_t i1, int64_t extent) {
  for (OneDnnPostOp& op : ops)
    if (op.is_binary) {
      STRIDER_ASSIGN_OR_RETURN(op.operand, part_of(op.operand, axis, i0, i1, extent));
    }
  return Status::ok();
}

dnnl::memory OneDnnPrimitiveKernel::weights_for(const dnnl::primitive_desc_base& pd, const dnnl::memory& plain,
                                                dnnl::memory* shared) {
  if (pd.weights_desc() == plain.get_desc()) return plain;
  const bool reuse = shared && *shared && shared->get_desc() == pd.weights_desc();
  packed_weights_ = reuse ? *shared : reorder_constant(plain, pd.weights_desc());
  if (shared) *shared = packed_weights_;
  impl_ += fmt::format(" (weights reordered once, {} bytes)", pd.weights_desc().get_size());
  return packed_weights_;
}

}  // namespace strider::cpu
