// FusedAttention on the CPU (ops/fused_attention.h). Per batch index, the keys and values
// are read once through their views (any strides: Kt a transposed view, a chunk of a fused
// projection) into packed f32 rows of the kernel's own; then per query row the scores are
// dot products over those rows, go through the score steps, a softmax, and the weighted
// sum of the value rows, all in f32, and the output row is stored once. The [Sq, T] scores
// are never written to memory. Batch positions and blocks of query rows are split over the
// session's threads (hal/cpu/parallel.h), each with its own packed rows.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hal/attention_views.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "hal/cpu/parallel.h"
#include "hal/cpu/vector_math.h"

namespace strider::cpu {
namespace {

// scores[j] = q . keys_t[:, j] as D passes of scores += q[d] * keys_t[d, :] over contiguous
// rows: they vectorize with no horizontal sum.
// Blocks of kKeyBlock keys keep their sums in registers across the D passes.
constexpr int64_t kKeyBlock = 32;
STRIDER_CPU_CLONES void scores_row(const float* q, const float* keys_t, float* scores, int64_t head, int64_t keys) {
  int64_t j0 = 0;
  for (; j0 + kKeyBlock <= keys; j0 += kKeyBlock) {
    float acc[kKeyBlock] = {};
    for (int64_t d = 0; d < head; ++d) {
      const float a = q[d];
      const float* k = keys_t + d * keys + j0;
      for (int64_t j = 0; j < kKeyBlock; ++j) acc[j] += a * k[j];
    }
    for (int64_t j = 0; j < kKeyBlock; ++j) scores[j0 + j] = acc[j];
  }
  for (int64_t j = j0; j < keys; ++j) scores[j] = 0.0f;
  for (int64_t d = 0; d < head; ++d)
    for (int64_t j = j0; j < keys; ++j) scores[j] += q[d] * keys_t[d * keys + j];
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
[[gnu::always_inline]] inline float row_sum(const float* p, int64_t keys) {
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

// row = sum_j p[j] * values[j, :] / sum_j p[j] for p = the exponentiated scores. Blocks of
// kValueBlock columns keep two sets of sums (even and odd keys) in registers across the
// keys, so consecutive multiply-adds do not wait on each other through memory.
constexpr int64_t kValueBlock = 32;
STRIDER_CPU_CLONES void weighted_sum_row(const float* p, const float* values, float* row, int64_t keys, int64_t width) {
  const float inverse = 1.0f / row_sum(p, keys);
  int64_t e0 = 0;
  for (; e0 + kValueBlock <= width; e0 += kValueBlock) {
    float even[kValueBlock] = {}, odd[kValueBlock] = {};
    int64_t j = 0;
    for (; j + 2 <= keys; j += 2) {
      const float a = p[j], b = p[j + 1];
      const float* v = values + j * width + e0;
      const float* w = v + width;
      for (int64_t e = 0; e < kValueBlock; ++e) {
        even[e] += a * v[e];
        odd[e] += b * w[e];
      }
    }
    if (j < keys)
      for (int64_t e = 0; e < kValueBlock; ++e) even[e] += p[j] * values[j * width + e0 + e];
    for (int64_t e = 0; e < kValueBlock; ++e) row[e0 + e] = (even[e] + odd[e]) * inverse;
  }
  if (e0 == width) return;
  for (int64_t e = e0; e < width; ++e) row[e] = 0.0f;
  for (int64_t j = 0; j < keys; ++j)
    for (int64_t e = e0; e < width; ++e) row[e] += p[j] * values[j * width + e];
  for (int64_t e = e0; e < width; ++e) row[e] *= inverse;
}

// A step that reads no operand over a row: one loop per kind, so each vectorizes.
void apply_step_row(ScoreStepKind kind, float value, float* scores, int64_t keys) {
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

// Queries per work item: items are (batch index, block of query rows), split over the
// threads; a thread packs a batch's keys and values once for its consecutive items.
constexpr int64_t kQueryBlock = 32;

template <typename T>
class AttentionKernel final : public Kernel {
  // One thread's scratch: the packed keys (Kt as [D, T]) and values ([T, Dv]) of the batch
  // index it last packed, and one query's scores, query and output rows.
  struct Scratch {
    std::vector<float> keys, values, scores, query, row;
    int64_t packed_keys = -1, packed_values = -1;  // offsets of the packed batch (-1: none)
  };

 public:
  AttentionKernel(FusedAttentionParams params, AttentionViews views)
      : p_(std::move(params)), a_(std::move(views)), threads_(max_parallel_threads()) {
    for (int t = 0; t < threads_; ++t)
      scratch_.push_back(Scratch{std::vector<float>(size_t(a_.keys * a_.head)), std::vector<float>(size_t(a_.keys * a_.v_head)),
                                 std::vector<float>(size_t(a_.keys)), std::vector<float>(size_t(a_.head)),
                                 std::vector<float>(size_t(a_.v_head))});
  }

  Status run(const QueueContext&) override {
    const int64_t count = num_elements(a_.batch);
    const int64_t blocks = (a_.q_len + kQueryBlock - 1) / kQueryBlock;
    const int64_t work = std::min(a_.q_len, kQueryBlock) * a_.keys * (a_.head + a_.v_head);
    for (Scratch& s : scratch_) s.packed_keys = s.packed_values = -1;  // the inputs changed since
    parallel_for(count * blocks, work, [&](int64_t begin, int64_t end, int thread) {
      Scratch& s = scratch_[size_t(thread)];
      for (int64_t item = begin; item < end; ++item) {
        const std::vector<int64_t> base = batch_base(item / blocks);
        if (base[kAttnViewKt] != s.packed_keys) pack_keys(s, s.packed_keys = base[kAttnViewKt]);
        if (base[kAttnViewV] != s.packed_values) pack_values(s, s.packed_values = base[kAttnViewV]);
        const int64_t first = (item % blocks) * kQueryBlock;
        for (int64_t i = first; i < std::min(a_.q_len, first + kQueryBlock); ++i) query_row(s, base, i);
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
    for (int64_t d = 0; d < a_.head; ++d)
      for (int64_t j = 0; j < a_.keys; ++j) s.keys[size_t(d * a_.keys + j)] = float(load(src[base + d * rows + j * cols]));
  }
  void pack_values(Scratch& s, int64_t base) const {
    const T* src = data(kAttnViewV);
    const int64_t rows = a_.row_stride[kAttnViewV], cols = a_.col_stride[kAttnViewV];
    for (int64_t j = 0; j < a_.keys; ++j)
      for (int64_t e = 0; e < a_.v_head; ++e) s.values[size_t(j * a_.v_head + e)] = float(load(src[base + j * rows + e * cols]));
  }

  // The scores of query row i against every key, then each step over the whole row.
  void scores_of(Scratch& s, const std::vector<int64_t>& base, int64_t i) const {
    float* scores = s.scores.data();
    scores_row(s.query.data(), s.keys.data(), scores, a_.head, a_.keys);
    int operand = kAttnViewFirstStep;
    for (const ScoreStep& step : p_.steps) {
      if (!step_reads_operand(step.kind)) {
        apply_step_row(step.kind, step.value, scores, a_.keys);
        continue;
      }
      const TensorView& view = a_.views[size_t(operand)];
      const int64_t row = base[size_t(operand)] + i * a_.row_stride[size_t(operand)], col = a_.col_stride[size_t(operand)];
      ++operand;
      if (step.kind == ScoreStepKind::kAdd) {
        const T* x = view.template host_data_as<T>() + row;
        if (col == 1) {
          for (int64_t j = 0; j < a_.keys; ++j) scores[j] += float(load(x[j]));
        } else {
          for (int64_t j = 0; j < a_.keys; ++j) scores[j] += float(load(x[j * col]));
        }
      } else {
        const uint8_t* x = view.template host_data_as<uint8_t>() + row;
        for (int64_t j = 0; j < a_.keys; ++j)
          scores[j] = apply_score_step(step.kind, step.value, scores[j], x[j * col] != 0 ? 1.0f : 0.0f);
      }
    }
  }

  void query_row(Scratch& s, const std::vector<int64_t>& base, int64_t i) const {
    const T* q = data(kAttnViewQ);
    for (int64_t d = 0; d < a_.head; ++d)
      s.query[size_t(d)] = float(load(q[base[kAttnViewQ] + i * a_.row_stride[kAttnViewQ] + d * a_.col_stride[kAttnViewQ]]));
    scores_of(s, base, i);
    bool any_nan = false;
    const float max = row_max(s.scores.data(), a_.keys, &any_nan);
    std::fill(s.row.begin(), s.row.end(), 0.0f);
    if (a_.keys > 0 && !softmax_row_defined(max, any_nan)) {
      std::fill(s.row.begin(), s.row.end(), p_.zero_invalid_rows ? 0.0f : NAN);
    } else if (a_.keys > 0) {
      for (float& v : s.scores) v -= max;
      vector_math::exp_row(s.scores.data(), s.scores.data(), a_.keys);
      weighted_sum_row(s.scores.data(), s.values.data(), s.row.data(), a_.keys, a_.v_head);
    }
    T* out = a_.views[kAttnViewOut].template host_data_as<T>();
    for (int64_t e = 0; e < a_.v_head; ++e)
      out[base[kAttnViewOut] + i * a_.row_stride[kAttnViewOut] + e * a_.col_stride[kAttnViewOut]] =
          store<T>(s.row[size_t(e)]);
  }

  FusedAttentionParams p_;
  AttentionViews a_;
  int threads_;
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
