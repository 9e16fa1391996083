// Collapsing an index space shared by several strided operands: size-1 dims are dropped
// and adjacent dims that are contiguous for every operand are merged, so a dense tensor
// becomes one dim and a channel slice of a concat two or three. Kernels then index fewer
// dims; the elements visited, and their order, are unchanged.
#pragma once

#include <span>
#include <vector>

#include "base/shape.h"

namespace strider {

struct CollapsedDims {
  Shape sizes;                       // outermost first; empty for a single element
  std::vector<Strides> strides;      // per operand, one per collapsed dim (elements)
};

// `operand_strides[k]` are operand k's element strides over `sizes`.
CollapsedDims collapse_dims(std::span<const int64_t> sizes, const std::vector<Strides>& operand_strides);

}  // namespace strider
