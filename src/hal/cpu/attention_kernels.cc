// FusedAttention on the CPU (ops/fused_attention.h). Per batch index, the keys and values
// are read once through their views (any strides: Kt a transposed view, a chunk of a fused
// projection) into packed f32 rows of the kernel's own; then per block of up to 32 query
// rows the scores are one block product with those rows, each row goes through the score
// steps and a softmax, the weighted sums of the value rows are a second block product, all
// in f32, and each output row is stored once. A block's scores live in the thread's scratch,
// never in the plan's memory. Batch positions and blocks of query rows are split over the
// session's threads (hal/cpu/parallel.h), each with its own packed rows.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hal/attention_views.h"
#include "base/cache_aligned.h"
#include "hal/cpu/copy.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/parallel.h"
#include "hal/cpu/vector_math.h"

namespace strider::cpu {
namespace {

// out[r, :] = (sum_k a[r, k] * b[k, :]) * scale[r] (scale null: 1) for a block of rows,
// a [rows, inner] and out [rows, cols] dense row-major, b [inner, cols] rows `ldb` apart: the two products of attention, the
// scores (queries by Kt) and the weighted sums (probabilities by V). Done as `inner` passes
// of out[r, :] += a[r, k] * b[k, :] over contiguous rows, which vectorize with no horizontal
// sum; kRows rows and kColumnBlock columns keep their sums in registers across the passes,
// so each vector of b loaded feeds kRows multiply-adds (one row at a time was bound by the
// loads: about 15% of the core's multiply-add rate).
constexpr int64_t kRows = 4;
constexpr int64_t kColumnBlock = 32;
STRIDER_CPU_CLONES void block_product(const float* a, const float* b, int64_t ldb, const float* scale, float* out,
                                      int64_t rows, int64_t inner, int64_t cols) {
  int64_t r0 = 0;
  for (; r0 + kRows <= rows; r0 += kRows) {
    const float* a0 = a + r0 * inner;
    int64_t c0 = 0;
    for (; c0 + kColumnBlock <= cols; c0 += kColumnBlock) {
      float acc[kRows][kColumnBlock] = {};
      for (int64_t k = 0; k < inner; ++k) {
        const float* row = b + k * ldb + c0;
        for (int64_t r = 0; r < kRows; ++r) {
          const float x = a0[r * inner + k];
          for (int64_t c = 0; c < kColumnBlock; ++c) acc[r][c] += x * row[c];
        }
      }
      for (int64_t r = 0; r < kRows; ++r) {
        const float f = scale ? scale[r0 + r] : 1.0f;
        for (int64_t c = 0; c < kColumnBlock; ++c) out[(r0 + r) * cols + c0 + c] = acc[r][c] * f;
      }
    }
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t c = c0; c < cols; ++c) {
        float sum = 0.0f;
        for (int64_t k = 0; k < inner; ++k) sum += a0[r * inner + k] * b[k * ldb + c];
        out[(r0 + r) * cols + c] = sum * (scale ? scale[r0 + r] : 1.0f);
      }
  }
  for (int64_t r = r0; r < rows; ++r) {
    float* row = out + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] = 0.0f;
    for (int64_t k = 0; k < inner; ++k) {
      const float x = a[r * inner + k];
      for (int64_t c = 0; c < cols; ++c) row[c] += x * b[k * ldb + c];
    }
    if (scale)
      for (int64_t c = 0; c < cols; ++c) row[c] *= scale[r];
  }
}

// kLanes floats as one GCC/Clang vector: lane-wise selects and sums that compile to
// AVX-512, AVX2 or SSE per clone (an array of lanes was split into scalars instead).
constexpr int64_t kLanes = 16;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t LaneMask __attribute__((vector_size(kLanes * sizeof(int32_t))));

// (A macro, not a function: a function returning a 64-byte vector has a different ABI
// with and without AVX-512, and GCC warns of it.)
#define STRIDER_LOAD_LANES(v, p) std::memcpy(&(v), (p), sizeof(Lanes))

