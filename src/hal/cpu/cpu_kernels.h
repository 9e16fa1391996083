// The CPU device's kernel table: op type -> factory. Each factory checks that it supports
// the node's dtypes and attributes and returns UNSUPPORTED (naming what) otherwise, so a
// session can list everything it cannot run before running anything.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "hal/kernel.h"
#include "ops/fused_elementwise.h"

namespace strider::cpu {

using KernelFactory = Result<std::unique_ptr<Kernel>> (*)(const KernelRequest&);

struct KernelEntry {
  std::string_view op_type;
  KernelFactory create;
  // The f32 kernel may stand in for the bf16 one over f32 copies (widened_kernels.h).
  bool widens_bf16 = false;
};

// How a kernel that may widen bf16 computes it: kAuto widens where oneDNN has no bf16
// kernels (below AVX-512) or offers only slow ones; the others force a path (tests).
enum class Bf16Arithmetic { kAuto, kNative, kWidened };

Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request,
                                              Bf16Arithmetic bf16 = Bf16Arithmetic::kAuto);
bool has_kernel(std::string_view op_type);

// A FusedElementwise program over `inputs` (broadcast to `out`), writing `out`; an input
// may be `out` itself (a tile is loaded before it is stored). FusedConv runs its activation
// with it when oneDNN cannot.
Result<std::unique_ptr<Kernel>> make_fused_program_kernel(const FusedProgram& program, const TensorView& out,
                                                          const std::vector<TensorView>& inputs);

// A kernel that runs `first`, then `then` (a conv or matmul, then the program over its
// output that oneDNN could not apply as post-ops); its name says both.
std::unique_ptr<Kernel> make_kernel_then(std::unique_ptr<Kernel> first, std::unique_ptr<Kernel> then);

// One registration function per kernel family file.
void register_elementwise_kernels(std::vector<KernelEntry>& table);
void register_fused_kernels(std::vector<KernelEntry>& table);
void register_copy_kernels(std::vector<KernelEntry>& table);
void register_matmul_kernels(std::vector<KernelEntry>& table);
void register_conv_kernels(std::vector<KernelEntry>& table);
void register_conv_chain_kernels(std::vector<KernelEntry>& table);
void register_gated_stack_kernels(std::vector<KernelEntry>& table);  // FusedGatedStack
void register_wavenet_layer_kernels(std::vector<KernelEntry>& table);  // FusedWaveNetLayer
void register_fused_matmul_kernels(std::vector<KernelEntry>& table);
void register_pool_kernels(std::vector<KernelEntry>& table);
void register_reduce_kernels(std::vector<KernelEntry>& table);
void register_resize_kernels(std::vector<KernelEntry>& table);
void register_grid_kernels(std::vector<KernelEntry>& table);  // GridSample, AffineGrid
void register_generator_kernels(std::vector<KernelEntry>& table);
void register_scatter_kernels(std::vector<KernelEntry>& table);
void register_normalization_kernels(std::vector<KernelEntry>& table);
void register_index_map_kernels(std::vector<KernelEntry>& table);
void register_attention_kernels(std::vector<KernelEntry>& table);  // FusedAttention

}  // namespace strider::cpu
