// The scalar meaning of the scatters' `reduction` (ops/scatter.h resolves it from a node):
// the one combine rule of every device's kernels (the float64 reference writes its own).
// Compiled by nvcc and the host compiler (no fmt, no registry).
#pragma once

#include <cstdint>

#include "base/host_device.h"
#include "base/wrapping_math.h"

namespace strider {

enum class ScatterReduction : int { kNone, kAdd, kMul, kMax, kMin };

struct ScatterParams {
  ScatterReduction reduction = ScatterReduction::kNone;
  int64_t axis = 0;  // ScatterElements only, normalized
};

struct GatherNDParams {
  int64_t batch_dims = 0;
  int64_t k = 0;  // indices.shape[-1]
};

// The element a scatter leaves: `old` combined with `update`. T is the compute type (float
// for bf16/f16); integer add and mul wrap (base/wrapping_math.h) like the reference.
template <typename T>
STRIDER_HOST_DEVICE T scatter_combine(ScatterReduction r, T old, T update) {
  switch (r) {
    case ScatterReduction::kAdd: return wrapping_add(old, update);
    case ScatterReduction::kMul: return wrapping_mul(old, update);
    case ScatterReduction::kMax: return update > old ? update : old;
    case ScatterReduction::kMin: return update < old ? update : old;
    default: return update;
  }
}

}  // namespace strider
