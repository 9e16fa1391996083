// bf16 convolutions and matmuls through their f32 kernels, on CPUs where oneDNN has no bf16.
//
// oneDNN 2.6 implements bf16 convolution and matmul only with AVX-512 (avx512_core and
// up). Below that it has nothing or its reference loops, and the naive strided loops are
// two hundred times slower than the f32 path (GatedChain20 on an AVX2 EPYC: 2.0 s against
// 10.5 ms). A widened kernel instead converts each bf16 operand into f32 scratch it owns
// (exactly: every bf16 is an f32), runs the op's own f32 kernel over those copies, and
// rounds each output into its bf16 view (to nearest even). That is the arithmetic of a bf16
// kernel accumulating in f32, which is what oneDNN's bf16 kernels do; a fused activation
// is applied in f32 before the rounding, as oneDNN's post-ops are.
//
// Views: the kernel reads and writes exactly the views the plan gave it (any strides; the
// conversions are strided loops), so the planner's views, offsets and in-place concat are
// untouched. The f32 copies are dense in the same dimension order as the views (a
// channels-last view gets a channels-last copy, the layout oneDNN's fast path wants); a
// broadcast dim (stride 0) stays a broadcast dim of size 1 in the copy.
//
// Memory: the copies belong to the kernel (like oneDNN's scratchpads, "kernel workspaces
// apart" in the plan's figures): twice the bf16 bytes of the node's operands. Constant
// operands (weights) are converted once, at creation; the others on every run.
#include "hal/cpu/widened_kernels.h"

#include <algorithm>
#include <new>
#include <numeric>

#include "hal/cpu/map_kernel.h"
#include "hal/cpu/onednn.h"
#include "hal/cpu/staged_output.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

// f32 memory for one operand: the elements of a bf16 view stored dense, in the view's order.
struct WideOperand {
  TensorView narrow;           // the plan's bf16 view
  TensorView narrow_storage;   // `narrow` with its broadcast dims cut to size 1
  TensorView wide;             // the f32 copy, as the f32 kernel sees it
  TensorView wide_storage;     // its elements, one per stored element
  std::unique_ptr<std::byte, AlignedFree> bytes;
  std::unique_ptr<Allocation> allocation;
};

bool is_broadcast_dim(const TensorView& v, size_t d) { return v.strides[d] == 0 && v.sizes[d] > 1; }

Result<WideOperand> widen(const TensorView& narrow, bool is_output) {
  WideOperand o;
  o.narrow = narrow;
  Shape storage_sizes = narrow.sizes;
  for (size_t d = 0; d < storage_sizes.size(); ++d)
    if (is_broadcast_dim(narrow, d)) {
      if (is_output) return unsupported("a bf16 output that broadcasts: " + narrow.to_string());
      storage_sizes[d] = 1;
    }
  Strides dense = dense_strides_in_order_of(storage_sizes, narrow.strides);
  int64_t bytes = std::max<int64_t>(num_elements(storage_sizes), 1) * int64_t(sizeof(float));
  o.bytes.reset(static_cast<std::byte*>(::operator new(size_t(bytes), std::align_val_t(64))));
  o.allocation = std::make_unique<Allocation>(0, "bf16-widened", "cpu", o.bytes.get(), bytes, 64, StorageMode::kHost, true);
  Strides wide_strides = dense;
  for (size_t d = 0; d < dense.size(); ++d)
    if (is_broadcast_dim(narrow, d)) wide_strides[d] = 0;
  STRIDER_ASSIGN_OR_RETURN(o.wide, make_view(*o.allocation, 0, DType::kF32, narrow.sizes, wide_strides, "widened"));
  STRIDER_ASSIGN_OR_RETURN(o.wide_storage, make_view(*o.allocation, 0, DType::kF32, storage_sizes, dense, "widened"));
  o.narrow_storage = narrow;
  o.narrow_storage.sizes = storage_sizes;
  return o;
}

struct Identity {
  float operator()(float x) const { return x; }
};

