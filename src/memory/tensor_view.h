// TensorView: {allocation, byte_offset, dtype, sizes, strides}, the only way kernels see
// memory.
//
// Invariants (checked when a view is made, never afterwards):
// - `allocation` is the root allocation and `byte_offset` is absolute: a view of a view is
//   flattened when it is made, so there is no chain of parents to walk.
// - The whole footprint of the view lies inside the allocation; making a view that
//   would leave it is an OUT_OF_RANGE error naming the view and the allocation.
// - Strides are in elements, outermost first (ONNX order). A stride may be negative (a
//   reversed slice) or zero (broadcast).
//
// Views never own memory and never copy: every function here is metadata only. A view of
// zero elements has an empty footprint and is valid anywhere in [0, allocation size].
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/shape.h"
#include "memory/allocation.h"
#include "strider/dtype.h"
#include "strider/status.h"

namespace strider {

struct TensorView {
  const Allocation* allocation = nullptr;
  int64_t byte_offset = 0;
  DType dtype = DType::kF32;
  Shape sizes;
  Strides strides;

  int64_t rank() const { return int64_t(sizes.size()); }
  int64_t num_elements() const { return strider::num_elements(sizes); }
  // True when the view is row-major dense (size-1 dimensions may have any stride).
  bool is_contiguous() const;
  // Host address of element [0, ..., 0]; only for host-accessible allocations.
  std::byte* host_data() const;
  template <typename T>
  T* host_data_as() const {
    return reinterpret_cast<T*>(host_data());
  }
  // "arena#0+0x40 f32[2, 8] strides [16, 1]"
  std::string to_string() const;
};

// Half-open byte range [begin, end) inside one allocation.
struct ByteRange {
  int64_t begin = 0;
  int64_t end = 0;
  bool empty() const { return end <= begin; }
  bool overlaps(const ByteRange& other) const {
    return !empty() && !other.empty() && begin < other.end && other.begin < end;
  }
};

// The smallest byte range that holds every element of the view (conservative for
// non-dense views: the gaps between elements are inside it).
ByteRange footprint(const TensorView& view);
// The same in checked arithmetic: nullopt when a negative size, mismatched ranks or an
// overflow make it undefined (footprint() itself is for views already made).
std::optional<ByteRange> checked_footprint(const TensorView& view);
// OUT_OF_RANGE unless `view` has an allocation and lies wholly inside it (what make_view
// checked when it was made; kernels check it again at creation).
Status check_inside_allocation(const TensorView& view, std::string_view what);

// True when the view's elements fill one contiguous byte range with no gaps and no
// element twice (positive strides, any order): what a kernel needing dense memory wants.
bool is_packed(const TensorView& view);
// True when both views name the same elements of the same allocation in the same order.
bool same_view(const TensorView& a, const TensorView& b);
// False only when no byte of `a` can be a byte of `b`. Exact for views of one allocation
// with equal strides (slices of one concat interleave in memory but do not overlap);
// otherwise it compares footprints, which may report an overlap that is not there.
bool may_overlap(const TensorView& a, const TensorView& b);

// Dense strides over `sizes` whose memory order is that of `like` (the largest |stride|
// outermost; ties keep ONNX order, so a row-major view gets row-major strides).
Strides dense_strides_in_order_of(const Shape& sizes, const Strides& like);

// Makes a view after checking that it lies inside `allocation`. `what` names the value in
// the error ("value 'x.3'").
Result<TensorView> make_view(const Allocation& allocation, int64_t byte_offset, DType dtype,
                             Shape sizes, Strides strides, std::string_view what);
Result<TensorView> make_dense_view(const Allocation& allocation, int64_t byte_offset,
                                   DType dtype, Shape sizes, std::string_view what);

// The AOTInductor contract: a new view of the same allocation whose offset is the old
// offset plus `offset_increment` elements. Metadata only, bounds-checked, never copies.
Result<TensorView> reinterpret(const TensorView& view, Shape sizes, Strides strides,
                               int64_t offset_increment, std::string_view what = "view");

// View algebra, each a reinterpret of its input.
// Elements start, start+step, ... stopping before `stop` along `axis`; step may be
// negative (then start > stop). start/stop must already be clamped to valid positions.
Result<TensorView> slice_view(const TensorView& view, int64_t axis, int64_t start, int64_t stop,
                              int64_t step);
// `count` elements start, start+step, ... along `axis` (what a resolved Slice gives; no
// stop to compute, so steps near INT64_MAX cannot overflow).
Result<TensorView> slice_count_view(const TensorView& view, int64_t axis, int64_t start, int64_t step, int64_t count);
// Output dim i is input dim perm[i].
Result<TensorView> permute_view(const TensorView& view, std::span<const int64_t> perm);
// Same elements in row-major order under new sizes, if the strides allow it without a
// copy; nullopt when they do not (then the caller must Materialize).
std::optional<TensorView> reshape_view(const TensorView& view, std::span<const int64_t> sizes);
// numpy broadcast to `sizes` with stride 0 on broadcast dimensions; error if the shapes do
// not broadcast.
Result<TensorView> broadcast_view(const TensorView& view, std::span<const int64_t> sizes);

}  // namespace strider
