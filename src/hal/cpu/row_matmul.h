// One row times a constant matrix on the CPU (a matrix-vector product): a classifier's
// Gemm at batch 1, a decoder's projections one token at a time.
//
// Why: oneDNN 2.6's brgemm ran MobileNetV2's classifier (1 x 1280 by 1280 x 1000, f32,
// 5.1 MB of weights) at 12 GB/s, 0.42 ms and 6% of the model at one thread on an AMD EPYC
// Zen 4, where reading the weights once in order runs at 88 GB/s from the cache and 23 from
// memory (a probe of this kernel's loop: 0.059 and 0.22 ms). A product of one row is bound
// by B's bytes, and brgemm's tiles are made for many rows.
//
// How: B is packed at creation into column blocks of 16, [N / 16][K][16] f32 (the last
// block padded with zeros), so the product reads it once, in order, with one FMA per 64
// bytes: four blocks at a time, each a vector of 16 sums in registers, every k adding
// a[k] times the four blocks' row k. Blocks are shared among the team (parallel_for),
// each thread storing its blocks' outputs: scale * sum + bias, in K order per output.
// Compiled for AVX-512, AVX2 with FMA and the x86-64 baseline; the widest the CPU has runs.
//
// Contract: f32 views; a [..., 1, K] and out [..., 1, N] with every leading dim 1, any
// strides; b [..., K, N] with every leading dim 1, any strides, a constant: its values are
// read once at creation and the kernel keeps its own packed copy. bias (or null) has N or 1
// elements along its last dim, any strides, read at every run. UNSUPPORTED otherwise. It
// applies no post-ops: make_matmul_of refuses a one-row product with post-ops, and its
// callers (FusedMatMul, a 1x1 convolution) then run this kernel and the program as a pass
// of its own over the N outputs.
#pragma once

#include <memory>
#include <string>

#include "hal/kernel.h"
#include "hal/matmul_views.h"

namespace strider::cpu {

// OK where make_row_matmul takes these views (B's constness is the caller's to know).
Status row_matmul_applies(const MatMulViews& views, const TensorView* bias);
Result<std::unique_ptr<Kernel>> make_row_matmul(const MatMulViews& views, const TensorView* bias, float scale,
                                                const std::string& node);

}  // namespace strider::cpu
