// The CUDA device's kernel table: op type -> factory, like the CPU's. A kernel enqueues
// its work on the stream of the queue that runs it (QueueContext::native_stream, a
// cudaStream_t) and never synchronizes: ordering is the hazard tracker's job. A factory
// returns UNSUPPORTED (naming what) for dtypes, attributes or views it cannot handle at
// full speed, so the planner can pack the views or the session can list the op.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hal/kernel.h"

namespace strider::cuda {

// What kernels share per device: library handles and options.
struct CudaContext {
  int ordinal = 0;
  bool allow_tf32 = false;
  void* cublaslt = nullptr;  // cublasLtHandle_t
  void* cudnn = nullptr;     // cudnnHandle_t
};

using KernelFactory = Result<std::unique_ptr<Kernel>> (*)(const KernelRequest&, const CudaContext&);

struct KernelEntry {
  std::string_view op_type;
  KernelFactory create;
};

Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request, const CudaContext& context);

// What a kernel sizes its launch by: the device's multiprocessors, and the dynamic shared
// memory a block may opt into.
struct DeviceLimits {
  int multiprocessors = 0;
  size_t shared_per_block = 0;
};
// The limits of the device `context` is for; a DEVICE error naming `node` if unreadable.
Result<DeviceLimits> device_limits(const CudaContext& context, const Node& node);
bool has_kernel(std::string_view op_type);
// The element types no CUDA kernel takes (their nodes run on the host; cuda_kernels.cc says why).
bool no_kernel_takes(DType dtype);
// Device::declines: an op with no kernel here, or an operand of a dtype none takes.
std::string declines(const Graph& graph, const Node& node);

inline cudaStream_t stream_of(const QueueContext& context) { return static_cast<cudaStream_t>(context.native_stream); }

// One registration function per kernel family file.
void register_elementwise_kernels(std::vector<KernelEntry>& table);  // elementwise.cu
void register_copy_kernels(std::vector<KernelEntry>& table);         // copy.cu
void register_reduce_kernels(std::vector<KernelEntry>& table);       // reduce.cu: reductions, softmax
void register_pool_kernels(std::vector<KernelEntry>& table);         // pool.cu
void register_resize_kernels(std::vector<KernelEntry>& table);       // resize.cu
void register_matmul_kernels(std::vector<KernelEntry>& table);       // matmul.cc (cuBLASLt)
void register_conv_kernels(std::vector<KernelEntry>& table);         // conv.cc (cuDNN)
void register_normalization_kernels(std::vector<KernelEntry>& table);  // normalize.cu
void register_index_map_kernels(std::vector<KernelEntry>& table);      // index_map.cu: Pad, Tile
void register_scatter_kernels(std::vector<KernelEntry>& table);        // scatter.cu: scatters, GatherND
void register_attention_kernels(std::vector<KernelEntry>& table);      // attention.cu: FusedAttention
void register_gated_stack_kernels(std::vector<KernelEntry>& table);    // gated_stack.cu: FusedGatedStack
void register_wavenet_layer_kernels(std::vector<KernelEntry>& table);  // wavenet_layer.cu: FusedWaveNetLayer

class MappedReport;
// OK, or OUT_OF_RANGE naming `node` and the bad index a kernel flagged in `report` (gather.h).
Status index_report_status(MappedReport& report, const std::string& node);

}  // namespace strider::cuda
