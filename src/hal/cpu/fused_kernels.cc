// FusedElementwise on the CPU (ops/fused_elementwise.h). The program runs a tile of up to
// kTile elements at a time: the inputs of the tile are loaded into f32 rows (any strides,
// stride 0 for broadcast), each instruction is one loop over the tile with its op chosen
// once per tile (so the loop vectorizes; exp, sigmoid and tanh by hal/cpu/vector_math.h),
// and the last row is stored. Intermediates live in the kernel's rows, never in the arena.
#include <fmt/format.h>

#include <algorithm>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/parallel.h"
#include "hal/cpu/strided_loop.h"
#include "hal/cpu/vector_math.h"
#include "ops/fused_elementwise.h"

namespace strider::cpu {
namespace {

constexpr int64_t kTile = 256;
constexpr size_t kOperands = size_t(kMaxFusedInputs) + 1;  // the output, then the inputs

template <FusedOp kOp>
[[gnu::always_inline]] inline void apply_row(const FusedInstruction& i, const float* a, const float* b, float* out, int64_t n) {
  for (int64_t e = 0; e < n; ++e) out[e] = fused_math::apply<kOp>(a[e], b ? b[e] : 0.0f, i.alpha, i.beta);
}

STRIDER_CPU_CLONES void run_instruction(const FusedInstruction& i, const float* a, const float* b, float* out,
                                        int64_t n) {
  // The transcendental rows, vectorized (the C library computes them one call per element).
  if (i.op == FusedOp::kExp) return vector_math::exp_row(a, out, n);
  if (i.op == FusedOp::kSigmoid) return vector_math::sigmoid_row(a, out, n);
  if (i.op == FusedOp::kTanh) return vector_math::tanh_row(a, out, n);
  if (i.op == FusedOp::kErf) return vector_math::erf_row(a, out, n);
  switch (i.op) {
#define STRIDER_FUSED_ROW(name, kind, kernel, params) \
  case FusedOp::k##name: return apply_row<FusedOp::k##name>(i, a, b, out, n);
    STRIDER_ELEMENTWISE_OPS(STRIDER_FUSED_ROW)
#undef STRIDER_FUSED_ROW
  }
}

template <typename T>
class FusedKernel final : public Kernel {
 public:
  FusedKernel(FusedProgram program, TensorView out, std::vector<TensorView> inputs, std::string expression)
      : program_(std::move(program)), out_(std::move(out)), inputs_(std::move(inputs)),
        expression_(std::move(expression)),
        registers_(size_t(program_.inputs + int(program_.code.size()))), threads_(max_parallel_threads()),
        rows_(size_t(threads_) * registers_ * size_t(kTile)), reg_(size_t(threads_) * registers_) {}

  Status run(const QueueContext&) override {
    // Unused operand slots repeat the output with zero strides: they never stop dims merging.
    const Strides zeros(out_.sizes.size(), 0);
    StridedOperands<kOperands> ops;
    for (size_t k = 0; k < kOperands; ++k) {
      const TensorView* view = k == 0 ? &out_ : k <= inputs_.size() ? &inputs_[k - 1] : nullptr;
      ops.base[k] = view ? view->host_data() : out_.host_data();
      ops.strides[k] = view ? view->strides.data() : zeros.data();
      ops.element_size[k] = int64_t(sizeof(T));
    }
    // Elements are independent: split over the session's threads, weighed by program length.
    const int64_t work = 1 + int64_t(program_.code.size());
    parallel_for_each_strided(out_.sizes, ops, work, [this](const auto& p, int64_t n, const auto& s, int thread) {
      for (int64_t first = 0; first < n; first += kTile) tile(p, s, first, std::min(kTile, n - first), thread);
    }, threads_);
    return Status::ok();
  }
  std::string implementation() const override { return "strider:fused " + expression_; }

 private:
  float* row(int thread, int r) {
    return rows_.data() + (size_t(thread) * registers_ + size_t(r)) * size_t(kTile);
  }

