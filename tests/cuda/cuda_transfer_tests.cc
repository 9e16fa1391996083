// PinnedStaging (hal/cuda/pinned_staging.h): bytes go up and come back unchanged for sizes
// around its 1-MiB parts, with one thread and with several, into device memory whose
// neighbours must stay as they were; and the buffer is reused across transfers of
// different sizes (a later, smaller one must not see an earlier one's bytes).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
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

TEST(PinnedStaging, BytesGoUpAndComeBackUnchangedAcrossParts) {
  STRIDER_REQUIRE_GPU();
  const size_t part = cuda::PinnedStaging::kPartBytes, guard = 256;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (int threads : {1, 3, 8}) {
    cuda::PinnedStaging staging(/*ordinal=*/0, threads);
    uint32_t seed = 100 * uint32_t(threads);
    for (size_t bytes : {size_t(1), size_t(4097), part - 1, part, part + 3, 5 * part + part / 2, size_t(70), 3 * part}) {
      SCOPED_TRACE(testing::Message() << threads << " threads, " << bytes << " bytes");
      std::byte* device = nullptr;
      ASSERT_EQ(cudaMalloc(&device, bytes + 2 * guard), cudaSuccess);
      ASSERT_EQ(cudaMemset(device, 0xA5, bytes + 2 * guard), cudaSuccess);
      const std::vector<std::byte> sent = random_bytes(bytes, ++seed);
      ASSERT_TRUE(staging.upload(device + guard, sent.data(), bytes, stream).is_ok());
      std::vector<std::byte> back = random_bytes(bytes, ++seed);  // not what was sent
      ASSERT_TRUE(staging.download(back.data(), device + guard, bytes, stream).is_ok());
      EXPECT_EQ(std::memcmp(back.data(), sent.data(), bytes), 0);
      std::vector<std::byte> whole(bytes + 2 * guard);
      ASSERT_EQ(cudaMemcpy(whole.data(), device, whole.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(std::memcmp(whole.data() + guard, sent.data(), bytes), 0);
      for (size_t i = 0; i < guard; ++i) {
        ASSERT_EQ(whole[i], std::byte(0xA5)) << "before the target, byte " << i;
        ASSERT_EQ(whole[guard + bytes + i], std::byte(0xA5)) << "after the target, byte " << i;
      }
      cudaFree(device);
    }
  }
  cudaStreamDestroy(stream);
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

}  // namespace
}  // namespace strider::cuda_test
