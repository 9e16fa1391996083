// s / d without a division instruction where d is the same for many s: with r = 1 / d
// (correctly rounded) computed once, Markstein's correction q + (s - q d) r, its residual
// exact by an FMA, is the correctly rounded quotient (P. Markstein, "Computation of
// elementary functions on the IBM RISC System/6000 processor", 1990), provided nothing
// overflows or underflows: |d| in [2^-24, 2^24] (checked once, divisor_has_reciprocal)
// and |s| in [2^-100, 2^100] (checked per s; other s, zeros, infinities and NaN divide).
// On the GPU an IEEE division is a reciprocal, its refinement and a range check a call
// (about 10 instructions and a branch to a slow path); this is 2 FMAs and a multiply.
// Header-only; nvcc compiles it for the GPU too.
#pragma once

#include <cmath>

#include "base/host_device.h"

namespace strider {

STRIDER_HOST_DEVICE bool divisor_has_reciprocal(float d) {
  const float magnitude = d < 0 ? -d : d;
  return magnitude >= 0x1p-24f && magnitude <= 0x1p24f;
}

// s / d, given reciprocal = 1 / d for a d with divisor_has_reciprocal(d).
STRIDER_HOST_DEVICE float divide_by_reciprocal(float s, float d, float reciprocal) {
  const float magnitude = s < 0 ? -s : s;
  if (!(magnitude >= 0x1p-100f && magnitude <= 0x1p100f)) return s / d;
  const float q = s * reciprocal;
  return fmaf(fmaf(-q, d, s), reciprocal, q);
}

}  // namespace strider
