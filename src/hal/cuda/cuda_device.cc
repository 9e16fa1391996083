#include "hal/cuda/cuda_device.h"

#include <cublasLt.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "hal/cuda/attention.h"
#include "hal/cuda/copy.h"
#include "hal/cuda/cuda_queue.h"
#include "hal/cuda/gated_stack.h"
#include "hal/cuda/wavenet_layer.h"
#include "hal/cuda_device_factory.h"
#include "hal/host_queue.h"
#include "ops/fused_elementwise.h"
#include "ops/fused_map_group.h"
#include "ops/wavenet_layer.h"

namespace strider::cuda {

Result<std::unique_ptr<Device>> CudaDevice::create(int ordinal, const DeviceOptions& options) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0)
    return device_error(fmt::format("no CUDA device: {}", error == cudaSuccess ? "no GPU found" : cudaGetErrorString(error)));
  if (ordinal >= count) return device_error(fmt::format("cuda:{} does not exist; this machine has {} GPU(s)", ordinal, count));
  std::unique_ptr<CudaDevice> device(new CudaDevice(ordinal, options));
  STRIDER_RETURN_IF_ERROR(device->init());
  return std::unique_ptr<Device>(std::move(device));
}

int CudaDevice::count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // the runtime keeps the error otherwise
    return 0;
  }
  return count;
}

Status CudaDevice::init() {
  STRIDER_CUDA_RETURN(cudaSetDevice(ordinal_), "cuda device");
  cudaDeviceProp props{};
  STRIDER_CUDA_RETURN(cudaGetDeviceProperties(&props, ordinal_), "cuda device");
  if (options_.storage_mode == StorageMode::kUnified && !props.managedMemory)
    return device_error("storage mode 'unified': this GPU has no managed memory");
  multiprocessors_ = props.multiProcessorCount;
  // Without a budget from the session, allocations may take 90% of the GPU's memory.
  if (!budget_) budget_ = std::make_shared<MemoryBudget>(int64_t(props.totalGlobalMem / 10 * 9));
  cublasLtHandle_t lt = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return device_error("cublasLtCreate failed");
  cudnnHandle_t dnn = nullptr;
  cudnnStatus_t dnn_status = cudnnCreate(&dnn);
  if (dnn_status != CUDNN_STATUS_SUCCESS)
    return device_error(fmt::format("cudnnCreate failed: {}", cudnnGetErrorString(dnn_status)));
  context_ = {ordinal_, options_.allow_tf32, lt, dnn};
  auto queue_of = [this](int index) -> Queue& { return queue(index); };
  queues_.push_back(std::make_unique<HostQueue>(queue_of));
  for (int i = 1; i <= options_.queues; ++i) {
    STRIDER_ASSIGN_OR_RETURN(std::unique_ptr<CudaQueue> q, CudaQueue::create(i, ordinal_, queue_of));
    queues_.push_back(std::move(q));
  }
  STRIDER_CUDA_RETURN(cudaStreamCreateWithFlags(&transfer_stream_, cudaStreamNonBlocking), "transfer stream");
  const char* staging = std::getenv("STRIDER_CUDA_PINNED_STAGING");
  const char* pinned_outputs = std::getenv("STRIDER_CUDA_PINNED_OUTPUTS");  // "off": pageable (measuring)
  if (!pinned_outputs || std::string_view(pinned_outputs) != "off") output_pool_ = PinnedPool::create(ordinal_);
  const char* part_kb = std::getenv("STRIDER_CUDA_STAGING_PART_KB");  // fixed part size (measuring)
  const size_t part_bytes = part_kb ? size_t(std::max(0L, std::atol(part_kb))) << 10 : 0;
  const char* spin_us = std::getenv("STRIDER_CUDA_STAGING_SPIN_US");  // idle threads poll this long (0: sleep at once)
  if (!staging || std::string_view(staging) != "off")
    pinned_staging_ = std::make_unique<PinnedStaging>(ordinal_, /*threads=*/0, part_bytes, spin_us ? std::atoi(spin_us) : PinnedStaging::kDefaultSpinUs);
  return Status::ok();
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal_);
  for (auto& q : queues_) (void)q->wait(q->next().value - 1);
  queues_.clear();
  pinned_staging_.reset();
  if (transfer_stream_) cudaStreamDestroy(transfer_stream_);
  if (context_.cudnn) cudnnDestroy(static_cast<cudnnHandle_t>(context_.cudnn));
  if (context_.cublaslt) cublasLtDestroy(static_cast<cublasLtHandle_t>(context_.cublaslt));
}

