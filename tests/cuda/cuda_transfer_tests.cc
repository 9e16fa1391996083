// PinnedStaging (hal/cuda/pinned_staging.h): bytes go up and come back unchanged for sizes
// around its parts, with one thread and with several, one copy or several as one transfer,
// into device memory whose neighbours must stay as they were; and the buffer is reused
// across transfers of different sizes (a later, smaller one must not see an earlier one's
// bytes). The device's batched transfers (upload_all, download_all) mix dense, strided and
// pinned tensors in one call. Outputs the device makes come in pinned blocks of its
// PinnedPool, reused once given back.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "hal/cuda/pinned_pool.h"
#include "hal/cuda/pinned_staging.h"
#include "hal/device.h"
#include "kernel_harness.h"
#include "memory/tensor_view.h"

namespace strider::cuda_test {
namespace {

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> bytes(n);
  for (std::byte& b : bytes) b = std::byte(rng() & 0xff);
  return bytes;
}

// Device memory of `bytes` between two guards of 0xA5 that nothing may write.
struct Guarded {
  static constexpr size_t kGuard = 256;
  explicit Guarded(size_t bytes) : bytes(bytes) {
    EXPECT_EQ(cudaMalloc(&base, bytes + 2 * kGuard), cudaSuccess);
    EXPECT_EQ(cudaMemset(base, 0xA5, bytes + 2 * kGuard), cudaSuccess);
  }
  ~Guarded() { cudaFree(base); }
  std::byte* target() const { return base + kGuard; }
  // The device bytes equal `sent` and the guards are untouched.
  void expect_holds(const std::vector<std::byte>& sent) const {
    std::vector<std::byte> whole(bytes + 2 * kGuard);
    ASSERT_EQ(cudaMemcpy(whole.data(), base, whole.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(whole.data() + kGuard, sent.data(), bytes), 0);
    for (size_t i = 0; i < kGuard; ++i) {
      ASSERT_EQ(whole[i], std::byte(0xA5)) << "before the target, byte " << i;
      ASSERT_EQ(whole[kGuard + bytes + i], std::byte(0xA5)) << "after the target, byte " << i;
    }
  }
  std::byte* base = nullptr;
  size_t bytes;
};

// Sizes around the part size (fixed at 64 KiB and 1 MiB, and sized per transfer), on one
// thread and several.
TEST(PinnedStaging, BytesGoUpAndComeBackUnchangedAcrossParts) {
  STRIDER_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (int threads : {1, 3, 8}) {
    for (size_t fixed : {size_t(0), size_t(64) << 10, size_t(1) << 20}) {
      cuda::PinnedStaging staging(/*ordinal=*/0, threads, fixed);
      const size_t part = fixed ? fixed : cuda::PinnedStaging::kMaxPartBytes;
      uint32_t seed = 100 * uint32_t(threads) + uint32_t(fixed >> 10);
      for (size_t bytes : {size_t(1), size_t(4097), part - 1, part, part + 3, 5 * part + part / 2, size_t(70), 3 * part}) {
        SCOPED_TRACE(testing::Message() << threads << " threads, part " << fixed << ", " << bytes << " bytes");
        Guarded device(bytes);
        const std::vector<std::byte> sent = random_bytes(bytes, ++seed);
        ASSERT_TRUE(staging.upload(device.target(), sent.data(), bytes, stream).is_ok());
        std::vector<std::byte> back = random_bytes(bytes, ++seed);  // not what was sent
        ASSERT_TRUE(staging.download(back.data(), device.target(), bytes, stream).is_ok());
        EXPECT_EQ(std::memcmp(back.data(), sent.data(), bytes), 0);
        device.expect_holds(sent);
      }
    }
  }
  cudaStreamDestroy(stream);
}

// Several copies as one transfer: each lands in its own place, parts of different copies
// interleaved among the threads, sizes that leave each copy's last part short.
TEST(PinnedStaging, SeveralCopiesGoAsOneTransfer) {
  STRIDER_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const std::vector<size_t> sizes = {70, 300001, (size_t(1) << 20) + 5, 1, 4 * 65536};
  for (int threads : {1, 4}) {
    cuda::PinnedStaging staging(/*ordinal=*/0, threads);
    SCOPED_TRACE(testing::Message() << threads << " threads");
    std::vector<std::unique_ptr<Guarded>> devices;
    std::vector<std::vector<std::byte>> sent, back;
    std::vector<cuda::HostDeviceCopy> up, down;
    for (size_t i = 0; i < sizes.size(); ++i) {
      devices.push_back(std::make_unique<Guarded>(sizes[i]));
      sent.push_back(random_bytes(sizes[i], uint32_t(7 * i + threads)));
      back.push_back(random_bytes(sizes[i], uint32_t(1000 + i)));
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      up.push_back({devices[i]->target(), sent[i].data(), sizes[i]});
      down.push_back({back[i].data(), devices[i]->target(), sizes[i]});
    }
    ASSERT_TRUE(staging.upload(up, stream).is_ok());
    ASSERT_TRUE(staging.download(down, stream).is_ok());
    for (size_t i = 0; i < sizes.size(); ++i) {
      SCOPED_TRACE(testing::Message() << "copy " << i << ", " << sizes[i] << " bytes");
      EXPECT_EQ(std::memcmp(back[i].data(), sent[i].data(), sizes[i]), 0);
      devices[i]->expect_holds(sent[i]);
    }
  }
  cudaStreamDestroy(stream);
}

// The staging threads' hand-over (no GPU needed): across thousands of jobs of 1-19 parts,
// with threads sleeping at once or polling first, and pauses that let pollers fall
// asleep, every part of every job runs exactly once and before the job returns.
TEST(PinnedStaging, ThreadsRunEveryPartOnceAcrossManyJobs) {
  for (int threads : {2, 3, 8}) {
    for (int spin_us : {0, 200}) {
      SCOPED_TRACE(testing::Message() << threads << " threads, spin " << spin_us << " us");
      cuda::PinnedStaging staging(/*ordinal=*/0, threads, 0, spin_us);
      std::mt19937 rng(uint32_t(threads * 1000 + spin_us));
      for (int job = 0; job < 3000; ++job) {
        const size_t parts = 1 + rng() % 19;
        std::vector<std::atomic<int>> runs(parts);
        staging.parallel(parts, [&](size_t i) { runs[i].fetch_add(1); });
        for (size_t i = 0; i < parts; ++i) ASSERT_EQ(runs[i].load(), 1) << "job " << job << ", part " << i;
        if (job % 500 == 499) std::this_thread::sleep_for(std::chrono::microseconds(400 + rng() % 400));
      }
    }
  }
}

// Parts give each thread about two, from 64 KiB to 1 MiB, and a fixed size wins.
TEST(PinnedStaging, PartsAreSizedPerTransfer) {
  cuda::PinnedStaging eight(/*ordinal=*/0, 8), fixed(/*ordinal=*/0, 8, size_t(1) << 20);
  EXPECT_EQ(eight.part_bytes_for(1000), cuda::PinnedStaging::kMinPartBytes);
  EXPECT_EQ(eight.part_bytes_for(size_t(4) << 20), size_t(256) << 10);  // 16 parts
  EXPECT_EQ(eight.part_bytes_for((size_t(4) << 20) + 1), size_t(320) << 10);
  EXPECT_EQ(eight.part_bytes_for(size_t(64) << 20), cuda::PinnedStaging::kMaxPartBytes);
  EXPECT_EQ(fixed.part_bytes_for(1000), size_t(1) << 20);
}

// The device's uploads and downloads from and into pinned HostBuffers (one DMA, no
// staging) and from pageable memory (staged) give the same bytes.
TEST(PinnedStaging, TheDeviceMovesHostBuffersAndPageableMemoryAlike) {
  STRIDER_REQUIRE_GPU();
  auto device = kernel_test::open_device("cuda");
  ASSERT_TRUE(device.is_ok()) << device.status().to_string();
  const Shape shape = {3, 1000, 701};  // 8.4 MB of f32: several staging parts
  const Tensor values = random_tensor(DType::kF32, shape, 77);
  Result<HostBuffer> pinned_in = (*device)->allocate_host(values.byte_size());
  Result<HostBuffer> pinned_out = (*device)->allocate_host(values.byte_size());
  ASSERT_TRUE(pinned_in.is_ok() && pinned_out.is_ok());
  std::memcpy(pinned_in->data(), values.bytes(), values.byte_size());
  Result<Allocation*> memory = (*device)->allocate(int64_t(values.byte_size()), 64, "transfer test");
  ASSERT_TRUE(memory.is_ok());
  Result<TensorView> view = make_dense_view(**memory, 0, DType::kF32, shape, "x");
  ASSERT_TRUE(view.is_ok());
  for (bool pinned_source : {true, false}) {
    SCOPED_TRACE(pinned_source ? "from a pinned HostBuffer" : "from pageable memory");
    Result<Tensor> source = pinned_source ? Tensor::borrow(DType::kF32, shape, pinned_in->data(), values.byte_size())
                                          : Result<Tensor>(values);
    ASSERT_TRUE(source.is_ok());
    ASSERT_TRUE((*device)->upload(*source, *view).is_ok());
    std::memset(pinned_out->data(), 0x5A, pinned_out->size());
    Result<Tensor> into_pinned = Tensor::borrow(DType::kF32, shape, pinned_out->data(), values.byte_size());
    ASSERT_TRUE(into_pinned.is_ok());
    ASSERT_TRUE((*device)->download(*view, &*into_pinned).is_ok());
    EXPECT_EQ(into_pinned->bytes(), pinned_out->data()) << "downloaded into the caller's buffer";
    EXPECT_EQ(std::memcmp(pinned_out->data(), values.bytes(), values.byte_size()), 0);
    Tensor into_pageable;
    ASSERT_TRUE((*device)->download(*view, &into_pageable).is_ok());
    EXPECT_EQ(std::memcmp(into_pageable.bytes(), values.bytes(), values.byte_size()), 0);
    ASSERT_TRUE((*device)->upload(random_tensor(DType::kF32, shape, 78), *view).is_ok());  // overwritten between rounds
  }
  (*device)->release(*memory);
}

// upload_all and download_all over a dense view from pageable memory, a strided view (a
// transpose: the staging buffer and copy kernel), a dense view from a pinned HostBuffer and
// an empty tensor, in one call each: every tensor comes back as it went, the strided one
// in its own element order, and the bytes between the views are untouched.
TEST(PinnedStaging, TheDeviceMovesSeveralTensorsInOneCall) {
  STRIDER_REQUIRE_GPU();
  auto device = kernel_test::open_device("cuda");
  ASSERT_TRUE(device.is_ok()) << device.status().to_string();
  const Shape dense_shape = {4, 300, 257}, strided_shape = {37, 53}, pinned_shape = {2, 1000, 333}, empty_shape = {0, 5};
  const Tensor dense = random_tensor(DType::kF32, dense_shape, 81), strided = random_tensor(DType::kF32, strided_shape, 82),
               pinned_values = random_tensor(DType::kF32, pinned_shape, 83), empty(DType::kF32, empty_shape);
  Result<HostBuffer> pinned = (*device)->allocate_host(pinned_values.byte_size());
  ASSERT_TRUE(pinned.is_ok());
  std::memcpy(pinned->data(), pinned_values.bytes(), pinned_values.byte_size());
  Result<Tensor> pinned_source = Tensor::borrow(DType::kF32, pinned_shape, pinned->data(), pinned_values.byte_size());
  ASSERT_TRUE(pinned_source.is_ok());
  // One allocation: dense at 0, the transpose after a gap, pinned after another gap.
  const int64_t gap = 4096, dense_at = 0, strided_at = dense_at + int64_t(dense.byte_size()) + gap,
                pinned_at = strided_at + int64_t(strided.byte_size()) + gap,
                total = pinned_at + int64_t(pinned_values.byte_size()) + gap;
  Result<Allocation*> memory = (*device)->allocate(total, 64, "batched transfer test");
  ASSERT_TRUE(memory.is_ok());
  ASSERT_EQ(cudaMemset((*memory)->address(), 0x3C, size_t(total)), cudaSuccess);
  Result<TensorView> dense_view = make_dense_view(**memory, dense_at, DType::kF32, dense_shape, "dense");
  const TensorView strided_view{*memory, strided_at, DType::kF32, strided_shape, {1, 37}};  // column-major
  Result<TensorView> pinned_view = make_dense_view(**memory, pinned_at, DType::kF32, pinned_shape, "pinned");
  Result<TensorView> empty_view = make_dense_view(**memory, total - gap, DType::kF32, empty_shape, "empty");
  ASSERT_TRUE(dense_view.is_ok() && pinned_view.is_ok() && empty_view.is_ok());
  const std::vector<Device::Upload> uploads = {
      {&dense, &*dense_view}, {&strided, &strided_view}, {&*pinned_source, &*pinned_view}, {&empty, &*empty_view}};
  ASSERT_TRUE((*device)->upload_all(uploads).is_ok());

  Tensor dense_back, strided_back = random_tensor(DType::kF32, strided_shape, 84), empty_back;  // one reused, two made
  Result<HostBuffer> pinned_out = (*device)->allocate_host(pinned_values.byte_size());
  ASSERT_TRUE(pinned_out.is_ok());
  std::memset(pinned_out->data(), 0x5A, pinned_out->size());
  Result<Tensor> pinned_back = Tensor::borrow(DType::kF32, pinned_shape, pinned_out->data(), pinned_values.byte_size());
  ASSERT_TRUE(pinned_back.is_ok());
  const std::vector<Device::Download> downloads = {
      {&*dense_view, &dense_back}, {&strided_view, &strided_back}, {&*pinned_view, &*pinned_back}, {&*empty_view, &empty_back}};
  ASSERT_TRUE((*device)->download_all(downloads).is_ok());
  EXPECT_EQ(std::memcmp(dense_back.bytes(), dense.bytes(), dense.byte_size()), 0);
  EXPECT_EQ(std::memcmp(strided_back.bytes(), strided.bytes(), strided.byte_size()), 0);
  EXPECT_EQ(pinned_back->bytes(), pinned_out->data()) << "downloaded into the caller's buffer";
  EXPECT_EQ(std::memcmp(pinned_out->data(), pinned_values.bytes(), pinned_values.byte_size()), 0);
  EXPECT_EQ(empty_back.shape(), empty_shape);

  // The strided view really is column-major on the device, and the gaps are untouched.
  std::vector<float> whole(size_t(total) / sizeof(float));
  ASSERT_EQ(cudaMemcpy(whole.data(), (*memory)->address(), size_t(total), cudaMemcpyDeviceToHost), cudaSuccess);
  const float* column_major = whole.data() + strided_at / 4;
  EXPECT_EQ(column_major[1], strided.data<float>()[53]) << "element [1, 0] at offset 1";
  const auto gap_untouched = [&](int64_t from) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(whole.data());
    for (int64_t b = from; b < from + gap; ++b)
      if (bytes[b] != 0x3C) return false;
    return true;
  };
  EXPECT_TRUE(gap_untouched(dense_at + int64_t(dense.byte_size())));
  EXPECT_TRUE(gap_untouched(strided_at + int64_t(strided.byte_size())));
  EXPECT_TRUE(gap_untouched(pinned_at + int64_t(pinned_values.byte_size())));
  (*device)->release(*memory);
}

bool is_pinned(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

TEST(PinnedPool, HandsOutPinnedBlocksAndReusesThoseGivenBack) {
  STRIDER_REQUIRE_GPU();
  std::shared_ptr<cuda::PinnedPool> pool = cuda::PinnedPool::create(0);
  EXPECT_EQ(pool->take(cuda::PinnedPool::kMinBytes - 1).data(), nullptr) << "small: pageable is as fast";
  std::byte *first = nullptr, *second = nullptr;
  size_t block = 0;
  {
    HostBuffer a = pool->take(300001);
    ASSERT_NE(a.data(), nullptr);
    EXPECT_GE(a.size(), 300001u);
    EXPECT_TRUE(is_pinned(a.data()));
    EXPECT_EQ(pool->outstanding_bytes(), a.size());
    HostBuffer b = pool->take(300001);  // while a is out: another block
    ASSERT_NE(b.data(), nullptr);
    EXPECT_NE(b.data(), a.data());
    first = a.data();
    second = b.data();
    block = a.size();
    std::memset(a.data(), 0x11, a.size());  // the whole block is the caller's
  }
  EXPECT_EQ(pool->outstanding_bytes(), 0u);
  EXPECT_EQ(pool->cached_bytes(), 2 * block);
  HostBuffer again = pool->take(300001);
  EXPECT_TRUE(again.data() == first || again.data() == second) << "a given-back block is reused";
  EXPECT_EQ(pool->cached_bytes(), block);
  HostBuffer far_smaller = pool->take(cuda::PinnedPool::kMinBytes);
  EXPECT_NE(far_smaller.data(), nullptr);
  // The pool outlives its handle while a block is out; the block's release frees it last.
  pool.reset();
  std::memset(again.data(), 0x22, again.size());
}

// A download into a tensor the device makes comes back in pinned memory when it is large
// (one DMA), in ordinary memory when small, with the right bytes either way; a copy of it
// is ordinary memory; once dropped, its block serves the next download.
TEST(PinnedPool, TheDeviceHandsBackLargeOutputsInPinnedMemory) {
  STRIDER_REQUIRE_GPU();
  auto device = kernel_test::open_device("cuda");
  ASSERT_TRUE(device.is_ok()) << device.status().to_string();
  const Shape large_shape = {7, 211, 199}, small_shape = {3, 5};
  const Tensor large = random_tensor(DType::kF32, large_shape, 91), small = random_tensor(DType::kF32, small_shape, 92);
  Result<Allocation*> memory = (*device)->allocate(int64_t(large.byte_size() + 4096), 256, "pinned output test");
  ASSERT_TRUE(memory.is_ok());
  Result<TensorView> large_view = make_dense_view(**memory, 0, DType::kF32, large_shape, "large");
  Result<TensorView> small_view = make_dense_view(**memory, int64_t(large.byte_size()) + 256, DType::kF32, small_shape, "small");
  ASSERT_TRUE(large_view.is_ok() && small_view.is_ok());
  ASSERT_TRUE((*device)->upload(large, *large_view).is_ok());
  ASSERT_TRUE((*device)->upload(small, *small_view).is_ok());
  std::byte* block = nullptr;
  {
    Tensor large_back, small_back;
    const std::vector<Device::Download> downloads = {{&*large_view, &large_back}, {&*small_view, &small_back}};
    ASSERT_TRUE((*device)->download_all(downloads).is_ok());
    EXPECT_TRUE(is_pinned(large_back.bytes())) << "a large output in pinned memory";
    EXPECT_FALSE(is_pinned(small_back.bytes())) << "a small one in ordinary memory";
    EXPECT_TRUE(large_back.owns_bytes());
    EXPECT_EQ(large_back.shape(), large_shape);
    EXPECT_EQ(std::memcmp(large_back.bytes(), large.bytes(), large.byte_size()), 0);
    EXPECT_EQ(std::memcmp(small_back.bytes(), small.bytes(), small.byte_size()), 0);
    const Tensor copy = large_back;
    EXPECT_FALSE(is_pinned(copy.bytes())) << "a copy is ordinary memory";
    EXPECT_EQ(std::memcmp(copy.bytes(), large.bytes(), large.byte_size()), 0);
    block = large_back.bytes();
  }
  ASSERT_TRUE((*device)->upload(random_tensor(DType::kF32, large_shape, 93), *large_view).is_ok());
  Tensor next;
  ASSERT_TRUE((*device)->download(*large_view, &next).is_ok());
  EXPECT_EQ(next.bytes(), block) << "the dropped output's block serves the next download";
  const Tensor wanted = random_tensor(DType::kF32, large_shape, 93);
  EXPECT_EQ(std::memcmp(next.bytes(), wanted.bytes(), wanted.byte_size()), 0);
  (*device)->release(*memory);
}

}  // namespace
}  // namespace strider::cuda_test
