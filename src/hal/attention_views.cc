#include "hal/attention_views.h"

#include <fmt/format.h>

namespace strider {
namespace {

// `view`'s strides over `target` (its sizes right-aligned to target's): 0 along a dim the
// view lacks or has of size 1 where the target is larger. False if it does not broadcast.
bool strides_over(const TensorView& view, const Shape& target, Strides* out) {
  const size_t rank = target.size(), own = size_t(view.rank());
  if (own > rank) return false;
  out->assign(rank, 0);
  for (size_t k = 0; k < own; ++k) {
    const size_t d = rank - own + k;
    const int64_t size = view.sizes[k];
    if (size == target[d]) (*out)[d] = size == 1 ? 0 : view.strides[k];
    else if (size != 1) return false;
  }
  return true;
}

}  // namespace

Result<AttentionViews> attention_views(const FusedAttentionParams& params, const KernelRequest& r) {
  AttentionViews a;
  const TensorView &q = r.inputs[kAttnQ], &kt = r.inputs[kAttnKt], &v = r.inputs[kAttnV], &out = r.outputs[0];
  if (q.rank() < 2 || kt.rank() < 2 || v.rank() < 2 || out.rank() < 2)
    return invalid_argument("FusedAttention operands need rank 2 or more");
  a.q_len = q.sizes[size_t(q.rank() - 2)];
  a.head = q.sizes.back();
  a.keys = kt.sizes.back();
  a.v_head = v.sizes.back();
  a.batch.assign(out.sizes.begin(), out.sizes.end() - 2);
  a.views = {q, kt, v, out};
  for (int k = 0; k < params.step_inputs(); ++k) a.views.push_back(r.inputs[size_t(kAttnFirstStepInput + k)]);
  // The matrix shape each operand has: Q [Sq, D], Kt [D, T], V [T, Dv], out [Sq, Dv], steps [Sq, T].
  const int64_t matrix[4][2] = {{a.q_len, a.head}, {a.head, a.keys}, {a.keys, a.v_head}, {a.q_len, a.v_head}};
  for (int k = 0; k < a.operands(); ++k) {
    Shape target = a.batch;
    target.push_back(k < kAttnViewFirstStep ? matrix[k][0] : a.q_len);
    target.push_back(k < kAttnViewFirstStep ? matrix[k][1] : a.keys);
    Strides s;
    if (!strides_over(a.views[size_t(k)], target, &s) || (k == kAttnViewOut && a.views[size_t(k)].sizes != target))
      return invalid_argument(fmt::format("FusedAttention operand {} {} does not fit {}", k,
                                          shape_to_string(a.views[size_t(k)].sizes), shape_to_string(target)));
    a.row_stride.push_back(s[s.size() - 2]);
    a.col_stride.push_back(s.back());
    s.resize(s.size() - 2);
    a.batch_strides.push_back(std::move(s));
  }
  return a;
}

}  // namespace strider
