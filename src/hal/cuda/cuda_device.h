// The CUDA device: one GPU, its queues (non-blocking streams), its allocations in the
// chosen storage mode, and the library handles its kernels share.
//
// Storage modes (a performance policy, never a correctness knob; every mode passes the
// same tests): device = cudaMalloc; unified = cudaMallocManaged, never more than the card
// has free; host = pinned, mapped host memory (cudaHostAlloc), read by kernels over the bus.
// Uploads and downloads are host-queue commands ordered by the hazard tracker; they copy on
// a transfer stream of their own and wait for it, through the device's pinned host
// buffer (pinned_staging.h: the bus at pinned speed, host copies on several threads), and
// non-dense views through a device buffer and a strided copy kernel. An output tensor the
// device makes for a download is pinned memory of its PinnedPool (pinned_pool.h) when it
// is large: one DMA, no host copy.
#pragma once

#include <atomic>
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/pinned_pool.h"
#include "hal/cuda/pinned_staging.h"
#include "hal/device.h"

namespace strider::cuda {

class CudaDevice final : public Device {
 public:
  static Result<std::unique_ptr<Device>> create(int ordinal, const DeviceOptions& options);
  // cudaGetDeviceCount's answer; no GPUs (or no driver to ask) is 0.
  static int count();
  ~CudaDevice() override;

  std::string_view name() const override { return "cuda"; }
  Result<Allocation*> allocate(int64_t size, int64_t alignment, std::string label) override;
  void release(Allocation* allocation, std::span<const Timepoint> last_uses) override;
  int num_queues() const override { return int(queues_.size()); }
  Queue& queue(int index) override { return *queues_.at(size_t(index)); }
  Status synchronize() override;
  Status wait_for_outside_work() override;
  // Measured on the H200 (C2f, detector shapes): bf16/f16 convolutions run on tensor cores
  // and are fastest channels-last; true-f32 ones are faster over NCHW channel slices, which
  // cuDNN also writes in place (it refuses NHWC slices, so nhwc adds materializations).
  bool prefers_channels_last(DType dtype) const override { return dtype == DType::kBF16 || dtype == DType::kF16; }
  // 1-D convolutions' (N, C, T) values channels-last too in nhwc: their pointwise and
  // few-tap convolutions then run as tensor-core GEMMs over channel rows (mma_conv.h), and
  // a gated unit's halves are channel slices (WaveNet, gated stacks).
  bool channels_last_1d() const override { return true; }
  // cuda::tiled_attention_pays: bf16 / f16 always (the register-tiled kernel), f32 where
  // its kernel's query tiles fill the GPU or a query row's work is small (at batch 1 on an
  // H100 the f32 register-tiled kernel made BERT and GPT-2 slower, 0.248 -> 0.303 ms,
  // Llama's 32-wide heads faster, 0.313 -> 0.286). STRIDER_CUDA_ATTENTION=never: no
  // attention fused; =everywhere: every one (testing aids).
  bool fuses_attention(const AttentionShape& shape) const override;
  bool fuses_conv_into_concat() const override { return false; }
  // Measured on an H100 (session 24, bf16): fused, WaveNet's two-tap units ran 9% faster at
  // batch 32 (the tensor-core kernel applies the gate); the gated stack's 1x1 units ran 7%
  // slower (cuBLASLt's product then the gate map beat the tensor-core kernel, so the fused
  // node only added its buffer), f32 units too. So: 16-bit units of more than one tap.
  // STRIDER_CUDA_GATED_CONV=everywhere fuses every unit (a testing aid), =off none.
  bool fuses_gated_conv(const GatedConvUnit& unit) const override;
  // Every gated residual unit of one tap and at most kGatedStackMaxChannels channels, in
  // f32, bf16 and f16: the stack's kernel carries a pixel's channels through all its units
  // in shared memory (gated_stack.h), one launch where there were one or two a unit.
  // f32 units at any size, 16-bit units up to the multiply-adds where tensor cores unfused
  // overtake its f32 FMAs (measured: cuda_device.cc). STRIDER_CUDA_GATED_STACK=off fuses
  // none, =everywhere every unit the kernel takes (A/B aids).
  bool fuses_gated_stack(const GatedConvUnit& unit) const override;
  // WaveNet layers of 2-3 taps, at most kWaveNetLayerMaxChannels channels and a skip as
  // wide, in one kernel (wavenet_layer.h), chosen as the stack's units are;
  // STRIDER_CUDA_WAVENET_LAYER=off or =everywhere as the stack's switch.
  bool fuses_wavenet_layer(const WaveNetLayerShape& shape) const override;
  // Yes: a merged group is one cuBLASLt product where there were several (and for Llama's
  // gate and up, one map after it where the gate's product had its map in place). On an
  // H100 (session 27) Llama's decoder ran 4-6% faster merged (b1 bf16 0.176 -> 0.166 ms,
  // b32 f32 1.540 -> 1.455). STRIDER_CUDA_MERGE_SIBLINGS=off keeps them apart (an A/B aid).
  bool merges_sibling_matmuls() const override;
  // Yes: cuBLASLt and the small product read B's transposed view as it is.
  bool rewrites_linear_gemms() const override { return true; }
  int64_t max_grouped_map_elements() const override;
  bool has_kernel(std::string_view op_type) const override;
  std::string declines(const Graph& graph, const Node& node) const override;
  bool computes_on_host() const override { return false; }
  Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request) override;
  Status upload(const Tensor& source, const TensorView& destination) override;
  Status download(const TensorView& source, Tensor* destination) override;
  Status upload_all(std::span<const Upload> uploads) override;
  Status download_all(std::span<const Download> downloads) override;
  // Pinned (cudaHostAllocPortable): upload and download find it pinned and copy by DMA alone.
  Result<HostBuffer> allocate_host(size_t bytes) override;
  // Stamps are events on the streams (cuda_trace_clock.cc).
  std::unique_ptr<TraceClock> make_trace_clock() override;