// The row's largest score (NaNs skipped) and whether it holds a NaN.
STRIDER_CPU_CLONES float row_max(const float* scores, int64_t keys, bool* any_nan) {
  Lanes lane_max = Lanes{} - INFINITY;
  LaneMask lane_nan = LaneMask{};
  int64_t j0 = 0;
  for (; j0 + kLanes <= keys; j0 += kLanes) {
    Lanes s;
    STRIDER_LOAD_LANES(s, scores + j0);
    lane_max = s > lane_max ? s : lane_max;
    lane_nan |= s != s;
  }
  float max = -INFINITY;
  int nan = 0;
  for (int64_t l = 0; l < kLanes; ++l) {
    max = lane_max[l] > max ? lane_max[l] : max;
    nan |= lane_nan[l];
  }
  for (int64_t j = j0; j < keys; ++j) {
    max = scores[j] > max ? scores[j] : max;
    nan |= scores[j] != scores[j];
  }
  *any_nan = nan != 0;
  return max;
}

// sum_j p[j] in kLanes partial sums (the order differs from a serial sum).
STRIDER_CPU_CLONES float row_sum(const float* p, int64_t keys) {
  Lanes lanes = Lanes{};
  int64_t j0 = 0;
  for (; j0 + kLanes <= keys; j0 += kLanes) {
    Lanes v;
    STRIDER_LOAD_LANES(v, p + j0);
    lanes += v;
  }
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  for (int64_t j = j0; j < keys; ++j) sum += p[j];
  return sum;
}

// A step that reads no operand over a row: one loop per kind, so each vectorizes.
STRIDER_CPU_CLONES void apply_step_row(ScoreStepKind kind, float value, float* scores, int64_t keys) {
  switch (kind) {
    case ScoreStepKind::kMul:
      for (int64_t j = 0; j < keys; ++j) scores[j] = apply_score_step(ScoreStepKind::kMul, value, scores[j], 0.0f);
      return;
    case ScoreStepKind::kDiv:
      for (int64_t j = 0; j < keys; ++j) scores[j] = apply_score_step(ScoreStepKind::kDiv, value, scores[j], 0.0f);
      return;
    default:
      for (int64_t j = 0; j < keys; ++j) scores[j] = apply_score_step(kind, value, scores[j], 0.0f);
  }
}

// scores[j] += x[j] (a mask or bias row) and scores[j] -= by (the row's max), vectorized
// for the CPU (the kernel's own loops are compiled for the x86-64 baseline).
STRIDER_CPU_CLONES void add_row(float* scores, const float* x, int64_t keys) {
  for (int64_t j = 0; j < keys; ++j) scores[j] += x[j];
}
STRIDER_CPU_CLONES void shift_row(float* scores, float by, int64_t keys) {
  for (int64_t j = 0; j < keys; ++j) scores[j] -= by;
}
// A Where step over a row of a boolean mask (bytes, `col` apart): one loop per kind, so
// each vectorizes (GPT-2's causal mask: Where(mask, -inf, s)).
STRIDER_CPU_CLONES void where_row(ScoreStepKind kind, float value, float* scores, const uint8_t* mask, int64_t col,
                                  int64_t keys) {
  if (kind == ScoreStepKind::kKeepWhere) {
    for (int64_t j = 0; j < keys; ++j) scores[j] = mask[j * col] != 0 ? scores[j] : value;
  } else {
    for (int64_t j = 0; j < keys; ++j) scores[j] = mask[j * col] != 0 ? value : scores[j];
  }
}

