// Tensor: a dense, row-major tensor in host memory, owned by value or borrowed.
//
// It is how data crosses the public API (inputs, outputs, initializers in the IR) and what
// the .npy / .pb readers return. An owning Tensor holds its bytes: copying it copies them,
// nothing aliases it. A borrowed Tensor (Tensor::borrow) is a view over memory the caller
// owns, so inputs go in and outputs come out without a copy through a Tensor:
//
//   Lifetime rule. The caller keeps borrowed memory alive, and does not write it (an
//   input) or read it (an output), until the call it was passed to has returned. strider
//   keeps no reference past that call: a Session never holds a borrowed Tensor.
//
// Copying a borrowed Tensor makes another view of the same bytes (not a copy of them);
// `owns_bytes()` says which kind a Tensor is. Device memory is never a Tensor: inside a
// session, values are TensorViews of allocations (src/memory/tensor_view.h).
//
// An owning Tensor may hold its bytes in a HostBuffer it adopted (Tensor::adopt): a cuda
// session returns large outputs in pinned memory that way, so the download is one DMA and
// no host copy (hal/cuda/pinned_pool.h). It is owning in every respect: copying it copies
// the bytes (into ordinary memory), moving it moves the buffer, destroying it frees the
// buffer (the HostBuffer's own release).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <string>
#include <vector>

#include "strider/dtype.h"
#include "strider/host_buffer.h"
#include "strider/status.h"

namespace strider {

using Shape = std::vector<int64_t>;

namespace detail {
// Allocates bytes that a resize leaves as they are (default-initialised, not zeroed): a
// Tensor zero-fills itself where it promises zeros, and skips it where every byte is
// written next (for_overwrite, from_bytes): zeroing a run's output only to copy over it
// doubled the cost of handing it back.
struct ByteAllocator : std::allocator<std::byte> {
  template <typename U>
  struct rebind {  // a vector allocates with rebind<its element>: this allocator itself
    using other = std::conditional_t<std::is_same_v<U, std::byte>, ByteAllocator, std::allocator<U>>;
  };
  ByteAllocator() = default;
  template <typename U>
  ByteAllocator(const std::allocator<U>&) {}
  void construct(std::byte* p) { ::new (static_cast<void*>(p)) std::byte; }
  void construct(std::byte* p, std::byte value) { ::new (static_cast<void*>(p)) std::byte(value); }
};
}  // namespace detail

class Tensor {
 public:
  Tensor() = default;
  Tensor(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(const Tensor& other);
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor() = default;
  // Zero-filled tensor. The shape must be valid (no negative dim, at most 2^52 bytes):
  // anything else is a programming error and aborts. Sizes from a file or a model go
  // through create() instead.
  Tensor(DType dtype, Shape shape);
  // Zero-filled tensor, or INVALID_ARGUMENT for a negative dim or a size beyond 2^52
  // bytes, or RESOURCE_EXHAUSTED when `max_bytes` (or the machine) cannot hold it.
  static Result<Tensor> create(DType dtype, Shape shape, int64_t max_bytes = int64_t(1) << 52);
  // A tensor whose bytes are unspecified, for a caller that writes every one of them next
  // (a run's output being downloaded). The shape must be valid, as for the constructor.
  static Tensor for_overwrite(DType dtype, Shape shape);

  // Copies `data` (row-major); the byte count must match dtype and shape.
  static Result<Tensor> from_bytes(DType dtype, Shape shape, std::span<const std::byte> data);
  // A view of `byte_size` bytes at `data` as dtype and shape (dense, row-major), which
  // must match exactly; INVALID_ARGUMENT otherwise, or for a null `data` with bytes. The
  // lifetime rule above applies.
  static Result<Tensor> borrow(DType dtype, Shape shape, void* data, size_t byte_size);
  // An owning tensor whose bytes are `buffer`'s first ones (unspecified, as for_overwrite's);
  // the buffer must hold at least dtype and shape's bytes (INVALID_ARGUMENT otherwise).
  static Result<Tensor> adopt(DType dtype, Shape shape, HostBuffer buffer);

  template <typename T>
  static Tensor from_values(DType dtype, Shape shape, std::span<const T> values) {
    Tensor t = for_overwrite(dtype, std::move(shape));
    if (!t.data_.empty()) std::memcpy(t.data_.data(), values.data(), t.data_.size());
    return t;
  }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return int64_t(shape_.size()); }
  int64_t num_elements() const;
  size_t byte_size() const { return borrowed_ ? borrowed_size_ : data_.size(); }
  bool owns_bytes() const { return borrowed_ == nullptr || adopted_.data() != nullptr; }
  // Whether this tensor has exactly this dtype and shape, with its bytes (what a caller's
  // output tensor must be for a run to write into it).
  bool has_layout(DType dtype, const Shape& shape) const;

  std::byte* bytes() { return borrowed_ ? borrowed_ : data_.data(); }
  const std::byte* bytes() const { return borrowed_ ? borrowed_ : data_.data(); }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes());
  }

  // Element i (row-major) converted to double / int64; any dtype. A u64 above INT64_MAX
  // comes back from element_as_int as its bit pattern (negative), which is how the
  // reference holds u64 values.
  double element_as_double(int64_t i) const;
  int64_t element_as_int(int64_t i) const;

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::vector<std::byte, detail::ByteAllocator> data_;
  std::byte* borrowed_ = nullptr;  // not null: the caller's bytes (or adopted_'s), not data_
  size_t borrowed_size_ = 0;
  HostBuffer adopted_;  // holds borrowed_'s memory when the tensor adopted it
};

// "[2, 3, 4]" and "2x3x4" (a scalar: "[]", "scalar"), for messages (src/base/shape.cc).
std::string shape_to_string(std::span<const int64_t> sizes);
std::string shape_to_dims(std::span<const int64_t> sizes);

// Converts a floating tensor to another floating dtype (round to nearest even), or
// returns it unchanged when the dtype already matches (src/passes/lower_precision.cc).
Result<Tensor> convert_float_tensor(const Tensor& tensor, DType to);

}  // namespace strider