 private:
  CudaDevice(int ordinal, const DeviceOptions& options) : Device(options.budget), ordinal_(ordinal), options_(options) {}
  Status init();
  Result<void*> allocate_raw(size_t bytes, const std::string& label);
  Status stage(size_t bytes);
  // One tensor of a batched transfer: its bytes where both sides are dense (`copy`, the host
  // side at `host`), else `strided`, which moves it on its own and waits.
  struct Move {
    HostDeviceCopy copy;
    const void* host;
    std::function<Status()> strided;
  };
  Status move_all(std::span<const Move> moves, cudaMemcpyKind kind);
  Tensor output_tensor(DType dtype, const Shape& sizes);
  Status upload_strided(const Tensor& source, const TensorView& destination);  // waits for it
  Status download_strided(const TensorView& source, Tensor& result);        // waits for it
  Status finish_direct(cudaError_t& queued, const char* what);
  Status host_to_device(void* target, const void* source, size_t bytes);  // waits for it
  Status device_to_host(void* target, const void* source, size_t bytes);  // waits for it

  int ordinal_;
  int multiprocessors_ = 0;
  DeviceOptions options_;
  CudaContext context_;
  std::vector<std::unique_ptr<Queue>> queues_;
  cudaStream_t transfer_stream_ = nullptr;
  DeviceBuffer staging_;  // for non-dense uploads and downloads
  std::unique_ptr<PinnedStaging> pinned_staging_;  // null: pageable copies (measuring aid)
  // Pinned blocks for the outputs download_all makes (pinned_pool.h); null: ordinary
  // memory (STRIDER_CUDA_PINNED_OUTPUTS=off, a measuring aid). Shared with the tensors.
  std::shared_ptr<PinnedPool> output_pool_;
  std::mutex transfer_mutex_;  // one upload or download at a time (they share the buffers)
  std::atomic<uint64_t> next_id_{1};  // allocate() may be called from several threads (instances sharing weights)
};

}  // namespace strider::cuda