// The largest |x[i]|, or infinity when one is not finite.
STRIDER_CPU_CLONES float largest_magnitude(const float* x, int64_t n) {
  Lanes lane_max = Lanes{};
  LaneMask not_finite = LaneMask{};
  int64_t j0 = 0;
  for (; j0 + kLanes <= n; j0 += kLanes) {
    Lanes v;
    STRIDER_LOAD_LANES(v, x + j0);
    const Lanes a = v < 0 ? -v : v;
    not_finite |= ~(a <= 3.4028235e38f);  // inf, and NaN (no comparison holds)
    lane_max = a > lane_max ? a : lane_max;
  }
  float largest = 0.0f;
  bool finite = true;
  for (int64_t l = 0; l < kLanes; ++l) {
    largest = lane_max[l] > largest ? lane_max[l] : largest;
    finite &= not_finite[l] == 0;
  }
  for (int64_t j = j0; j < n; ++j) {
    const float a = x[j] < 0 ? -x[j] : x[j];
    finite &= a <= 3.4028235e38f;
    largest = a > largest ? a : largest;
  }
  return finite ? largest : INFINITY;
}

// Queries per work item: items are (batch index, block of query rows), split over the
// threads; a thread packs a batch's keys and values once for its consecutive items.
constexpr int64_t kQueryBlock = 32;

template <typename T>
class AttentionKernel final : public Kernel {
  // One thread's scratch: the packed keys (Kt as [D, T]) and values ([T, Dv]) of the batch
  // index it last packed, and a block of queries' query rows, scores (the exponentiated
  // ones in place), inverse sums and output rows.
  struct alignas(kCacheLine) Scratch {  // a line of its own: packed_keys is written per batch
    CacheAlignedVector<float> keys, values, scores, query, row, scale;
    std::vector<uint8_t> invalid;  // per row of the block: its softmax is undefined
    int64_t packed_keys = -1, packed_values = -1;  // offsets of the packed batch (-1: none)
    float keys_bound = INFINITY;  // the packed keys' largest magnitude (inf: one is not finite)
    bool values_finite = false;   // every packed value is finite
    // Per query block, the mask's key limit (-1: not scanned yet) at the mask offset
    // `limits_base`: a mask broadcast over batch and heads is scanned once a run.
    std::vector<int64_t> mask_limits;
    int64_t limits_base = -1;
  };

 public:
  AttentionKernel(FusedAttentionParams params, AttentionViews views)
      : p_(std::move(params)), a_(std::move(views)), threads_(max_parallel_threads()), mask_(plan_mask(p_)) {
    for (int t = 0; t < threads_; ++t)
      scratch_.push_back(Scratch{CacheAlignedVector<float>(size_t(a_.keys * a_.head)), CacheAlignedVector<float>(size_t(a_.keys * a_.v_head)),
                                 CacheAlignedVector<float>(size_t(kQueryBlock * a_.keys)),
                                 CacheAlignedVector<float>(size_t(kQueryBlock * a_.head)),
                                 CacheAlignedVector<float>(size_t(kQueryBlock * a_.v_head)), CacheAlignedVector<float>(kQueryBlock),
                                 std::vector<uint8_t>(kQueryBlock)});
  }

  Status run(const QueueContext&) override {
    const int64_t count = num_elements(a_.batch);
    const int64_t blocks = (a_.q_len + kQueryBlock - 1) / kQueryBlock;
    const int64_t work = std::min(a_.q_len, kQueryBlock) * a_.keys * (a_.head + a_.v_head);
    for (Scratch& s : scratch_) s.packed_keys = s.packed_values = s.limits_base = -1;  // the inputs changed since
    parallel_for(count * blocks, work, [&](int64_t begin, int64_t end, int thread) {
      Scratch& s = scratch_[size_t(thread)];
      for (int64_t item = begin; item < end; ++item) {
        const std::vector<int64_t> base = batch_base(item / blocks);
        if (base[kAttnViewKt] != s.packed_keys) {
          pack_keys(s, s.packed_keys = base[kAttnViewKt]);
          s.keys_bound = largest_magnitude(s.keys.data(), a_.head * a_.keys);
        }
        if (base[kAttnViewV] != s.packed_values) {
          pack_values(s, s.packed_values = base[kAttnViewV]);
          s.values_finite = largest_magnitude(s.values.data(), a_.keys * a_.v_head) < INFINITY;
        }
        const int64_t first = (item % blocks) * kQueryBlock;
        query_block(s, base, first, std::min(a_.q_len, first + kQueryBlock));
      }
    }, threads_);
    return Status::ok();
  }
  std::string implementation() const override { return "strider:attention " + describe_fused_attention(p_); }

