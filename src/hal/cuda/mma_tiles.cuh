// Shared-memory tiles and tensor-core fragments for the register-tiled attention
// (mma_attention.cu): mma.sync m16n8k16, B fragments through ldmatrix, and the block's tile
// loads from strided views. nvcc only.
//
// Tiles are row-major with rows padded by 8 elements (16 bytes): the eight 16-byte rows an
// ldmatrix reads, or the eight rows of a fragment at 4-byte lane offsets, then fall in 32
// distinct banks, and 16-byte stores stay aligned.
//
// A tile load's geometry is fixed at compile time (rows, columns, threads), so a thread's
// chunks and their shared offsets are constants; with the indices computed at run time (the
// chunk count a run-time value, integer divisions per chunk) the loads of K, V and the score
// operands were ~1,600 of a warp's ~3,000 instructions a key tile on BERT (ncu, H100).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "hal/cuda/launch.h"

namespace strider::cuda::mma {

// D (+)= A B for one m16n8k16 fragment: A row-major 16 x 16, B column-major 16 x 8, f32 D.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8 x 8 matrices of 16-bit elements from shared memory, lane l giving the address of
// row l % 8 of matrix l / 8. Plain: lane (g, t) = (l / 4, l % 4) receives row g, columns 2t
// and 2t + 1 of each matrix; transposed: rows 2t and 2t + 1 of column g.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  const unsigned at = unsigned(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}
__device__ __forceinline__ void ldmatrix_x4_transposed(uint32_t (&r)[4], const void* row) {
  const unsigned at = unsigned(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}

// Two adjacent elements of a shared tile (at an even index) as one register.
template <typename T>
__device__ __forceinline__ uint32_t pair_at(const T* tile, int index) {
  return *reinterpret_cast<const uint32_t*>(tile + index);
}

// lo and hi rounded to T, lo in the low half (the lower column of an A fragment's pair).
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// Whether an operand's rows are whole 16-byte chunks of `Element`s from its first column:
// innermost stride 1, the row stride, the offset and the columns read
// multiples of a chunk, the data aligned to one.
template <typename Element, int kChunk = 16 / int(sizeof(Element))>
__device__ __forceinline__ bool rows_in_chunks(const void* data, int64_t base, int64_t row, int64_t col, int64_t cols) {
  return col == 1 && row % kChunk == 0 && base % kChunk == 0 && cols % kChunk == 0 &&
         reinterpret_cast<uintptr_t>(data) % (kChunk * sizeof(Element)) == 0;
}

// tile[r * ld + c] = element (r0 + r, c) of a (rows x cols) operand at base + r * row +
// c * col, zero outside it, for r < kRows and c < kCols; the block's kThreads threads load.
// With `chunks` (rows_in_chunks) each thread moves its 16-byte chunks, every load of them in
// flight before the first store.
template <typename T, int kRows, int kCols, int kThreads>
__device__ __forceinline__ void load_tile(T* tile, int ld, const void* data, int64_t base, int64_t row, int64_t col,
                                          int64_t r0, int64_t rows, int64_t cols, bool chunks) {
  const T* src = static_cast<const T*>(data);
  const int thread = int(threadIdx.x);
  if (chunks) {
    constexpr int kChunks = kCols / 8, kEach = kRows * kChunks / kThreads;
    static_assert(kCols % 8 == 0 && kRows * kChunks % kThreads == 0);
    uint4 bits[kEach];
#pragma unroll
    for (int k = 0; k < kEach; ++k) {
      const int at = thread + k * kThreads, r = at / kChunks, c = at % kChunks * 8;
      bits[k] = make_uint4(0, 0, 0, 0);
      if (r0 + r < rows && c < cols) bits[k] = *reinterpret_cast<const uint4*>(src + base + (r0 + r) * row + c);
    }
#pragma unroll
    for (int k = 0; k < kEach; ++k) {
      const int at = thread + k * kThreads, r = at / kChunks, c = at % kChunks * 8;
      *reinterpret_cast<uint4*>(tile + r * ld + c) = bits[k];
    }
    return;
  }
  for (int at = thread; at < kRows * kCols; at += kThreads) {
    const int r = at / kCols, c = at % kCols;
    const bool inside = r0 + r < rows && c < cols;
    tile[r * ld + c] = inside ? src[base + (r0 + r) * row + c * col] : T(0.0f);
  }
}

// Eight bools (bytes, nonzero true) as eight T of 0 or 1 in one 16-byte chunk.
template <typename T>
__device__ __forceinline__ uint4 bools_as(uint2 bytes) {
  const uint32_t one = std::is_same_v<T, __nv_bfloat16> ? 0x3f80u : 0x3c00u;
  uint32_t out[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t word = k < 2 ? bytes.x : bytes.y, shift = 16 * (k % 2);
    const uint32_t lo = (word >> shift) & 0xffu, hi = (word >> (shift + 8)) & 0xffu;
    out[k] = (lo ? one : 0u) | ((hi ? one : 0u) << 16);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// A score step's operand (T for an additive one, bool for a condition) staged as T: tile[r *
// ld + c] = element (r0 + r, c0 + c), zero outside (rows x cols), for r < kRows (or the one
// row r = 0 with `one_row`), c < kCols. In chunks of 8 columns where rows_in_chunks holds for
// 8 elements of Source.
template <typename T, typename Source, int kRows, int kCols, int kThreads>
__device__ __forceinline__ void stage_operand(T* tile, int ld, const void* data, int64_t base, int64_t row, int64_t col,
                                              int64_t r0, int64_t rows, int64_t c0, int64_t cols, bool one_row) {
  const int thread = int(threadIdx.x), tile_rows = one_row ? 1 : kRows;
  const bool chunks = c0 % 8 == 0 && rows_in_chunks<Source, 8>(data, base, row, col, cols);
  if (chunks) {
    constexpr int kChunks = kCols / 8, kEach = (kRows * kChunks + kThreads - 1) / kThreads;
    uint4 bits[kEach];
#pragma unroll
    for (int k = 0; k < kEach; ++k) {
      const int at = thread + k * kThreads, r = at / kChunks, c = at % kChunks * 8;
      bits[k] = make_uint4(0, 0, 0, 0);
      if (r >= tile_rows || r0 + r >= rows || c0 + c >= cols) continue;
      const int64_t e = base + (r0 + r) * row + c0 + c;
      if constexpr (std::is_same_v<Source, bool>)
        bits[k] = bools_as<T>(*reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(data) + e));
      else
        bits[k] = *reinterpret_cast<const uint4*>(static_cast<const T*>(data) + e);
    }
#pragma unroll
    for (int k = 0; k < kEach; ++k) {
      const int at = thread + k * kThreads, r = at / kChunks, c = at % kChunks * 8;
      if (r < tile_rows) *reinterpret_cast<uint4*>(tile + r * ld + c) = bits[k];
    }
    return;
  }
  for (int at = thread; at < tile_rows * kCols; at += kThreads) {
    const int r = at / kCols, c = at % kCols;
    float x = 0;
    if (r0 + r < rows && c0 + c < cols) x = float(device::load<Source>(data, base + (r0 + r) * row + (c0 + c) * col));
    tile[r * ld + c] = T(x);
  }
}

}  // namespace strider::cuda::mma