Result<void*> CudaDevice::allocate_raw(size_t bytes, const std::string& label) {
  void* address = nullptr;
  switch (options_.storage_mode) {
    case StorageMode::kDevice:
      STRIDER_CUDA_RETURN(cudaMalloc(&address, bytes), label);
      break;
    case StorageMode::kUnified: {
      size_t free = 0, total = 0;
      STRIDER_CUDA_RETURN(cudaMemGetInfo(&free, &total), label);
      if (bytes > free)  // never ask for more managed memory than the card has free
        return resource_exhausted(
            fmt::format("{}: {} bytes of unified memory requested, {} free on the GPU", label, bytes, free));
      STRIDER_CUDA_RETURN(cudaMallocManaged(&address, bytes, cudaMemAttachGlobal), label);
      break;
    }
    case StorageMode::kHost: {
      void* host = nullptr;
      STRIDER_CUDA_RETURN(cudaHostAlloc(&host, bytes, cudaHostAllocMapped), label);
      STRIDER_CUDA_RETURN(cudaHostGetDevicePointer(&address, host, 0), label);
      break;
    }
  }
  return address;
}

Result<Allocation*> CudaDevice::allocate(int64_t size, int64_t alignment, std::string label) {
  cudaSetDevice(ordinal_);
  size_t bytes = size_t(std::max<int64_t>(size, 1));
  bool host_accessible = options_.storage_mode != StorageMode::kDevice;
  STRIDER_RETURN_IF_ERROR(reserve_memory(size, label));
  Result<void*> address = allocate_raw(bytes, label);
  if (!address.is_ok()) {
    return_memory(size);
    return address.status();
  }
  if (reinterpret_cast<uintptr_t>(*address) % uintptr_t(alignment) != 0)
    return internal_error(fmt::format("{}: CUDA returned memory aligned below {}", label, alignment));
  return new Allocation(next_id_++, std::move(label), "cuda", static_cast<std::byte*>(*address), size, alignment,
                        options_.storage_mode, host_accessible);
}

void CudaDevice::release(Allocation* allocation, std::span<const Timepoint> last_uses) {
  for (const Timepoint& t : last_uses) (void)queue(t.queue).wait(t.value);
  cudaSetDevice(ordinal_);
  if (allocation->storage_mode() == StorageMode::kHost) cudaFreeHost(allocation->address());
  else cudaFree(allocation->address());
  return_memory(allocation->size());
  delete allocation;
}

Status CudaDevice::synchronize() {
  Status first;
  for (auto& q : queues_) {
    Status s = q->wait(q->next().value - 1);
    if (!s.is_ok() && first.is_ok()) first = s;
  }
  return first;
}

// Every stream of the GPU, the caller's too: the only way to know a consumer that dropped
// memory strider handed out has finished reading it.
Status CudaDevice::wait_for_outside_work() {
  cudaSetDevice(ordinal_);
  STRIDER_CUDA_RETURN(cudaDeviceSynchronize(), "waiting for the GPU before reusing an output's memory");
  return Status::ok();
}

bool CudaDevice::fuses_attention(const AttentionShape& shape) const {
  const char* env = std::getenv("STRIDER_CUDA_ATTENTION");
  const std::string_view chosen = env ? env : "";
  if (chosen == "everywhere") return true;  // testing aids
  if (chosen == "never") return false;
  return cuda::tiled_attention_pays(shape, multiprocessors_);
}

// STRIDER_CUDA_EPILOGUES=off (a testing aid, for measuring what the epilogues save): no
// FusedConv, FusedGatedConv or FusedMatMul kernel, so the session leaves their programs as
// separate steps; STRIDER_CUDA_GATED_CONV=off: no FusedGatedConv alone.
bool CudaDevice::has_kernel(std::string_view op_type) const {
  const char* epilogues = std::getenv("STRIDER_CUDA_EPILOGUES");
  if (epilogues && std::string_view(epilogues) == "off" &&
      (op_type == kFusedConvOp || op_type == kFusedGatedConvOp || op_type == kFusedMatMulOp))
    return false;
  const char* gated = std::getenv("STRIDER_CUDA_GATED_CONV");
  if (gated && std::string_view(gated) == "off" && op_type == kFusedGatedConvOp) return false;
  return cuda::has_kernel(op_type);
}
bool CudaDevice::fuses_gated_conv(const GatedConvUnit& unit) const {
  const char* env = std::getenv("STRIDER_CUDA_GATED_CONV");
  if (env && std::string_view(env) == "everywhere") return true;
  return (unit.dtype == DType::kBF16 || unit.dtype == DType::kF16) && unit.taps > 1;
}

