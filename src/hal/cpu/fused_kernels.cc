// FusedElementwise on the CPU (ops/fused_elementwise.h). The program runs a tile of up to
// kTile elements at a time: the inputs of the tile are loaded into f32 rows (any strides,
// stride 0 for broadcast), each instruction is one loop over the tile with its op chosen
// once per tile (so the loop vectorizes; exp, sigmoid and tanh by hal/cpu/vector_math.h),
// and the last row is stored. Intermediates live in the kernel's rows, never in the arena.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <span>

#include "base/cache_aligned.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/parallel.h"
#include "hal/cpu/strided_loop.h"
#include "hal/cpu/vector_math.h"
#include "hal/map_group_kernel.h"
#include "ops/fused_elementwise.h"
#include "ops/fused_map_group.h"

namespace strider::cpu {
namespace {

// 512: tiles of 256 ran the gated chain's gates at 16 or 25 us by the process (WaveNet's 0.25 or
// 0.37 ms); 512 and 1024 gave the fast figure in every process, one thread. 512 keeps a
// long program's rows within L1.
constexpr int64_t kTile = 512;
constexpr int64_t kMinDirectRun = 32;
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

// Rows of `n` floats, `m` of them `step` bytes apart, to and from a dense tile: the channel
// slices of a channels-last tensor (16 channels of 48, then the next pixel's) as one tile.
STRIDER_CPU_CLONES void gather_rows(float* tile, const std::byte* rows, int64_t step, int64_t n, int64_t m) {
  for (int64_t r = 0; r < m; ++r) {
    const float* in = reinterpret_cast<const float*>(rows + r * step);
    for (int64_t e = 0; e < n; ++e) tile[r * n + e] = in[e];
  }
}
STRIDER_CPU_CLONES void scatter_rows(const float* tile, std::byte* rows, int64_t step, int64_t n, int64_t m) {
  for (int64_t r = 0; r < m; ++r) {
    float* out = reinterpret_cast<float*>(rows + r * step);
    for (int64_t e = 0; e < n; ++e) out[e] = tile[r * n + e];
  }
}
// An operand broadcast along the row (stride 0 there): each row's one value, n times.
STRIDER_CPU_CLONES void fill_rows(float* tile, const std::byte* values, int64_t step, int64_t n, int64_t m) {
  for (int64_t r = 0; r < m; ++r) {
    const float v = *reinterpret_cast<const float*>(values + r * step);
    for (int64_t e = 0; e < n; ++e) tile[r * n + e] = v;
  }
}

// How each instruction runs: alone, or, for a Tanh and a Sigmoid whose only reader is one
// Mul (the gate of WaveNet-style units), all three as one gated row at the Mul
// (vector_math::gated_tanh_row: one pass, one division a lane instead of two).
// And a Sigmoid whose only reader is a Mul by the sigmoid's own input (SiLU, YOLOv8's
// activation) as one SiLU row at the Mul (vector_math::silu_row: one pass, same floats).
struct ProgramStep {
  enum Kind { kRun, kSkip, kGated, kSilu } kind = kRun;
  int tanh_of = -1, sigmoid_of = -1;  // kGated: the registers tanh and sigmoid read; kSilu: x in sigmoid_of
};

std::vector<ProgramStep> plan_steps(const FusedProgram& p) {
  std::vector<ProgramStep> steps(p.code.size());
  std::vector<int> readers(size_t(p.inputs) + p.code.size(), 0);
  for (const FusedInstruction& i : p.code) {
    ++readers[size_t(i.a)];
    if (i.b >= 0) ++readers[size_t(i.b)];
  }
  auto made_by = [&](int reg, FusedOp op) {
    return reg >= p.inputs && p.code[size_t(reg - p.inputs)].op == op && readers[size_t(reg)] == 1 &&
           steps[size_t(reg - p.inputs)].kind == ProgramStep::kRun;
  };
  for (size_t j = 0; j < p.code.size(); ++j) {
    const FusedInstruction& i = p.code[j];
    if (i.op != FusedOp::kMul || i.b < 0 || i.a == i.b) continue;
    bool silu = false;
    for (auto [x, g] : {std::pair{i.a, i.b}, std::pair{i.b, i.a}}) {
      if (silu || !made_by(g, FusedOp::kSigmoid) || p.code[size_t(g - p.inputs)].a != x) continue;
      steps[j] = {ProgramStep::kSilu, -1, x};
      steps[size_t(g - p.inputs)].kind = ProgramStep::kSkip;
      silu = true;
    }
    if (silu) continue;
    for (auto [t, g] : {std::pair{i.a, i.b}, std::pair{i.b, i.a}}) {
      if (!made_by(t, FusedOp::kTanh) || !made_by(g, FusedOp::kSigmoid)) continue;
      steps[j] = {ProgramStep::kGated, p.code[size_t(t - p.inputs)].a, p.code[size_t(g - p.inputs)].a};
      steps[size_t(t - p.inputs)].kind = steps[size_t(g - p.inputs)].kind = ProgramStep::kSkip;
      break;
    }
  }
  return steps;
}

template <typename T>
class FusedKernel final : public Kernel {
 public:
  FusedKernel(FusedProgram program, TensorView out, std::vector<TensorView> inputs, std::string expression)
      : program_(std::move(program)), out_(std::move(out)), inputs_(std::move(inputs)),
        expression_(std::move(expression)), steps_(plan_steps(program_)),
        registers_(size_t(program_.inputs + int(program_.code.size()))), threads_(max_parallel_threads()),
        rows_(size_t(threads_) * registers_ * size_t(kTile)), reg_(size_t(threads_) * reg_stride_),
        batches_(size_t(threads_)) {
    for (Batch& b : batches_) b.runs.reserve(size_t(kTile));
    if constexpr (std::is_same_v<T, float>) rows_loop_ = plan_rows();
  }

