#include "hal/cuda/small_matmul.h"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <string_view>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/epilogue.h"
#include "hal/cuda/small_gemm.h"

namespace strider::cuda {
namespace {

// A smaller tile height is offered only while the larger one leaves the GPU short of
// blocks (two per SM of an H100 or H200).
constexpr int64_t kEnoughBlocks = 264;
// The K a block of a split takes in one step (four groups' slices of 32).
constexpr int64_t kSplitSliceK = 128;

class SmallMatMul final : public Kernel {
 public:
  SmallMatMul(const SmallGemmLaunch& launch, std::string program) : launch_(launch), program_(std::move(program)) {}
  Status run(const QueueContext& queue) override { return run_small_gemm(launch_, stream_of(queue)); }
  std::string implementation() const override {
    std::string text = fmt::format("strider-cuda:small-gemm/{}rows", 8 * launch_.args.rows_per_thread);
    if (launch_.args.split > 1) text += fmt::format("-split{}", launch_.args.split);
    if (!program_.empty()) text.append(" then ").append(program_);
    return text;
  }

 private:
  SmallGemmLaunch launch_;
  std::string program_;
};

bool fits_int32(int64_t v) { return v >= 0 && v < int64_t(INT32_MAX); }

const void* address_of(const TensorView& v) { return v.allocation->address() + v.byte_offset; }

// Out's strides address each element once: sorted by size, each dim's stride reaches past
// the span of the dims inside it.
bool distinct_elements(const TensorView& v) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size) of dims above 1
  for (size_t d = 0; d < size_t(v.rank()); ++d)
    if (v.sizes[d] > 1) dims.emplace_back(v.strides[d] < 0 ? -v.strides[d] : v.strides[d], v.sizes[d]);
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;
  for (const auto& [stride, size] : dims) {
    if (stride < span) return false;
    span = stride * size;
  }
  return true;
}

// The product's sizes and strides, without the program.
std::optional<SmallGemmArgs> product_args(const MatMulViews& v, float scale) {
  const size_t r = size_t(v.out.rank());
  if (r < 2 || r - 2 > size_t(kSmallGemmBatchDims)) return std::nullopt;
  SmallGemmArgs a;
  const int64_t m = v.out.sizes[r - 2], n = v.out.sizes[r - 1], k = v.a.sizes[r - 1];
  if (!fits_int32(m) || !fits_int32(n) || !fits_int32(k) || m == 0 || n == 0 || k == 0) return std::nullopt;
  a.m = int32_t(m), a.n = int32_t(n), a.k = int32_t(k);
  a.batch_dims = int32_t(r - 2);
  for (size_t d = 0; d + 2 < r; ++d) {
    a.batch_sizes[d] = int32_t(v.out.sizes[d]);
    a.a_batch[d] = v.a.sizes[d] == 1 ? 0 : v.a.strides[d];  // a batch dim of 1 broadcasts
    a.b_batch[d] = v.b.sizes[d] == 1 ? 0 : v.b.strides[d];
    a.out_batch[d] = v.out.strides[d];
  }
  a.a_row = v.a.strides[r - 2], a.a_col = v.a.strides[r - 1];
  a.b_row = v.b.strides[r - 2], a.b_col = v.b.strides[r - 1];
  a.out_row = v.out.strides[r - 2], a.out_col = v.out.strides[r - 1];
  a.a_k_fastest = a.a_col == 1 || a.a_row != 1;
  a.b_n_fastest = a.b_col == 1 || a.b_row != 1;
  a.out = const_cast<void*>(address_of(v.out));
  a.a = address_of(v.a);
  a.b = address_of(v.b);
  a.scale = scale;
  return a;
}