namespace {

// How the stack's and the layer's fusion are switched (STRIDER_CUDA_GATED_STACK,
// STRIDER_CUDA_WAVENET_LAYER): unset or anything else, "on" (where the kernel pays, below);
// "off", never; "everywhere", every unit the kernel takes (for A/B timing).
enum class FusionSwitch { kOff, kOn, kEverywhere };
FusionSwitch fusion_switch(const char* variable) {
  const char* env = std::getenv(variable);
  const std::string_view value = env ? env : "";
  if (value == "everywhere") return FusionSwitch::kEverywhere;
  return value == "off" ? FusionSwitch::kOff : FusionSwitch::kOn;
}

// The stack and layer kernels multiply on f32 FMAs; unfused, a 16-bit unit's product runs on
// tensor cores (cuDNN, cuBLASLt). What fusing saves is launches and stored intermediates;
// what it costs grows with the unit's multiply-adds faster fused than unfused, so 16-bit
// units fuse up to below where the two cross. Session 39's sweep on an H100, bf16, fused /
// unfused ms (bench/RESULTS.md): GatedChain20 (64 -> 2 x 64 channels, 1 tap: 8192 MACs a
// position, T = 256) b8 0.069 / 0.126, b16 0.080 / 0.133, b32 0.128 / 0.149, b64 0.245 /
// 0.195, crossing near 10600 positions, 8.7e7 MACs a unit; WaveNet8 (32 -> 2 x 32 channels,
// 2 taps, residual and skip projections of 32: 6144 MACs a position, T = 1024) b8 0.121 /
// 0.149, b16 0.197 / 0.193, b32 0.360 / 0.241, crossing near 15600 positions, 9.6e7 MACs.
// The two kernels cross at nearly the same work, so one bound in multiply-adds serves both
// (and units of other widths) better than one in positions. f32 products run on the same
// FMAs either way (TF32 off), so f32 units fuse at any size: fused won at every batch
// measured (b64: stack 0.228 / 0.434, layer 0.626 / 0.747).
constexpr int64_t kMaxFusedHalfMacs = 80'000'000;
int64_t gate_macs(const GatedConvUnit& unit) { return unit.positions * unit.in_channels * 2 * unit.gated_channels * unit.taps; }
int64_t layer_macs(const WaveNetLayerShape& shape) {
  const GatedConvUnit& gate = shape.gate;
  return gate_macs(gate) + gate.positions * gate.gated_channels * ((shape.residual ? gate.in_channels : 0) + shape.skip_channels);
}
bool fusion_wanted(FusionSwitch fusion, const GatedConvUnit& unit, int64_t macs) {
  if (fusion != FusionSwitch::kOn) return fusion == FusionSwitch::kEverywhere;
  return unit.dtype == DType::kF32 || (unit.positions > 0 && macs <= kMaxFusedHalfMacs);
}

bool takes_dtype(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16; }

}  // namespace

bool CudaDevice::fuses_gated_stack(const GatedConvUnit& unit) const {
  const FusionSwitch fusion = fusion_switch("STRIDER_CUDA_GATED_STACK");
  const bool takes = unit.taps == 1 && unit.in_channels == unit.gated_channels && unit.in_channels >= 1 &&
                     unit.in_channels <= cuda::kGatedStackMaxChannels && takes_dtype(unit.dtype);
  return takes && fusion_wanted(fusion, unit, gate_macs(unit));
}

bool CudaDevice::fuses_wavenet_layer(const WaveNetLayerShape& shape) const {
  const FusionSwitch fusion = fusion_switch("STRIDER_CUDA_WAVENET_LAYER");
  const GatedConvUnit& unit = shape.gate;
  const bool takes = unit.taps >= 2 && unit.taps <= cuda::kWaveNetLayerMaxTaps && unit.in_channels == unit.gated_channels &&
                     unit.in_channels >= 1 && unit.in_channels <= cuda::kWaveNetLayerMaxChannels &&
                     (shape.skip_channels == 0 || shape.skip_channels == unit.in_channels) && takes_dtype(unit.dtype);
  return takes && fusion_wanted(fusion, unit, layer_macs(shape));
}

