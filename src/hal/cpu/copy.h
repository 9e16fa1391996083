// Strided copies: the one primitive behind every data-movement op on the CPU (Split,
// Slice, Concat, Transpose, Expand, Reshape of a view, Gather) and Materialize.
#pragma once

#include "memory/tensor_view.h"

namespace strider::cpu {

// Copies every element of `src` into the same position of `dst`: equal sizes and dtypes,
// any strides on both sides (`src` may broadcast with stride 0). `dst` must not overlap
// `src` unless they are the same view.
void copy_view(const TensorView& dst, const TensorView& src);

// The same on raw host pointers: `sizes` with element strides for each side.
void copy_strided(std::span<const int64_t> sizes, std::byte* dst, const int64_t* dst_strides,
                  const std::byte* src, const int64_t* src_strides, int64_t element_size);

}  // namespace strider::cpu