 private:
  const T* data(int k) const { return a_.views[size_t(k)].template host_data_as<T>(); }

  // Every operand's element offset at the `b`-th batch position (row-major over a_.batch).
  std::vector<int64_t> batch_base(int64_t b) const {
    std::vector<int64_t> base(size_t(a_.operands()), 0);
    for (size_t d = a_.batch.size(); d-- > 0;) {
      const int64_t i = b % a_.batch[d];
      b /= a_.batch[d];
      for (size_t k = 0; k < base.size(); ++k) base[k] += i * a_.batch_strides[k][d];
    }
    return base;
  }

  // keys[d * T + j] = Kt[d, j]; values[j * Dv + e] = V[j, e].
  void pack_keys(Scratch& s, int64_t base) const {
    const T* src = data(kAttnViewKt);
    const int64_t rows = a_.row_stride[kAttnViewKt], cols = a_.col_stride[kAttnViewKt];
    if constexpr (std::is_same_v<T, float>) {  // Kt is usually K transposed: a blocked transpose
      const int64_t sizes[2] = {a_.head, a_.keys}, dst_strides[2] = {a_.keys, 1}, src_strides[2] = {rows, cols};
      copy_strided(sizes, reinterpret_cast<std::byte*>(s.keys.data()), dst_strides,
                   reinterpret_cast<const std::byte*>(src + base), src_strides, sizeof(float));
      return;
    }
    for (int64_t d = 0; d < a_.head; ++d)
      for (int64_t j = 0; j < a_.keys; ++j) s.keys[size_t(d * a_.keys + j)] = float(load(src[base + d * rows + j * cols]));
  }
  void pack_values(Scratch& s, int64_t base) const {
    const T* src = data(kAttnViewV);
    const int64_t rows = a_.row_stride[kAttnViewV], cols = a_.col_stride[kAttnViewV];
    if constexpr (std::is_same_v<T, float>) {  // rows of V, usually contiguous: row copies
      const int64_t sizes[2] = {a_.keys, a_.v_head}, dst_strides[2] = {a_.v_head, 1}, src_strides[2] = {rows, cols};
      copy_strided(sizes, reinterpret_cast<std::byte*>(s.values.data()), dst_strides,
                   reinterpret_cast<const std::byte*>(src + base), src_strides, sizeof(float));
      return;
    }
    for (int64_t j = 0; j < a_.keys; ++j)
      for (int64_t e = 0; e < a_.v_head; ++e) s.values[size_t(j * a_.v_head + e)] = float(load(src[base + j * rows + e * cols]));
  }

  // Each step over query row i's scores.
  void apply_steps(const std::vector<int64_t>& base, int64_t i, float* scores, int64_t keys) const {
    int operand = kAttnViewFirstStep;
    for (const ScoreStep& step : p_.steps) {
      if (!step_reads_operand(step.kind)) {
        apply_step_row(step.kind, step.value, scores, keys);
        continue;
      }
      const TensorView& view = a_.views[size_t(operand)];
      const int64_t row = base[size_t(operand)] + i * a_.row_stride[size_t(operand)], col = a_.col_stride[size_t(operand)];
      ++operand;
      if (step.kind == ScoreStepKind::kAdd) {
        const T* x = view.template host_data_as<T>() + row;
        if (col == 1 && std::is_same_v<T, float>) {
          add_row(scores, reinterpret_cast<const float*>(x), keys);
        } else if (col == 1) {
          for (int64_t j = 0; j < keys; ++j) scores[j] += float(load(x[j]));
        } else {
          for (int64_t j = 0; j < keys; ++j) scores[j] += float(load(x[j * col]));
        }
      } else {
        where_row(step.kind, step.value, scores, view.template host_data_as<uint8_t>() + row, col, keys);
      }
    }
  }