// The program's registers as views over out's dims, in the order a compiled form reads
// them (then_program's reordering), and where the product went.
Status set_program(const FusedProgram& program, const std::vector<TensorView>& operands, const TensorView& out,
                   SmallGemmArgs* a, std::string* text) {
  if (operands.size() + 1 != size_t(program.inputs) || program.inputs > kMaxFusedInputs ||
      program.code.size() > size_t(kMaxFusedInstructions) || program.code.empty())
    return unsupported("small GEMM: a program outside its limits");
  std::vector<int> order(size_t(program.inputs));
  for (int k = 0; k < program.inputs; ++k) order[size_t(k)] = k;
  FusedProgram ordered = program;
  if (std::optional<std::vector<int>> form_order = compiled_form_order(program)) {
    order = *form_order;
    ordered = with_operand_order(program, order);
  }
  const size_t r = size_t(out.rank());
  a->registers = program.inputs;
  for (int k = 0; k < program.inputs; ++k) {
    if (order[size_t(k)] == 0) {
      a->product_register = k;
      continue;
    }
    const TensorView& operand = operands[size_t(order[size_t(k)] - 1)];
    STRIDER_ASSIGN_OR_RETURN(TensorView b, broadcast_view(operand, out.sizes));
    if (b.dtype != out.dtype) return unsupported("small GEMM: an operand of another dtype");
    // Read by each output's thread before it writes that output: only out's very view.
    if (may_overlap(b, out) && !same_view(b, out)) return unsupported("small GEMM: an operand overlapping out");
    SmallGemmOperand& o = a->operands[k];
    o.data = address_of(b);
    for (size_t d = 0; d + 2 < r; ++d) o.batch[d] = b.strides[d];
    o.row = b.strides[r - 2], o.col = b.strides[r - 1];
  }
  a->code = fused_map_params(ordered).fused;
  *text = describe_fused_program(ordered);
  return Status::ok();
}

}  // namespace

std::vector<SmallGemmLaunch> small_gemm_launches(const SmallGemmArgs& args, DType dtype) {
  std::vector<SmallGemmLaunch> launches;
  int64_t larger_tile_blocks = 0;
  for (int rows_per_thread : {4, 2, 1}) {
    if (rows_per_thread < 4 && larger_tile_blocks >= kEnoughBlocks) break;
    SmallGemmLaunch launch;
    launch.args = args;
    launch.args.rows_per_thread = rows_per_thread;
    if (!prepare_small_gemm(dtype, &launch).is_ok()) continue;
    larger_tile_blocks = small_gemm_blocks(launch.args);
    launches.push_back(launch);
    // And K split over a cluster: the least split that makes enough blocks, at most 8,
    // and no more than gives every block a step of its own.
    SmallGemmLaunch split = launch;
    split.args.split = 2;
    while (split.args.split < 8 && small_gemm_blocks(launch.args) * split.args.split < kEnoughBlocks)
      split.args.split *= 2;
    while (split.args.split > 1 && int64_t(split.args.k) < int64_t(split.args.split) * kSplitSliceK)
      split.args.split /= 2;
    if (split.args.split > 1 && prepare_small_gemm(dtype, &split).is_ok()) launches.push_back(split);
  }
  return launches;
}

FusedProgram added_operand_program() { return FusedProgram{2, {FusedInstruction{FusedOp::kAdd, 0, 1, 0, 0}}}; }

std::vector<std::unique_ptr<Kernel>> small_matmul_kernels(const MatMulViews& views, float scale,
                                                          const FusedProgram* program,
                                                          const std::vector<TensorView>& operands) {
  std::vector<std::unique_ptr<Kernel>> kernels;
  if (const char* offer = std::getenv("STRIDER_CUDA_SMALL_GEMM"); offer && std::string_view(offer) == "0")
    return kernels;
  const DType dtype = views.out.dtype;
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) return kernels;
  if (views.a.dtype != dtype || views.b.dtype != dtype) return kernels;
  if (views.out.num_elements() > kMaxSmallGemmOutputs || !distinct_elements(views.out)) return kernels;
  if (may_overlap(views.a, views.out) || may_overlap(views.b, views.out)) return kernels;
  std::optional<SmallGemmArgs> args = product_args(views, scale);
  if (!args) return kernels;
  std::string text;
  if (program && !set_program(*program, operands, views.out, &*args, &text).is_ok()) return kernels;
  for (const SmallGemmLaunch& launch : small_gemm_launches(*args, dtype))
    kernels.push_back(std::make_unique<SmallMatMul>(launch, text));
  return kernels;
}

}  // namespace strider::cuda
