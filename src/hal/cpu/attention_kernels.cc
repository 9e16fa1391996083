// FusedAttention on the CPU (ops/fused_attention.h). Per batch index, the keys and values
// are read once through their views (any strides: Kt a transposed view, a chunk of a fused
// projection) into packed f32 rows of the kernel's own; then per query row the scores are
// dot products over those rows, go through the score steps, a softmax, and the weighted
// sum of the value rows, all in f32, and the output row is stored once. The [Sq, T] scores
// are never written to memory. Single-threaded, like the other strider CPU kernels.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hal/attention_views.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"

namespace strider::cpu {
namespace {

// Eight partial sums, so the loop vectorizes without reassociating a single sum.
float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[d + k] * b[d + k];
  float tail = 0;
  for (; d < n; ++d) tail += a[d] * b[d];
  return tail + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

template <typename T>
class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(FusedAttentionParams params, AttentionViews views)
      : p_(std::move(params)), a_(std::move(views)), keys_(size_t(a_.keys * a_.head)),
        values_(size_t(a_.keys * a_.v_head)), scores_(size_t(a_.keys)), query_(size_t(a_.head)),
        row_(size_t(a_.v_head)) {}

  Status run(const QueueContext&) override {
    const int64_t count = num_elements(a_.batch);
    std::vector<int64_t> index(a_.batch.size(), 0), base(size_t(a_.operands()), 0);
    int64_t packed_keys = -1, packed_values = -1;  // offsets of the packed batch (-1: none yet)
    for (int64_t b = 0; b < count; ++b) {
      if (base[kAttnViewKt] != packed_keys) pack_keys(packed_keys = base[kAttnViewKt]);
      if (base[kAttnViewV] != packed_values) pack_values(packed_values = base[kAttnViewV]);
      for (int64_t i = 0; i < a_.q_len; ++i) query_row(base, i);
      next_batch(index, base);
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:attention " + describe_fused_attention(p_); }

 private:
  const T* data(int k) const { return a_.views[size_t(k)].template host_data_as<T>(); }

  void next_batch(std::vector<int64_t>& index, std::vector<int64_t>& base) const {
    for (size_t d = a_.batch.size(); d-- > 0;) {
      for (size_t k = 0; k < base.size(); ++k) base[k] += a_.batch_strides[k][d];
      if (++index[d] < a_.batch[d]) return;
      for (size_t k = 0; k < base.size(); ++k) base[k] -= a_.batch_strides[k][d] * a_.batch[d];
      index[d] = 0;
    }
  }

  // packed[j * width + c] = operand element (j, c) at `base`: one f32 row per key.
  void pack(int operand, int64_t base, int64_t key_stride, int64_t stride, int64_t width, std::vector<float>& packed) {
    const T* src = data(operand);
    for (int64_t j = 0; j < a_.keys; ++j)
      for (int64_t c = 0; c < width; ++c)
        packed[size_t(j * width + c)] = float(load(src[base + j * key_stride + c * stride]));
  }
  // keys_[j * D + d] = Kt[d, j]; values_[j * Dv + e] = V[j, e].
  void pack_keys(int64_t base) {
    pack(kAttnViewKt, base, a_.col_stride[kAttnViewKt], a_.row_stride[kAttnViewKt], a_.head, keys_);
  }
  void pack_values(int64_t base) {
    pack(kAttnViewV, base, a_.row_stride[kAttnViewV], a_.col_stride[kAttnViewV], a_.v_head, values_);
  }

  float step_operand(size_t step, int operand, const std::vector<int64_t>& base, int64_t i, int64_t j) const {
    const TensorView& view = a_.views[size_t(operand)];
    const int64_t at = base[size_t(operand)] + i * a_.row_stride[size_t(operand)] + j * a_.col_stride[size_t(operand)];
    if (p_.steps[step].kind == ScoreStepKind::kAdd) return float(load(view.template host_data_as<T>()[at]));
    return view.template host_data_as<uint8_t>()[at] != 0 ? 1.0f : 0.0f;
  }

  // The scores of query row i against every key, through the steps; true if one is NaN.
  bool scores_of(const std::vector<int64_t>& base, int64_t i) {
    bool any_nan = false;
    for (int64_t j = 0; j < a_.keys; ++j) {
      float s = dot(query_.data(), &keys_[size_t(j * a_.head)], a_.head);
      int operand = kAttnViewFirstStep;
      for (size_t k = 0; k < p_.steps.size(); ++k) {
        const ScoreStepKind kind = p_.steps[k].kind;
        const float x = step_reads_operand(kind) ? step_operand(k, operand++, base, i, j) : 0.0f;
        s = apply_score_step(kind, p_.steps[k].value, s, x);
      }
      any_nan |= std::isnan(s);
      scores_[size_t(j)] = s;
    }
    return any_nan;
  }

  void query_row(const std::vector<int64_t>& base, int64_t i) {
    const T* q = data(kAttnViewQ);
    for (int64_t d = 0; d < a_.head; ++d)
      query_[size_t(d)] = float(load(q[base[kAttnViewQ] + i * a_.row_stride[kAttnViewQ] + d * a_.col_stride[kAttnViewQ]]));
    const bool any_nan = scores_of(base, i);
    float max = -INFINITY;
    for (int64_t j = 0; j < a_.keys; ++j) max = std::max(max, scores_[size_t(j)]);
    std::fill(row_.begin(), row_.end(), 0.0f);
    if (a_.keys > 0 && !softmax_row_defined(max, any_nan)) {
      std::fill(row_.begin(), row_.end(), p_.zero_invalid_rows ? 0.0f : NAN);
    } else if (a_.keys > 0) {
      float sum = 0;
      for (int64_t j = 0; j < a_.keys; ++j) {
        const float e = std::exp(scores_[size_t(j)] - max);
        sum += e;
        const float* v = &values_[size_t(j * a_.v_head)];
        for (int64_t c = 0; c < a_.v_head; ++c) row_[size_t(c)] += e * v[c];
      }
      for (float& r : row_) r /= sum;
    }
    T* out = a_.views[kAttnViewOut].template host_data_as<T>();
    for (int64_t e = 0; e < a_.v_head; ++e)
      out[base[kAttnViewOut] + i * a_.row_stride[kAttnViewOut] + e * a_.col_stride[kAttnViewOut]] =
          store<T>(row_[size_t(e)]);
  }

  FusedAttentionParams p_;
  AttentionViews a_;
  std::vector<float> keys_, values_, scores_, query_, row_;
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