  Status run(const QueueContext&) override {
    const StridedOperands<kOperands> ops = operands();
    // Elements are independent: split over the session's threads, weighed by program length.
    const int64_t work = 1 + int64_t(program_.code.size());
    if (rows_loop_) return run_rows(ops.base, work);
    parallel_for_each_strided(
        out_.sizes, ops, work, [this](const Pointers& p, int64_t n, const ByteStrides& s, int thread) { visit(p, n, s, thread); },
        threads_, [this](int thread) { flush(thread); });
    return Status::ok();
  }
  std::string implementation() const override { return "strider:fused " + expression_; }

 private:
  float* row(int thread, int r) {
    return rows_.data() + (size_t(thread) * registers_ + size_t(r)) * size_t(kTile);
  }

  using Pointers = std::array<std::byte*, kOperands>;
  using ByteStrides = std::array<int64_t, kOperands>;

  // The output and the inputs as the strided loop's operands. Unused operand slots repeat
  // the output with zero strides: they never stop dims merging.
  StridedOperands<kOperands> operands() const {
    StridedOperands<kOperands> ops;
    for (size_t k = 0; k < kOperands; ++k) {
      const TensorView* view = k == 0 ? &out_ : k <= inputs_.size() ? &inputs_[k - 1] : nullptr;
      ops.base[k] = view ? view->host_data() : out_.host_data();
      ops.strides[k] = view ? view->strides.data() : zeros_.data();
      ops.element_size[k] = int64_t(sizeof(T));
    }
    return ops;
  }

  // Short rows (f32): the loop's innermost run is shorter than a tile and every operand is
  // dense along it or broadcast along it, as over the channel slices of a channels-last
  // tensor. Then whole rows are moved, kTile / n of them per tile, instead of gathering each
  // run through the generic batch (a record of every operand's pointer per 16 elements: the
  // C2f block's SiLU-and-add spent three times its math there). Rows of 32 or more dense
  // floats, which the generic path computes where they lie a run at a time, go this way
  // too: four 64-float rows to a tile beat four calls per instruction (WaveNet's gates
  // 0.38 -> 0.24 ms, the gated chain's 0.36 -> 0.32 ms, one thread).
  struct RowsLoop {
    CollapsedLoop<kOperands> outer;           // the loop over rows
    int64_t n = 0;                            // elements in a row
    std::array<bool, kOperands> broadcast{};  // one value per row (stride 0 along it)
  };

  std::optional<RowsLoop> plan_rows() const {
    const StridedOperands<kOperands> ops = operands();
    CollapsedLoop<kOperands> loop = collapse_loop(out_.sizes, ops, output_stride_order(out_.sizes, ops));
    if (loop.sizes.size() < 2 || loop.sizes.back() >= kTile) return std::nullopt;
    RowsLoop rows;
    rows.n = loop.sizes.back();
    const ByteStrides& inner = loop.strides.back();
    if (inner[0] != int64_t(sizeof(float))) return std::nullopt;
    for (int k = 1; k <= program_.inputs; ++k) {
      if (inner[size_t(k)] != 0 && inner[size_t(k)] != int64_t(sizeof(float))) return std::nullopt;
      rows.broadcast[size_t(k)] = inner[size_t(k)] == 0;
    }
    loop.sizes.pop_back();
    loop.strides.pop_back();
    rows.outer = std::move(loop);
    return rows;
  }

