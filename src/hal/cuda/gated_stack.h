// FusedGatedStack on the GPU (ops/gated_stack.h): one kernel runs every unit of the stack.
//
// A block takes a tile of pixels ("columns": image and spatial position), loads their C
// channels of X into shared memory as f32, and runs each unit over them there: thread
// (k, g) accumulates channel k's two gate rows a_k, b_k for its Q neighbouring columns of
// group g, reading row j of the unit's weights stored k-major (W^T [C][2C], so a warp's
// lanes read neighbouring weights) and h[j][its Q columns] as vectors from shared memory;
// after a barrier it replaces h[k] of its columns by h + tanh(a) * sigmoid(b)
// (ops/gated_stack_math.h). The last unit's h is stored to Y. Only X is read and only Y
// written; the units' 2C channels and the stack's intermediate values never leave the
// block. Accumulation is f32 FMAs for every storage dtype (f32, bf16, f16).
//
// The weights are staged in shared memory a unit at a time by asynchronous copies
// (cp.async), the next unit's during this unit's work where two buffers fit. Why: the
// first version read them from global memory inside the loop, so every block waited on
// L2 for each group of weight rows: 4 us a unit on an H100, 81 us for the 20-unit chain
// at batch 1 (session 36), where the FMAs take well under 1 us a unit.
//
// Contract: x and y are any strided views of [N, C, spatial...] (up to 3 spatial axes:
// channels-first slices, channels-last, offsets); C <= kGatedStackMaxChannels. The
// weights are device memory the kernel object owns (gated_stack_kernels.cc), f32, per
// unit W^T [C][2C] then B [2C]. Q (columns a thread carries) is chosen so that the
// launch fills the GPU: 1 at batch 1 of a short sequence, up to 8.
//
// This header is compiled by nvcc and by the host compiler (no fmt).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "strider/dtype.h"
#include "strider/status.h"

namespace strider::cuda {

inline constexpr int kGatedStackMaxChannels = 128;

struct GatedStackArgs {
  const void* x = nullptr;
  void* y = nullptr;
  const float* weights = nullptr;  // per unit: W^T [C][2C], then B [2C]
  int32_t units = 0, c = 0;
  int32_t groups = 0;              // column groups a block runs: blockDim / C, rounded down
  int32_t q = 1;                   // columns a thread carries (set by prepare)
  int32_t weight_buffers = 2;      // 2: the next unit's weights are copied during this unit (set by prepare)
  int64_t columns = 0;             // N x pixels
  int32_t spatial_rank = 0;        // 1..3
  int64_t spatial[3] = {1, 1, 1};  // sizes of the spatial axes
  int64_t x_spatial[3] = {}, y_spatial[3] = {};  // their element strides
  int64_t x_image = 0, y_image = 0, x_channel = 0, y_channel = 0;
};

// Floats of one unit's weights and bias (W^T [C][2C], B [2C]): a multiple of 4, as
// C (C + 1) is even, so every unit starts 16-byte aligned for the kernel's vector copies.
__host__ __device__ constexpr int64_t gated_stack_unit_floats(int64_t c) { return 2 * c * c + 2 * c; }

// h's row stride in shared memory for a tile of `columns`: padded so that the channels a
// warp updates fall in different banks, and a multiple of 4 where Q-column vectors are read.
__host__ __device__ constexpr int gated_stack_row_stride(int columns, int q) {
  return q % 4 == 0 ? columns + 4 : columns + 1;
}

// The kernel's dynamic shared memory: the tile's x and y offsets, the weight buffers, h.
__host__ __device__ constexpr size_t gated_stack_shared_bytes(const GatedStackArgs& a) {
  const int columns = a.groups * a.q;
  return size_t(columns) * 2 * sizeof(int64_t) + size_t(a.weight_buffers) * gated_stack_unit_floats(a.c) * sizeof(float) +
         size_t(a.c) * gated_stack_row_stride(columns, a.q) * sizeof(float);
}

struct GatedStackLaunch {
  using Launcher = cudaError_t (*)(const GatedStackArgs&, cudaStream_t);
  Launcher launcher = nullptr;
  GatedStackArgs args;
  int32_t blocks = 0;
};

// Picks the instantiation for `dtype` (f32, bf16, f16), Q for a GPU of `sms`
// multiprocessors and the weight buffers that fit `shared_limit` bytes of shared memory a
// block (the device's opt-in limit), and lets the kernel use them; args other than q and
// weight_buffers must be set. Call where the kernel is created, not during a graph capture.
// UNSUPPORTED for another dtype or C.
Status prepare_gated_stack(DType dtype, int sms, size_t shared_limit, GatedStackLaunch* launch);
Status run_gated_stack(const GatedStackLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
