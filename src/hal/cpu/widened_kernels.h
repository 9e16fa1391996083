// bf16 convolutions and matmuls run by their f32 kernels over f32 copies of the operands,
// on CPUs where oneDNN has no bf16 kernels (widened_kernels.cc says why and what it costs).
#pragma once

#include "hal/cpu/cpu_kernels.h"

namespace strider::cpu {

// Whether oneDNN computes bf16 convolutions and matmuls with vector code here (AVX-512).
bool onednn_has_bf16_kernels();

// "" where the CPU has bf16 instructions (AVX512-BF16; AMX-BF16 CPUs have it too); else one sentence on
// how bf16 runs here instead (oneDNN's AVX-512 emulation, or these widened kernels).
std::string bf16_arithmetic_notice();

// Whether `kernel` is oneDNN's reference implementation or one of strider's naive loops.
bool runs_slow_loops(const Kernel& kernel);

// Whether any operand of `request` is bf16.
bool has_bf16_operand(const KernelRequest& request);

// `f32_factory`'s kernel for `request` with every bf16 operand replaced by an f32 copy:
// inputs converted before each run (constant ones once, now), outputs rounded into their
// bf16 views after it. UNSUPPORTED when the f32 kernel refuses the copies or would be
// no faster than the bf16 one (oneDNN's reference or a naive loop).
Result<std::unique_ptr<Kernel>> make_widened_kernel(const KernelRequest& request, KernelFactory f32_factory);

}  // namespace strider::cpu