  Status run_rows(const Pointers& base, int64_t work) {
    const RowsLoop& rows = *rows_loop_;
    const int64_t per_tile = std::max<int64_t>(1, kTile / rows.n);
    parallel_for(loop_elements(rows.outer), rows.n * work, [&](int64_t begin, int64_t end, int thread) {
      for_each_strided_range(rows.outer, base, begin, end, [&](const Pointers& p, int64_t count, const ByteStrides& step) {
        for (int64_t r = 0; r < count; r += per_tile)
          tile_of_rows(advanced(p, step, r), step, std::min(per_tile, count - r), thread);
      });
    }, threads_);
    return Status::ok();
  }

  // The program over `m` rows of the rows loop starting at `p`, consecutive rows `step`
  // bytes apart. Every input row is read before any output row is written (an in-place
  // program's output is one of its inputs).
  void tile_of_rows(const Pointers& p, const ByteStrides& step, int64_t m, int thread) {
    const int64_t n = rows_loop_->n;
    const float** reg = reg_.data() + size_t(thread) * reg_stride_;
    for (int k = 0; k < program_.inputs; ++k) {
      const bool broadcast = rows_loop_->broadcast[size_t(k) + 1];
      if (!broadcast && step[size_t(k) + 1] == n * int64_t(sizeof(float))) {  // rows back to back: read in place
        reg[size_t(k)] = reinterpret_cast<const float*>(p[size_t(k) + 1]);
        continue;
      }
      float* r = row(thread, k);
      reg[size_t(k)] = r;
      if (broadcast) fill_rows(r, p[size_t(k) + 1], step[size_t(k) + 1], n, m);
      else gather_rows(r, p[size_t(k) + 1], step[size_t(k) + 1], n, m);
    }
    run_program(reg, thread, n * m, nullptr);
    scatter_rows(reg[size_t(program_.inputs) + program_.code.size() - 1], p[0], step[0], n, m);
  }
  // The instructions over n elements of the registers `reg` (their results into this
  // thread's rows; the last one's into `last_out` when given), as steps_ says.
  void run_program(const float** reg, int thread, int64_t n, float* last_out) {
    const size_t last = program_.code.size() - 1;
    for (size_t j = 0; j < program_.code.size(); ++j) {
      const ProgramStep& step = steps_[j];
      if (step.kind == ProgramStep::kSkip) continue;
      const FusedInstruction& i = program_.code[j];
      float* result = j == last && last_out ? last_out : row(thread, program_.inputs + int(j));
      if (step.kind == ProgramStep::kGated)
        vector_math::gated_tanh_row(reg[size_t(step.tanh_of)], reg[size_t(step.sigmoid_of)], result, n);
      else if (step.kind == ProgramStep::kSilu)
        vector_math::silu_row(reg[size_t(step.sigmoid_of)], result, n);
      else
        run_instruction(i, reg[size_t(i.a)], i.b >= 0 ? reg[size_t(i.b)] : nullptr, result, n);
      reg[size_t(program_.inputs) + j] = result;
    }
  }

  struct Run {  // one innermost run of the loop: its operands' first elements and its length
    Pointers p;
    int64_t n;
  };
  struct alignas(kCacheLine) Batch {  // short runs gathered into one tile, not yet computed (a line per thread)
    std::vector<Run> runs;
    ByteStrides strides{};
    int64_t elements = 0;
  };

  static Pointers advanced(Pointers p, const ByteStrides& s, int64_t elements) {
    for (size_t k = 0; k < kOperands; ++k) p[k] += elements * s[k];
    return p;
  }

  // A run of kTile elements or more is computed a tile at a time where it lies. Shorter ones
  // (the channel slice of a channels-last tensor: C elements, then a jump) are gathered,
  // several to a tile, so each instruction's loop still covers up to kTile elements; the
  // loop's runs all share one set of strides.
  void visit(Pointers p, int64_t n, const ByteStrides& s, int thread) {
    if (n >= kTile || (n >= kMinDirectRun && all_dense_f32(s))) {
      for (int64_t first = 0; first < n; first += kTile) {
        const Run run{advanced(p, s, first), std::min(kTile, n - first)};
        tile(std::span(&run, 1), s, run.n, thread);
      }
      return;
    }
    Batch& b = batches_[size_t(thread)];
    b.strides = s;
    while (n > 0) {
      const int64_t take = std::min(n, kTile - b.elements);
      b.runs.push_back({p, take});
      b.elements += take;
      p = advanced(p, s, take);
      n -= take;
      if (b.elements == kTile) flush(thread);
    }
  }

