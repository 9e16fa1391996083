// A kernel's output staged through dense memory of the kernel's own.
//
// oneDNN 2.6's fast matmul (brgemm) takes no row stride in its destination: over a strided
// output, such as the channel slice of an in-place concat that a 1x1 convolution writes,
// it falls back to its gemm path, 5-8x slower there (C2f's first conv, 1600x16 by 16x32:
// 122 us against 17 us dense, measured with oneDNN's verbose timings). A staged kernel runs
// the fast kernel into a dense buffer and then copies that into the plan's view.
//
// Views: the plan is unchanged (the concat stays in place, the node writes exactly its
// view); only the kernel's inside differs. Memory: the buffer belongs to the kernel, like
// oneDNN's scratchpads ("kernel workspaces apart" in the plan's figures), one output's
// bytes. Synchronization: the copy runs in the same command, after the inner kernel.
#pragma once

#include <cstddef>
#include <memory>

#include "hal/cpu/cpu_kernels.h"

namespace strider::cpu {

struct AlignedFree {
  void operator()(std::byte* p) const;
};

// 64-byte aligned host memory of `bytes` (at least 1), and an Allocation over it.
struct KernelScratch {
  std::unique_ptr<std::byte, AlignedFree> bytes;
  std::unique_ptr<Allocation> allocation;
};
KernelScratch make_kernel_scratch(int64_t bytes, const char* label);

// A dense view with `out`'s sizes, dtype and memory order, on scratch the caller keeps.
struct StagedOutput {
  KernelScratch scratch;
  TensorView dense;
};
Result<StagedOutput> stage_output(const TensorView& out);

// `inner` (which writes staged.dense), then a copy of staged.dense into `out`.
std::unique_ptr<Kernel> make_staged_kernel(std::unique_ptr<Kernel> inner, StagedOutput staged, const TensorView& out);

}  // namespace strider::cpu