// The f32 kernel between conversions: bf16 inputs widened before it runs (constants
// already, at creation), its f32 outputs rounded into the bf16 views after.
class WidenedKernel final : public Kernel {
 public:
  WidenedKernel(std::vector<WideOperand> operands, std::vector<KernelPtr> before, KernelPtr inner,
                std::vector<KernelPtr> after)
      : operands_(std::move(operands)), before_(std::move(before)), inner_(std::move(inner)), after_(std::move(after)) {}
  Status run(const QueueContext& context) override {
    for (const KernelPtr& k : before_) STRIDER_RETURN_IF_ERROR(k->run(context));
    STRIDER_RETURN_IF_ERROR(inner_->run(context));
    for (const KernelPtr& k : after_) STRIDER_RETURN_IF_ERROR(k->run(context));
    return Status::ok();
  }
  std::string implementation() const override { return inner_->implementation() + " (bf16 widened to f32)"; }

 private:
  std::vector<WideOperand> operands_;  // owns the memory the kernels below read and write
  std::vector<KernelPtr> before_;
  KernelPtr inner_;
  std::vector<KernelPtr> after_;
};

}  // namespace

bool runs_slow_loops(const Kernel& kernel) {
  std::string name = kernel.implementation();
  return name.find(":ref") != std::string::npos || name.find("naive") != std::string::npos;
}

bool onednn_has_bf16_kernels() {
  static const bool has = [] {
    auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    return (isa & avx512) == avx512;
  }();
  return has;
}

std::string bf16_arithmetic_notice() {
  // Every CPU with AMX-BF16 has AVX512-BF16 too (and clang 14 knows no "amx-bf16" here).
  if (__builtin_cpu_supports("avx512bf16")) return "";
  if (onednn_has_bf16_kernels())
    return "this CPU has no bf16 instructions (AVX512-BF16, AMX): oneDNN emulates bf16 convolutions and matmuls "
           "with AVX-512 f32 arithmetic, which is slower than f32";
  return "this CPU has no bf16 instructions and no AVX-512: bf16 convolutions and matmuls run widened, each "
         "operand converted exactly to f32 and the result rounded back to bf16, which is slower than f32";
}

bool has_bf16_operand(const KernelRequest& r) {
  auto bf16 = [](const TensorView& v) { return v.allocation && v.dtype == DType::kBF16; };
  return std::any_of(r.inputs.begin(), r.inputs.end(), bf16) || std::any_of(r.outputs.begin(), r.outputs.end(), bf16);
}

Result<KernelPtr> make_widened_kernel(const KernelRequest& r, KernelFactory f32_factory) {
  std::vector<WideOperand> operands;
  std::vector<KernelPtr> before, after;
  KernelRequest wide{r.graph, r.node, r.inputs, r.outputs};
  operands.reserve(r.inputs.size() + r.outputs.size());
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    if (!r.has_input(i) || r.inputs[i].dtype != DType::kBF16) continue;
    STRIDER_ASSIGN_OR_RETURN(WideOperand o, widen(r.inputs[i], false));
    STRIDER_ASSIGN_OR_RETURN(KernelPtr convert,
                             make_map_kernel<float, bf16>("widen", o.wide_storage, {o.narrow_storage}, Identity{}));
    if (r.constant_input(i)) {
      STRIDER_RETURN_IF_ERROR(convert->run(QueueContext{}));  // weights do not change: once
    } else {
      before.push_back(std::move(convert));
    }
    wide.inputs[i] = o.wide;
    operands.push_back(std::move(o));
  }
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    if (!r.outputs[i].allocation || r.outputs[i].dtype != DType::kBF16) continue;
    STRIDER_ASSIGN_OR_RETURN(WideOperand o, widen(r.outputs[i], true));
    STRIDER_ASSIGN_OR_RETURN(KernelPtr round, make_map_kernel<bf16, float>("round", o.narrow, {o.wide}, Identity{}));
    after.push_back(std::move(round));
    wide.outputs[i] = o.wide;
    operands.push_back(std::move(o));
  }
  STRIDER_ASSIGN_OR_RETURN(KernelPtr inner, f32_factory(wide));
  if (runs_slow_loops(*inner))
    return unsupported(fmt::format("node '{}': its f32 kernel is no faster ({})", r.node.name, inner->implementation()));
  return KernelPtr(new WidenedKernel(std::move(operands), std::move(before), std::move(inner), std::move(after)));
}

}  // namespace strider::cpu