bool CudaDevice::merges_sibling_matmuls() const {
  const char* env = std::getenv("STRIDER_CUDA_MERGE_SIBLINGS");
  return !(env && std::string_view(env) == "off");
}

// Small independent maps share one launch (hal/cuda/map_group.cu) unless
// STRIDER_CUDA_GROUP_MAPS=off. Session 42 ran the group kernel on an H100: the kernel
// suite's IndependentMapsInOneGroup on cuda, the zoo's Llama and KV-cache decoders under
// `strider check --sanitize` with one and two queues, and Llama b1 bf16 0.167 -> 0.142 ms.
int64_t CudaDevice::max_grouped_map_elements() const {
  const char* env = std::getenv("STRIDER_CUDA_GROUP_MAPS");
  return env && std::string_view(env) == "off" ? 0 : kGroupedMapElements;
}

std::string CudaDevice::declines(const Graph& graph, const Node& node) const { return cuda::declines(graph, node); }

Result<std::unique_ptr<Kernel>> CudaDevice::create_kernel(const KernelRequest& request) {
  cudaSetDevice(ordinal_);
  return cuda::create_kernel(request, context_);
}

Status CudaDevice::stage(size_t bytes) {
  if (staging_.size() >= bytes) return Status::ok();
  return staging_.allocate(bytes);
}

namespace {

// Whether `host` is page-locked memory CUDA knows (a HostBuffer, the caller's own pinned
// memory): the DMA can read or write it where it is.
bool is_pinned(const void* host) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

}  // namespace

Status CudaDevice::upload(const Tensor& source, const TensorView& destination) {
  const Upload one{&source, &destination};
  return upload_all(std::span(&one, 1));
}

Status CudaDevice::download(const TensorView& source, Tensor* destination) {
  const Download one{&source, destination};
  return download_all(std::span(&one, 1));
}

// Dense tensors in pageable memory go as one staged transfer, in pinned memory as DMAs on
// the same stream (waited for with it); strided ones each through the device staging
// buffer and a copy kernel, in turn.
Status CudaDevice::upload_all(std::span<const Upload> uploads) {
  std::vector<Move> moves;
  for (const Upload& u : uploads) {
    const TensorView& to = *u.destination;
    moves.push_back({{to.allocation->address() + to.byte_offset, u.source->bytes(), u.source->byte_size()},
                     u.source->bytes(),
                     to.is_contiguous() ? std::function<Status()>() : [this, &u] { return upload_strided(*u.source, *u.destination); }});
  }
  return move_all(moves, cudaMemcpyHostToDevice);
}

Status CudaDevice::download_all(std::span<const Download> downloads) {
  std::vector<Move> moves;
  for (const Download& d : downloads) {
    const TensorView& from = *d.source;
    if (!d.destination->has_layout(from.dtype, from.sizes)) *d.destination = output_tensor(from.dtype, from.sizes);
    Tensor& result = *d.destination;
    moves.push_back({{result.bytes(), from.allocation->address() + from.byte_offset, result.byte_size()},
                     result.bytes(),
                     from.is_contiguous() ? std::function<Status()>() : [this, &d] { return download_strided(*d.source, *d.destination); }});
  }
  return move_all(moves, cudaMemcpyDeviceToHost);
}

// A tensor for a download to make: in a pinned block when the pool gives one (then the
// download is one DMA), else in ordinary memory. Its bytes are unspecified: every one is
// copied next.
Tensor CudaDevice::output_tensor(DType dtype, const Shape& sizes) {
  const size_t bytes = size_t(num_elements(sizes) * dtype_size(dtype));
  if (output_pool_) {
    if (HostBuffer block = output_pool_->take(bytes); block.data()) {
      Result<Tensor> adopted = Tensor::adopt(dtype, sizes, std::move(block));
      if (adopted.is_ok()) return std::move(*adopted);
    }
  }
  return Tensor::for_overwrite(dtype, sizes);
}