  // Whether every operand of the loop is f32 with stride 1, or an input broadcast along it
  // (stride 0): a tile of one run then copies nothing but those values into their rows,
  // which beats gathering runs of kMinDirectRun or more (measured on WaveNet's
  // channels-last gates: 64-element runs).
  bool all_dense_f32(const ByteStrides& s) const {
    if (!std::is_same_v<T, float>) return false;
    for (int k = 0; k <= program_.inputs; ++k)
      if (s[size_t(k)] != int64_t(sizeof(T)) && (k == 0 || s[size_t(k)] != 0)) return false;
    return true;
  }

  void flush(int thread) {
    Batch& b = batches_[size_t(thread)];
    if (b.runs.empty()) return;
    tile(b.runs, b.strides, b.elements, thread);
    b.runs.clear();
    b.elements = 0;
  }

  static void gather(const std::byte* base, int64_t stride, float* row, int64_t n) {
    if (stride == 0) {  // a broadcast operand (a scalar, a bias along the run): one value
      std::fill(row, row + n, float(load(*reinterpret_cast<const T*>(base))));
      return;
    }
    if (stride == int64_t(sizeof(T))) {
      const T* in = reinterpret_cast<const T*>(base);
      for (int64_t e = 0; e < n; ++e) row[e] = float(load(in[e]));
    } else {
      for (int64_t e = 0; e < n; ++e) row[e] = float(load(*reinterpret_cast<const T*>(base + e * stride)));
    }
  }
  static void scatter(const float* row, std::byte* base, int64_t stride, int64_t n) {
    if (stride == int64_t(sizeof(T))) {
      T* dense = reinterpret_cast<T*>(base);
      for (int64_t e = 0; e < n; ++e) dense[e] = store<T>(row[e]);
    } else {
      for (int64_t e = 0; e < n; ++e) *reinterpret_cast<T*>(base + e * stride) = store<T>(row[e]);
    }
  }

  // The program over `runs` (n elements in all, at most kTile). With a single run, an f32
  // operand of stride 1 is used where it lies (no copy into a row): the row loops read the
  // input, and the last instruction writes the output, directly. An output that is also an
  // input is the same view (the planner runs a program in place only over its own
  // operand), and every input element is read before its output element is written.
  void tile(std::span<const Run> runs, const ByteStrides& s, int64_t n, int thread) {
    const bool single = runs.size() == 1;
    const float** reg = reg_.data() + size_t(thread) * reg_stride_;
    for (int k = 0; k < program_.inputs; ++k) {
      const int64_t stride = s[size_t(k) + 1];
      if (single && std::is_same_v<T, float> && stride == int64_t(sizeof(T))) {
        reg[size_t(k)] = reinterpret_cast<const float*>(runs[0].p[size_t(k) + 1]);
        continue;
      }
      float* r = row(thread, k);
      reg[size_t(k)] = r;
      int64_t at = 0;
      for (const Run& run : runs) {
        gather(run.p[size_t(k) + 1], stride, r + at, run.n);
        at += run.n;
      }
    }
    const bool direct_out = single && std::is_same_v<T, float> && s[0] == int64_t(sizeof(T));
    run_program(reg, thread, n, direct_out ? reinterpret_cast<float*>(runs[0].p[0]) : nullptr);
    if (direct_out) return;
    const float* result = reg[size_t(program_.inputs) + program_.code.size() - 1];
    int64_t at = 0;
    for (const Run& run : runs) {
      scatter(result + at, run.p[0], s[0], run.n);
      at += run.n;
    }
  }

  FusedProgram program_;
  TensorView out_;
  std::vector<TensorView> inputs_;
  std::string expression_;
  std::vector<ProgramStep> steps_;
  size_t registers_;          // the program's inputs and instruction results
  // Each thread's register pointers start a cache line of their own: written for every
  // instruction, they would otherwise share a line with the next thread's.
  size_t reg_stride_ = cache_lines_of<const float*>(registers_);
  int threads_;               // the team the kernel may use (its scratch is per thread)
  CacheAlignedVector<float> rows_;  // per thread, one row of kTile per register
  CacheAlignedVector<const float*> reg_;  // per thread, where each register's tile lies (a row, or an operand)
  std::vector<Batch> batches_;      // per thread
  Strides zeros_ = Strides(out_.sizes.size(), 0);
  std::optional<RowsLoop> rows_loop_;  // set when the loop is one of short rows (f32)
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
  // A FusedMapGroup's members one after another: the CPU's maps cost no launch.
  table.push_back({kFusedMapGroupOp, [](const KernelRequest& r) { return make_sequential_map_group(r, make_fused); }});
}

}  // namespace strider::cpu
