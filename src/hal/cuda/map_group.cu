// The one-launch FusedMapGroup (launch.h's map_group section): every member's program over
// its own strided views, the member picked per block. Members are small (the pass groups
// only maps of up to kGroupedMapElements), so a thread takes one element through the
// strided indexer: the launch it saves is worth more than the vector loads it forgoes.
// Each element computes what the member's own FusedElementwise computes: the compiled
// forms' expressions as their instructions, otherwise the instructions interpreted, each
// with fused_math::apply (the same scalar math, so the same bits).
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/launch.h"

namespace strider::cuda {
namespace {

using namespace device;

constexpr int kRegisters = kMaxFusedInputs + kMaxFusedInstructions;

__device__ __forceinline__ float evaluate(const FusedCode& code, int inputs, float (&r)[kRegisters]) {
  using fused_math::apply;
  switch (code.form) {
    case FusedForm::kMulAdd:
      return apply<FusedOp::kAdd>(apply<FusedOp::kMul>(r[0], r[1], 0, 0), apply<FusedOp::kMul>(r[2], r[3], 0, 0), 0, 0);
    case FusedForm::kMulSub:
      return apply<FusedOp::kSub>(apply<FusedOp::kMul>(r[0], r[1], 0, 0), apply<FusedOp::kMul>(r[2], r[3], 0, 0), 0, 0);
    case FusedForm::kSiluGate:
      return apply<FusedOp::kMul>(apply<FusedOp::kMul>(r[0], apply<FusedOp::kSigmoid>(r[0], 0, 0, 0), 0, 0), r[1], 0, 0);
    default: break;
  }
  for (int j = 0; j < code.count; ++j)
    r[inputs + j] = fused_math::apply(FusedOp(code.op[j]), r[code.a[j]], code.b[j] >= 0 ? r[code.b[j]] : 0.0f,
                                      code.alpha[j], code.beta[j]);
  return r[inputs + code.count - 1];
}

template <typename T>
__global__ void __launch_bounds__(kThreads) map_group_kernel(const __grid_constant__ MapGroupArgs a) {
  device::order_after_producers();
  int m = 0;
  while (m + 1 < a.members && blockIdx.x >= a.first_block[m + 1]) ++m;
  const MapGroupMember& g = a.member[m];
  const int64_t i = int64_t(blockIdx.x - a.first_block[m]) * blockDim.x + threadIdx.x;
  if (i >= g.ix.count) return;
  int64_t off[kMapGroupOperands];
  strided_offsets(g.ix, g.div, i, off);
  float r[kRegisters];
#pragma unroll
  for (int k = 0; k < kMapGroupInputs; ++k)
    if (k < g.inputs) r[k] = float(load<T>(g.data[k + 1], off[k + 1]));
  store<T>(g.data[0], off[0], evaluate(g.code, g.inputs, r));
}

template <typename T>
cudaError_t launch_map_group(const MapGroupArgs& a, cudaStream_t stream) {
  launch_dependent(map_group_kernel<T>, a.first_block[a.members], kThreads, 0, stream, a);
  return cudaGetLastError();
}

Status prepare_member(const MapSpec& s, MapGroupMember* g, int64_t* blocks) {
  if (s.op != MapOp::kFused || s.inputs.empty() || s.inputs.size() > size_t(kMapGroupInputs))
    return unsupported("a grouped map is a fused program of 1 to " + std::to_string(kMapGroupInputs) + " inputs");
  for (const TensorView& in : s.inputs)
    if (in.dtype != s.out.dtype) return internal_error("grouped map input " + in.to_string() + " of another dtype");
  *g = MapGroupMember{};
  STRIDER_RETURN_IF_ERROR(make_map_indexer<kMapGroupOperands>(s, &g->ix, g->data));
  if (g->ix.count > int64_t(INT32_MAX)) return unsupported("a grouped map of 2^31 elements or more");
  make_fast_divisors(g->ix, g->div);
  g->inputs = int(s.inputs.size());
  g->code = s.params.fused;
  *blocks = (g->ix.count + kThreads - 1) / kThreads;
  return Status::ok();
}

}  // namespace

Status prepare_map_group(const std::vector<MapSpec>& members, MapGroupLaunch* l) {
  if (members.empty() || members.size() > size_t(kMapGroupMembers))
    return unsupported("a map group of " + std::to_string(members.size()) + " members");
  *l = MapGroupLaunch{};
  MapGroupArgs& a = l->args;
  a.members = int(members.size());
  int64_t blocks = 0;
  for (size_t m = 0; m < members.size(); ++m) {
    if (members[m].out.dtype != members[0].out.dtype) return unsupported("a map group of mixed dtypes");
    int64_t member_blocks = 0;
    STRIDER_RETURN_IF_ERROR(prepare_member(members[m], &a.member[m], &member_blocks));
    a.first_block[m] = uint32_t(blocks);
    blocks += member_blocks;
    if (blocks > int64_t(INT32_MAX)) return unsupported("a map group of more than 2^31 blocks");
  }
  a.first_block[a.members] = uint32_t(blocks);
  switch (members[0].out.dtype) {
    case DType::kF32: l->launcher = launch_map_group<float>; break;
    case DType::kBF16: l->launcher = launch_map_group<__nv_bfloat16>; break;
    case DType::kF16: l->launcher = launch_map_group<__half>; break;
    default: return unsupported("a map group over " + std::string(dtype_name(members[0].out.dtype)));
  }
  return Status::ok();
}

Status run_map_group(const MapGroupLaunch& l, cudaStream_t stream) {
  if (l.args.first_block[l.args.members] == 0) return Status::ok();
  cudaError_t error = l.launcher(l.args, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("map group kernel launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
