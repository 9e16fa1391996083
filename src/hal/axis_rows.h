// The rows of views along an axis, for the kernels that walk one axis per row (ArgMax,
// ArgMin, CumSum, TopK) on every device: every index of the other dims, with each view's
// strides there. A view whose rank is one less than the first's has no axis dim (ArgMax's
// output without keepdims): all of its dims are row dims. Header-only: nvcc compiles it too.
#pragma once

#include <initializer_list>
#include <vector>

#include "memory/tensor_view.h"

namespace strider {

struct AxisRows {
  Shape sizes;                   // the first view's sizes without the axis
  std::vector<Strides> strides;  // per view, in the order given
};

inline AxisRows axis_rows(int64_t axis, std::initializer_list<const TensorView*> views) {
  AxisRows rows;
  const int64_t rank = (*views.begin())->rank();
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) rows.sizes.push_back((*views.begin())->sizes[size_t(d)]);
  for (const TensorView* v : views) {
    Strides s;
    for (int64_t d = 0; d < v->rank(); ++d)
      if (v->rank() < rank || d != axis) s.push_back(v->strides[size_t(d)]);
    rows.strides.push_back(std::move(s));
  }
  return rows;
}

}  // namespace strider