Status CudaDevice::move_all(std::span<const Move> moves, cudaMemcpyKind kind) {
  std::lock_guard lock(transfer_mutex_);
  cudaSetDevice(ordinal_);
  const char* what = kind == cudaMemcpyHostToDevice ? "upload" : "download";
  std::vector<HostDeviceCopy> staged;
  cudaError_t direct = cudaSuccess;
  for (const Move& m : moves) {
    if (m.copy.bytes == 0) continue;
    if (m.strided) {
      STRIDER_RETURN_IF_ERROR(finish_direct(direct, what));
      STRIDER_RETURN_IF_ERROR(m.strided());
    } else if (pinned_staging_ && !is_pinned(m.host)) {
      staged.push_back(m.copy);
    } else if (direct == cudaSuccess) {
      direct = cudaMemcpyAsync(m.copy.target, m.copy.source, m.copy.bytes, kind, transfer_stream_);
    }
  }
  if (!staged.empty() && direct == cudaSuccess)
    return kind == cudaMemcpyHostToDevice ? pinned_staging_->upload(staged, transfer_stream_)
                                          : pinned_staging_->download(staged, transfer_stream_);
  return finish_direct(direct, what);
}

// Waits for the DMAs queued so far (even after an error: the caller's memory is not handed
// back while a copy may still use it), then reports `queued`, the first error queuing them.
Status CudaDevice::finish_direct(cudaError_t& queued, const char* what) {
  const cudaError_t synced = cudaStreamSynchronize(transfer_stream_);
  const cudaError_t first = queued;
  queued = cudaSuccess;
  STRIDER_CUDA_RETURN(first, what);
  STRIDER_CUDA_RETURN(synced, what);
  return Status::ok();
}

Status CudaDevice::upload_strided(const Tensor& source, const TensorView& destination) {
  const size_t bytes = source.byte_size();
  STRIDER_RETURN_IF_ERROR(stage(bytes));
  STRIDER_RETURN_IF_ERROR(host_to_device(staging_.as<void>(), source.bytes(), bytes));
  Allocation staged(0, "staging", "cuda", staging_.as<std::byte>(), int64_t(staging_.size()), 64, StorageMode::kDevice, false);
  STRIDER_ASSIGN_OR_RETURN(TensorView dense, make_dense_view(staged, 0, destination.dtype, destination.sizes, "staging"));
  STRIDER_RETURN_IF_ERROR(launch_copy(destination, dense, transfer_stream_));
  STRIDER_CUDA_RETURN(cudaStreamSynchronize(transfer_stream_), "upload");
  return Status::ok();
}

Status CudaDevice::download_strided(const TensorView& source, Tensor& result) {
  STRIDER_RETURN_IF_ERROR(stage(result.byte_size()));
  Allocation staged(0, "staging", "cuda", staging_.as<std::byte>(), int64_t(staging_.size()), 64, StorageMode::kDevice, false);
  STRIDER_ASSIGN_OR_RETURN(TensorView dense, make_dense_view(staged, 0, source.dtype, source.sizes, "staging"));
  STRIDER_RETURN_IF_ERROR(launch_copy(dense, source, transfer_stream_));  // ordered before the copy out
  return device_to_host(result.bytes(), staging_.as<void>(), result.byte_size());
}

Result<HostBuffer> CudaDevice::allocate_host(size_t bytes) {
  cudaSetDevice(ordinal_);
  void* memory = nullptr;
  STRIDER_CUDA_RETURN(cudaHostAlloc(&memory, bytes ? bytes : 1, cudaHostAllocPortable), "pinned host buffer");
  return HostBuffer(static_cast<std::byte*>(memory), bytes, [](std::byte* p) { cudaFreeHost(p); });
}


// Pinned memory goes by DMA alone; pageable memory through the pinned staging
// (pinned_staging.h), or, with STRIDER_CUDA_PINNED_STAGING=off (for measuring the
// difference), as the driver stages it.
Status CudaDevice::host_to_device(void* target, const void* source, size_t bytes) {
  if (pinned_staging_ && !is_pinned(source)) return pinned_staging_->upload(target, source, bytes, transfer_stream_);
  return copy_and_wait(target, source, bytes, cudaMemcpyHostToDevice, transfer_stream_);
}

Status CudaDevice::device_to_host(void* target, const void* source, size_t bytes) {
  if (pinned_staging_ && !is_pinned(target)) return pinned_staging_->download(target, source, bytes, transfer_stream_);
  return copy_and_wait(target, source, bytes, cudaMemcpyDeviceToHost, transfer_stream_);
}

}  // namespace strider::cuda