  // Query rows [first, end): their scores as one block product, the steps and a softmax
  // per row, the weighted sums as one block product, each output row stored once. Keys
  // from `limit` on are masked out of every row of the block (key_limit): they are left
  // out of both products, exactly (their probabilities are exact zeros).
  void query_block(Scratch& s, const std::vector<int64_t>& base, int64_t first, int64_t end) const {
    const int64_t rows = end - first;
    const T* q = data(kAttnViewQ);
    const int64_t q_row = a_.row_stride[kAttnViewQ], q_col = a_.col_stride[kAttnViewQ];
    for (int64_t r = 0; r < rows; ++r) {
      const T* in = q + base[kAttnViewQ] + (first + r) * q_row;
      float* row = s.query.data() + r * a_.head;
      if (std::is_same_v<T, float> && q_col == 1) std::memcpy(row, in, size_t(a_.head) * sizeof(float));
      else
        for (int64_t d = 0; d < a_.head; ++d) row[d] = float(load(in[d * q_col]));
    }
    const int64_t limit = key_limit(s, base, first, end);
    block_product(s.query.data(), s.keys.data(), a_.keys, nullptr, s.scores.data(), rows, a_.head, limit);
    for (int64_t r = 0; r < rows; ++r) {
      float* scores = s.scores.data() + r * limit;
      apply_steps(base, first + r, scores, limit);
      bool any_nan = false;
      const float max = row_max(scores, limit, &any_nan);
      s.invalid[size_t(r)] = limit > 0 && !softmax_row_defined(max, any_nan);
      if (s.invalid[size_t(r)] || limit == 0) {
        std::fill(scores, scores + limit, 0.0f);  // its sums are replaced below
        s.scale[size_t(r)] = 0.0f;
        continue;
      }
      shift_row(scores, max, limit);
      vector_math::exp_row(scores, scores, limit);
      s.scale[size_t(r)] = 1.0f / row_sum(scores, limit);
    }
    block_product(s.scores.data(), s.values.data(), a_.v_head, s.scale.data(), s.row.data(), rows, limit, a_.v_head);
    T* out = a_.views[kAttnViewOut].template host_data_as<T>();
    const float invalid_value = p_.zero_invalid_rows ? 0.0f : NAN;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = s.row.data() + r * a_.v_head;
      const int64_t at = base[kAttnViewOut] + (first + r) * a_.row_stride[kAttnViewOut];
      if constexpr (std::is_same_v<T, float>) {
        if (a_.col_stride[kAttnViewOut] == 1 && !s.invalid[size_t(r)]) {
          std::memcpy(out + at, row, size_t(a_.v_head) * sizeof(float));
          continue;
        }
      }
      for (int64_t e = 0; e < a_.v_head; ++e)
        out[at + e * a_.col_stride[kAttnViewOut]] = store<T>(s.invalid[size_t(r)] ? invalid_value : row[e]);
    }
  }

  // A mask that ends rows early (a causal one: query i sees keys 0..i) makes the keys past
  // every row's last visible one dead weight: half of a causal attention's products. The
  // score steps allow skipping them when there is one masking step (an additive mask, whose
  // -inf entries mask, or a Where whose fill is -inf), every other step a scale by a finite
  // nonzero constant, and those after the mask positive (so -inf stays -inf).
  struct MaskPlan {
    bool usable = false;
    int step = -1;              // the masking step's index in p_.steps
    float scale_bound = 1.0f;   // how much the scales before the mask may grow a score
  };
  static MaskPlan plan_mask(const FusedAttentionParams& p) {
    MaskPlan plan;
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const ScoreStep& step = p.steps[i];
      if (step_reads_operand(step.kind)) {
        if (plan.step >= 0) return MaskPlan{};
        if (step.kind != ScoreStepKind::kAdd && step.value != -INFINITY) return MaskPlan{};
        plan.step = int(i);
        continue;
      }
      if (!(std::isfinite(step.value) && step.value != 0.0f)) return MaskPlan{};
      if (plan.step >= 0 && step.value < 0.0f) return MaskPlan{};
      if (plan.step < 0) plan.scale_bound *= step.kind == ScoreStepKind::kMul ? std::fabs(step.value) : 1.0f / std::fabs(step.value);
    }
    plan.usable = plan.step >= 0 && std::is_same_v<T, float>;
    return plan;
  }

  // One past the last key any row in [first, end) sees, or a_.keys where nothing may be
  // skipped: no usable mask, a row that sees no key (its softmax is the caller's to decide
  // over every key), values that are not all finite (0 x inf is NaN, not 0), or, for an
  // additive mask, scores that may not be finite (+inf - inf is NaN, not -inf).
  int64_t key_limit(Scratch& s, const std::vector<int64_t>& base, int64_t first, int64_t end) const {
    if (!mask_.usable || !s.values_finite || a_.keys == 0) return a_.keys;
    const ScoreStep& step = p_.steps[size_t(mask_.step)];
    if (step.kind == ScoreStepKind::kAdd) {
      const float query_bound = largest_magnitude(s.query.data(), (end - first) * a_.head);
      if (!(double(query_bound) * s.keys_bound * double(a_.head) * mask_.scale_bound < 1e30)) return a_.keys;
    }
    const int operand = kAttnViewFirstStep;  // the only operand-reading step
    if (s.limits_base != base[size_t(operand)]) {
      s.mask_limits.assign(size_t((a_.q_len + kQueryBlock - 1) / kQueryBlock), -1);
      s.limits_base = base[size_t(operand)];
    }
    int64_t& limit = s.mask_limits[size_t(first / kQueryBlock)];
    if (limit < 0) limit = scan_mask(step, base[size_t(operand)], first, end);
    return limit;
  }

  // One past the last key the mask at `base` leaves visible to any row in [first, end);
  // a_.keys when a row sees none.
  int64_t scan_mask(const ScoreStep& step, int64_t base, int64_t first, int64_t end) const {
    const int operand = kAttnViewFirstStep;
    const int64_t col = a_.col_stride[size_t(operand)];
    int64_t limit = 0;
    for (int64_t i = first; i < end; ++i) {
      const int64_t row = base + i * a_.row_stride[size_t(operand)];
      int64_t j = a_.keys;
      if (step.kind == ScoreStepKind::kAdd) {
        const float* x = a_.views[size_t(operand)].template host_data_as<float>() + row;
        while (j > 0 && x[(j - 1) * col] == -INFINITY) --j;
      } else {
        const uint8_t* m = a_.views[size_t(operand)].template host_data_as<uint8_t>() + row;
        const bool masked_when = step.kind == ScoreStepKind::kFillWhere;  // kKeepWhere masks where false
        while (j > 0 && (m[(j - 1) * col] != 0) == masked_when) --j;
      }
      if (j == 0) return a_.keys;
      limit = std::max(limit, j);
    }
    return limit;
  }

  FusedAttentionParams p_;
  AttentionViews a_;
  int threads_;
  MaskPlan mask_;
  std::vector<Scratch> scratch_;  // one per thread the kernel may use
};

Result<std::unique_ptr<Kernel>> make_attention(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(FusedAttentionParams p, read_fused_attention(r.node));
  STRIDER_ASSIGN_OR_RETURN(AttentionViews views, attention_views(p, r));
  const DType dtype = r.inputs[kAttnQ].dtype;
  switch (dtype) {
    case DType::kF32: return std::unique_ptr<Kernel>(new AttentionKernel<float>(std::move(p), std::move(views)));
    case DType::kBF16: return std::unique_ptr<Kernel>(new AttentionKernel<bf16>(std::move(p), std::move(views)));
    case DType::kF16: return std::unique_ptr<Kernel>(new AttentionKernel<f16>(std::move(p), std::move(views)));
    default: return unsupported(fmt::format("FusedAttention on {}", dtype_name(dtype)));
  }
}

}  // namespace

void register_attention_kernels(std::vector<KernelEntry>& table) { table.push_back({kFusedAttentionOp, make_attention}); }

}  // namespace strider::cpu