  // An f32 operand read or written with stride 1 is used where it lies (no copy into a
  // row): then the row loops read the input, and the last instruction writes the output,
  // directly. An output that is also an input is the same view (the planner runs a program
  // in place only over its own operand), and each loop reads element e before writing it.
  void tile(const std::array<std::byte*, kOperands>& p, const std::array<int64_t, kOperands>& s, int64_t first,
            int64_t n, int thread) {
    const float** reg = reg_.data() + size_t(thread) * registers_;
    for (int k = 0; k < program_.inputs; ++k) {
      const std::byte* base = p[size_t(k) + 1] + first * s[size_t(k) + 1];
      const int64_t stride = s[size_t(k) + 1];
      if (std::is_same_v<T, float> && stride == int64_t(sizeof(T))) {
        reg[size_t(k)] = reinterpret_cast<const float*>(base);
        continue;
      }
      float* r = row(thread, k);
      reg[size_t(k)] = r;
      if (stride == int64_t(sizeof(T))) {
        const T* in = reinterpret_cast<const T*>(base);
        for (int64_t e = 0; e < n; ++e) r[e] = float(load(in[e]));
      } else {
        for (int64_t e = 0; e < n; ++e) r[e] = float(load(*reinterpret_cast<const T*>(base + e * stride)));
      }
    }
    std::byte* out = p[0] + first * s[0];
    const bool direct_out = std::is_same_v<T, float> && s[0] == int64_t(sizeof(T));
    const size_t last = program_.code.size() - 1;
    for (size_t j = 0; j < program_.code.size(); ++j) {
      const FusedInstruction& i = program_.code[j];
      float* result = j == last && direct_out ? reinterpret_cast<float*>(out) : row(thread, program_.inputs + int(j));
      run_instruction(i, reg[size_t(i.a)], i.b >= 0 ? reg[size_t(i.b)] : nullptr, result, n);
      reg[size_t(program_.inputs) + j] = result;
    }
    if (direct_out) return;
    const float* result = reg[size_t(program_.inputs) + last];
    if (s[0] == int64_t(sizeof(T))) {
      T* dense = reinterpret_cast<T*>(out);
      for (int64_t e = 0; e < n; ++e) dense[e] = store<T>(result[e]);
    } else {
      for (int64_t e = 0; e < n; ++e) *reinterpret_cast<T*>(out + e * s[0]) = store<T>(result[e]);
    }
  }

  FusedProgram program_;
  TensorView out_;
  std::vector<TensorView> inputs_;
  std::string expression_;
  size_t registers_;          // the program's inputs and instruction results
  int threads_;               // the team the kernel may use (its scratch is per thread)
  std::vector<float> rows_;   // per thread, one row of kTile per register
  std::vector<const float*> reg_;  // per thread, where each register's tile lies (a row, or an operand)
};

Result<std::unique_ptr<Kernel>> make_fused(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(FusedProgram program, read_fused_program(r.node));
  if (r.inputs.size() != size_t(program.inputs)) return internal_error("fused program and inputs disagree");
  return make_fused_program_kernel(program, r.outputs[0], r.inputs);
}

}  // namespace

Result<std::unique_ptr<Kernel>> make_fused_program_kernel(const FusedProgram& program, const TensorView& out,
                                                          const std::vector<TensorView>& views) {
  std::vector<TensorView> inputs;
  for (const TensorView& in : views) {
    if (in.dtype != out.dtype) return unsupported("fused elementwise over mixed dtypes");
    STRIDER_ASSIGN_OR_RETURN(TensorView broadcast, broadcast_view(in, out.sizes));
    inputs.push_back(std::move(broadcast));
  }
  std::string expression = describe_fused_program(program);
  return dispatch_dtype(out.dtype, [&]<typename T>() -> Result<std::unique_ptr<Kernel>> {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>)
      return std::unique_ptr<Kernel>(new FusedKernel<T>(program, out, std::move(inputs), expression));
    else
      return unsupported(fmt::format("fused elementwise on {}", dtype_name(out.dtype)));
  });
}

namespace {
class KernelThen final : public Kernel {
 public:
  KernelThen(std::unique_ptr<Kernel> first, std::unique_ptr<Kernel> then) : first_(std::move(first)), then_(std::move(then)) {}
  Status run(const QueueContext& context) override {
    STRIDER_RETURN_IF_ERROR(first_->run(context));
    return then_->run(context);
  }
  std::string implementation() const override { return first_->implementation() + " then " + then_->implementation(); }

 private:
  std::unique_ptr<Kernel> first_, then_;
};
}  // namespace

std::unique_ptr<Kernel> make_kernel_then(std::unique_ptr<Kernel> first, std::unique_ptr<Kernel> then) {
  return std::unique_ptr<Kernel>(new KernelThen(std::move(first), std::move(then)));
}

void register_fused_kernels(std::vector<KernelEntry>& table) {
  table.push_back({kFusedElementwiseOp, make_fused});
}

}  // namespace strider::cpu
