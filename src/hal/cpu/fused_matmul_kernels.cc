// FusedMatMul on the CPU (ops/fused_elementwise.h): oneDNN's matmul with the epilogue as its
// post-ops where it peels into them (hal/cpu/epilogue.h), so the product is written once,
// already finished; else the plain matmul, then the program as a fused elementwise pass
// over the output in place: never wrong, one more pass.
#include <optional>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/epilogue.h"
#include "hal/cpu/matmul.h"
#include "hal/matmul_views.h"
#include "ops/fused_elementwise.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

Result<KernelPtr> make_fused_matmul(const KernelRequest& r) {
  if (r.inputs.size() < 2) return invalid_model(fmt::format("node '{}': FusedMatMul needs A and B", r.node.name));
  STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program_of(r.node, int(r.inputs.size()) - 1));
  const TensorView& out = r.outputs[0];
  const MatMulViews views = align_matmul(r.inputs[0], r.inputs[1], out);
  const DType dtype = out.dtype;
  const bool constant_b = r.constant_input(1) != nullptr;
  if (dtype == DType::kF32 || dtype == DType::kBF16) {
    if (std::optional<PostOpPlan> plan = plan_post_ops(r, program, out, 1, true)) {
      auto fused = make_matmul_of(views, plan->bias ? &*plan->bias : nullptr, 1.0f, r.node.name, plan->ops, constant_b);
      if (fused.is_ok() || fused.status().code() != StatusCode::kUnsupported) return fused;
    }
  }
  STRIDER_ASSIGN_OR_RETURN(KernelPtr matmul, make_matmul_of(views, nullptr, 1.0f, r.node.name, {}, constant_b));
  std::vector<TensorView> operands{out};
  operands.insert(operands.end(), r.inputs.begin() + 2, r.inputs.end());
  STRIDER_ASSIGN_OR_RETURN(KernelPtr epilogue, make_fused_program_kernel(program, out, operands));
  return make_kernel_then(std::move(matmul), std::move(epilogue));
}

}  // namespace

void register_fused_matmul_kernels(std::vector<KernelEntry>& table) {
  table.push_back({kFusedMatMulOp, make_fused_matmul});
}

}  // namespace strider::cpu
