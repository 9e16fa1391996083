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

// Grouped-query heads (kv_repeat = r > 1): the heads dim (dim -3) of H = G r heads splits
// into (G, r), stride s into r s and s, in Q, the output and the step operands; Kt and V,
// with G heads, gain the r dim with stride 0, so each key head is read in place by its r
// query heads (head h = g r + j reads key head g). A heads dim of 1 (broadcast) becomes
// (1, 1); views of rank 2 have no heads dim and broadcast as they are.
bool grouped(TensorView& view, int64_t r, bool keys) {
  if (view.rank() < 3) return true;
  const size_t d = size_t(view.rank() - 3);
  const int64_t size = view.sizes[d], stride = view.strides[d];
  int64_t inner_size = r, inner_stride = 0;
  if (!keys) {
    if (size == 1) {
      inner_size = 1;
    } else {
      if (size % r != 0) return false;
      view.sizes[d] = size / r;
      view.strides[d] = stride * r;
      inner_stride = stride;
    }
  }
  view.sizes.insert(view.sizes.begin() + int64_t(d) + 1, inner_size);
  view.strides.insert(view.strides.begin() + int64_t(d) + 1, inner_stride);
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
  a.views = {q, kt, v, out};
  for (int k = 0; k < params.step_inputs(); ++k) a.views.push_back(r.inputs[size_t(kAttnFirstStepInput + k)]);
  if (params.kv_repeat > 1)
    for (int k = 0; k < a.operands(); ++k)
      if (!grouped(a.views[size_t(k)], params.kv_repeat, k == kAttnViewKt || k == kAttnViewV))
        return invalid_argument(fmt::format("FusedAttention operand {} {}: heads not in groups of {}", k,
                                            shape_to_string(a.views[size_t(k)].sizes), params.kv_repeat));
  const TensorView& shaped_out = a.views[kAttnViewOut];
  a.batch.assign(shaped_out.sizes.begin(), shaped_out.sizes.end() - 2);
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
