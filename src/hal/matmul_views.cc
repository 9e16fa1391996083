#include "hal/matmul_views.h"

#include <algorithm>
#include <array>

namespace strider {

TensorView insert_unit_dim(const TensorView& v, size_t at) {
  TensorView r = v;
  int64_t stride = at < v.strides.size() ? v.strides[at] * std::max<int64_t>(v.sizes[at], 1) : 1;
  r.sizes.insert(r.sizes.begin() + long(at), 1);
  r.strides.insert(r.strides.begin() + long(at), stride);
  return r;
}

MatMulViews align_matmul(const TensorView& a_in, const TensorView& b_in, const TensorView& out_in) {
  MatMulViews v{a_in, b_in, out_in};
  if (v.a.rank() == 1) {
    v.a = insert_unit_dim(v.a, 0);
    v.out = insert_unit_dim(v.out, size_t(v.out.rank()) - (b_in.rank() == 1 ? 0 : 1));
  }
  if (v.b.rank() == 1) {
    v.b = insert_unit_dim(v.b, 1);
    v.out = insert_unit_dim(v.out, size_t(v.out.rank()));
  }
  while (v.a.rank() < v.out.rank()) v.a = insert_unit_dim(v.a, 0);
  while (v.b.rank() < v.out.rank()) v.b = insert_unit_dim(v.b, 0);
  return v;
}

namespace {

bool is_pointwise(int64_t group, const WindowGeometry& g) {
  if (group != 1) return false;
  for (size_t d = 0; d < g.kernel.size(); ++d)
    if (g.kernel[d] != 1 || g.strides[d] != 1 || g.pads_begin[d] != 0 || g.pads_end[d] != 0) return false;
  return true;
}

std::optional<PointwiseMatMul> channels_last(const TensorView& x, const TensorView& w, const TensorView* bias,
                                             const TensorView& y) {
  std::vector<int64_t> order = {0};
  for (int64_t d = 2; d < x.rank(); ++d) order.push_back(d);
  order.push_back(1);
  auto as_rows = [&](const TensorView& v) -> std::optional<TensorView> {
    auto permuted = permute_view(v, order);
    if (!permuted.is_ok()) return std::nullopt;
    int64_t channels = std::max<int64_t>(v.sizes[1], 1);
    return reshape_view(*permuted, std::array<int64_t, 2>{v.num_elements() / channels, v.sizes[1]});
  };
  std::optional<TensorView> rows_x = as_rows(x), rows_y = as_rows(y);
  if (!rows_x || !rows_y || rows_x->strides[1] != 1 || rows_y->strides[1] != 1) return std::nullopt;
  TensorView weights = w;  // [out, in, 1, ...] as [in, out]
  weights.sizes = {w.sizes[1], w.sizes[0]};
  weights.strides = {w.strides[1], w.strides[0]};
  PointwiseMatMul m{{*rows_x, weights, *rows_y}, {}, true};
  if (bias) m.bias = insert_unit_dim(*bias, 0);
  return m;
}

std::optional<PointwiseMatMul> channels_first(const TensorView& x, const TensorView& w, const TensorView* bias,
                                              const TensorView& y) {
  int64_t positions = num_elements(std::span(x.sizes).subspan(2));
  auto as_batches = [&](const TensorView& v) {
    return reshape_view(v, std::array<int64_t, 3>{v.sizes[0], v.sizes[1], positions});
  };
  std::optional<TensorView> batches_x = as_batches(x), batches_y = as_batches(y);
  if (!batches_x || !batches_y) return std::nullopt;
  TensorView weights = w;  // [out, in, 1, ...] as [1, out, in]
  weights.sizes = {1, w.sizes[0], w.sizes[1]};
  weights.strides = {w.strides[0] * w.sizes[0], w.strides[0], w.strides[1]};
  PointwiseMatMul m{{weights, *batches_x, *batches_y}, {}, false};
  if (bias) m.bias = insert_unit_dim(insert_unit_dim(*bias, 0), 2);
  return m;
}

}  // namespace

std::vector<PointwiseMatMul> pointwise_conv_as_matmul(const TensorView& x, const TensorView& w, const TensorView* bias,
                                                      const TensorView& y, int64_t group, const WindowGeometry& window) {
  std::vector<PointwiseMatMul> forms;
  if (!is_pointwise(group, window)) return forms;
  if (auto m = channels_last(x, w, bias, y)) forms.push_back(std::move(*m));
  if (auto m = channels_first(x, w, bias, y)) forms.push_back(std::move(*m));
  return forms;
}

Result<GemmViews> gemm_views(const AttributeMap& attributes, const TensorView& a, const TensorView& b,
                             const TensorView& out) {
  STRIDER_ASSIGN_OR_RETURN(int64_t trans_a, attributes.get_int("transA", 0));
  STRIDER_ASSIGN_OR_RETURN(int64_t trans_b, attributes.get_int("transB", 0));
  GemmViews g{{a, b, out}};
  STRIDER_ASSIGN_OR_RETURN(g.alpha, attributes.get_float("alpha", 1.0f));
  STRIDER_ASSIGN_OR_RETURN(g.beta, attributes.get_float("beta", 1.0f));
  static constexpr int64_t kSwap[] = {1, 0};
  if (trans_a) {
    STRIDER_ASSIGN_OR_RETURN(g.views.a, permute_view(a, kSwap));
  }
  if (trans_b) {
    STRIDER_ASSIGN_OR_RETURN(g.views.b, permute_view(b, kSwap));
  }
  return g;
}

}  // namespace strider
