#include "memory/tensor_view.h"

#include "base/checked_math.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "base/check.h"

namespace strider {

std::string_view storage_mode_name(StorageMode mode) {
  switch (mode) {
    case StorageMode::kDevice: return "device";
    case StorageMode::kUnified: return "unified";
    case StorageMode::kHost: return "host";
  }
  return "unknown";
}

std::optional<StorageMode> parse_storage_mode(std::string_view text) {
  for (StorageMode mode : {StorageMode::kDevice, StorageMode::kUnified, StorageMode::kHost})
    if (text == storage_mode_name(mode)) return mode;
  return std::nullopt;
}

std::string_view layout_name(Layout layout) {
  switch (layout) {
    case Layout::kNchw: return "nchw";
    case Layout::kNhwc: return "nhwc";
    case Layout::kAuto: return "auto";
  }
  return "unknown";
}

std::optional<Layout> parse_layout(std::string_view text) {
  for (Layout layout : {Layout::kNchw, Layout::kNhwc, Layout::kAuto})
    if (text == layout_name(layout)) return layout;
  return std::nullopt;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (sizes[i] == 0) return true;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

std::byte* TensorView::host_data() const {
  STRIDER_CHECK(allocation != nullptr && allocation->host_accessible(),
                "host access to a view of non-host memory");
  return allocation->address() + byte_offset;
}

std::string TensorView::to_string() const {
  return fmt::format("{}+{:#x} {}{} strides {}", allocation ? allocation->label() : "<none>",
                     byte_offset, dtype_name(dtype), shape_to_string(sizes),
                     shape_to_string(strides));
}

std::optional<ByteRange> checked_footprint(const TensorView& view) {
  if (view.sizes.size() != view.strides.size()) return std::nullopt;
  for (int64_t d : view.sizes)
    if (d < 0) return std::nullopt;
  for (int64_t d : view.sizes)
    if (d == 0) return ByteRange{view.byte_offset, view.byte_offset};
  CheckedInt low = 0, high = 0;
  for (size_t i = 0; i < view.sizes.size(); ++i) {
    CheckedInt extent = (CheckedInt(view.sizes[i]) - 1) * view.strides[i];
    if (!extent.ok()) return std::nullopt;
    if (extent.value() < 0) low += extent;
    else high += extent;
  }
  int64_t element = dtype_size(view.dtype);
  CheckedInt begin = CheckedInt(view.byte_offset) + low * element;
  CheckedInt end = CheckedInt(view.byte_offset) + (high + 1) * element;
  if (!begin.ok() || !end.ok()) return std::nullopt;
  return ByteRange{begin.value(), end.value()};
}

ByteRange footprint(const TensorView& view) {
  if (view.num_elements() == 0) return {view.byte_offset, view.byte_offset};
  int64_t low = 0;
  int64_t high = 0;
  for (size_t i = 0; i < view.sizes.size(); ++i) {
    int64_t extent = (view.sizes[i] - 1) * view.strides[i];
    if (extent < 0) low += extent;
    else high += extent;
  }
  int64_t element = dtype_size(view.dtype);
  return {view.byte_offset + low * element, view.byte_offset + (high + 1) * element};
}

bool is_packed(const TensorView& view) {
  int64_t count = view.num_elements();
  if (count == 0) return true;
  for (size_t d = 0; d < view.sizes.size(); ++d)
    if (view.sizes[d] > 1 && view.strides[d] <= 0) return false;
  ByteRange range = footprint(view);
  return range.end - range.begin == count * dtype_size(view.dtype);
}

bool same_view(const TensorView& a, const TensorView& b) {
  return a.allocation == b.allocation && a.byte_offset == b.byte_offset && a.dtype == b.dtype &&
         a.sizes == b.sizes && a.strides == b.strides;
}

namespace {

// Views with equal positive strides whose offsets differ by `delta` elements overlap iff
// delta = sum_d k_d * stride_d for integers -(size_b_d - 1) <= k_d <= size_a_d - 1. A
// depth-first search over the dims, largest stride first, keeps only the k_d whose
// remainder the smaller strides can still reach; for the lattices views come from (slices
// of one tensor) that leaves a handful of candidates per dim.
struct OverlapSearch {
  std::vector<int64_t> stride, low, high;  // per dim, largest stride first
  std::vector<int64_t> reach_low, reach_high;  // sums over the dims after each one
  int64_t budget = 100000;                  // visits before giving up (conservatively)

  bool found(size_t d, int64_t delta) {
    if (--budget < 0) return true;
    if (d == stride.size()) return delta == 0;
    int64_t s = stride[d];
    auto floor_div = [](int64_t x, int64_t y) { return x >= 0 ? x / y : -((-x + y - 1) / y); };
    int64_t k_min = std::max(low[d], -floor_div(-(delta - reach_high[d + 1]), s));
    int64_t k_max = std::min(high[d], floor_div(delta - reach_low[d + 1], s));
    for (int64_t k = k_min; k <= k_max; ++k)
      if (found(d + 1, delta - k * s)) return true;
    return false;
  }
};

bool equal_stride_overlap(const TensorView& a, const TensorView& b, int64_t delta) {
  std::vector<size_t> order;
  for (size_t d = 0; d < a.sizes.size(); ++d)
    if (a.sizes[d] > 1 || b.sizes[d] > 1) order.push_back(d);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return a.strides[x] > a.strides[y]; });
  OverlapSearch search;
  for (size_t d : order) {
    search.stride.push_back(a.strides[d]);
    search.low.push_back(-(b.sizes[d] - 1));
    search.high.push_back(a.sizes[d] - 1);
  }
  size_t n = order.size();
  search.reach_low.assign(n + 1, 0);
  search.reach_high.assign(n + 1, 0);
  for (size_t d = n; d-- > 0;) {
    search.reach_low[d] = search.reach_low[d + 1] + search.low[d] * search.stride[d];
    search.reach_high[d] = search.reach_high[d + 1] + search.high[d] * search.stride[d];
  }
  return search.found(0, delta);
}

}  // namespace

bool may_overlap(const TensorView& a, const TensorView& b) {
  if (a.allocation != b.allocation || a.num_elements() == 0 || b.num_elements() == 0) return false;
  if (!footprint(a).overlaps(footprint(b))) return false;
  int64_t element = dtype_size(a.dtype);
  bool comparable = a.dtype == b.dtype && a.strides == b.strides && a.sizes.size() == b.sizes.size() &&
                    (b.byte_offset - a.byte_offset) % element == 0;
  for (size_t d = 0; comparable && d < a.strides.size(); ++d)
    comparable = a.strides[d] > 0 || (a.sizes[d] == 1 && b.sizes[d] == 1);
  if (!comparable) return true;
  return equal_stride_overlap(a, b, (b.byte_offset - a.byte_offset) / element);
}

Result<TensorView> make_view(const Allocation& allocation, int64_t byte_offset, DType dtype,
                             Shape sizes, Strides strides, std::string_view what) {
  if (sizes.size() != strides.size())
    return invalid_argument(fmt::format("{}: {} sizes but {} strides", what, sizes.size(),
                                        strides.size()));
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] < 0)
      return invalid_argument(fmt::format("{}: negative size {} in dim {}", what, sizes[i], i));
  TensorView view{&allocation, byte_offset, dtype, std::move(sizes), std::move(strides)};
  std::optional<ByteRange> checked = checked_footprint(view);
  if (!checked)
    return out_of_range(fmt::format("{} {}{} strides {} at offset {:#x}: its byte range overflows 64 bits", what,
                                    dtype_name(dtype), shape_to_string(view.sizes), shape_to_string(view.strides),
                                    byte_offset));
  ByteRange range = *checked;
  if (range.begin < 0 || range.end > allocation.size() || byte_offset < 0 ||
      byte_offset > allocation.size()) {
    return out_of_range(fmt::format(
        "{} {}{} strides {} at offset {:#x} covers bytes [{:#x}, {:#x}) outside allocation "
        "'{}' of {} bytes",
        what, dtype_name(dtype), shape_to_string(view.sizes), shape_to_string(view.strides),
        byte_offset, range.begin, range.end, allocation.label(), allocation.size()));
  }
  return view;
}

Result<TensorView> make_dense_view(const Allocation& allocation, int64_t byte_offset, DType dtype,
                                   Shape sizes, std::string_view what) {
  Strides strides = contiguous_strides(sizes);
  return make_view(allocation, byte_offset, dtype, std::move(sizes), std::move(strides), what);
}

Result<TensorView> reinterpret(const TensorView& view, Shape sizes, Strides strides,
                               int64_t offset_increment, std::string_view what) {
  STRIDER_CHECK(view.allocation != nullptr, "reinterpret of a view without allocation");
  int64_t offset = view.byte_offset + offset_increment * dtype_size(view.dtype);
  return make_view(*view.allocation, offset, view.dtype, std::move(sizes), std::move(strides),
                   what);
}

Result<TensorView> slice_view(const TensorView& view, int64_t axis, int64_t start, int64_t stop,
                              int64_t step) {
  if (axis < 0 || axis >= view.rank() || step == 0)
    return invalid_argument(fmt::format("slice of {}: bad axis {} or step {}", view.to_string(),
                                        axis, step));
  int64_t count = 0;
  if (step > 0 && stop > start) count = (stop - start - 1) / step + 1;
  if (step < 0 && start > stop) count = (start - stop - 1) / (step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step) + 1;
  return slice_count_view(view, axis, start, step, count);
}

Result<TensorView> slice_count_view(const TensorView& view, int64_t axis, int64_t start, int64_t step, int64_t count) {
  if (axis < 0 || axis >= view.rank() || step == 0 || count < 0)
    return invalid_argument(fmt::format("slice of {}: bad axis {}, step {} or count {}", view.to_string(), axis, step,
                                        count));
  Shape sizes = view.sizes;
  Strides strides = view.strides;
  sizes[axis] = count;
  // One element or none: the axis's stride is never used, so a step near INT64_MAX (legal
  // in ONNX) keeps the old stride instead of overflowing.
  if (count > 1) {
    auto stride = checked_mul(view.strides[axis], step);
    if (!stride) return out_of_range(fmt::format("slice of {}: step {} overflows the stride", view.to_string(), step));
    strides[axis] = *stride;
  }
  auto increment = checked_mul(count == 0 ? 0 : start, view.strides[axis]);
  if (!increment) return out_of_range(fmt::format("slice of {}: start {} overflows the offset", view.to_string(), start));
  return reinterpret(view, std::move(sizes), std::move(strides), *increment, "slice");
}

Result<TensorView> permute_view(const TensorView& view, std::span<const int64_t> perm) {
  if (int64_t(perm.size()) != view.rank())
    return invalid_argument(fmt::format("permutation of rank {} for a view of rank {}",
                                        perm.size(), view.rank()));
  std::vector<bool> seen(perm.size(), false);
  Shape sizes(perm.size());
  Strides strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= view.rank() || seen[perm[i]])
      return invalid_argument(fmt::format("bad permutation {}", shape_to_string(perm)));
    seen[perm[i]] = true;
    sizes[i] = view.sizes[perm[i]];
    strides[i] = view.strides[perm[i]];
  }
  return reinterpret(view, std::move(sizes), std::move(strides), 0, "transpose");
}

std::optional<TensorView> reshape_view(const TensorView& view, std::span<const int64_t> sizes) {
  if (num_elements(sizes) != view.num_elements()) return std::nullopt;
  TensorView out = view;
  out.sizes.assign(sizes.begin(), sizes.end());
  if (view.num_elements() == 0) {
    out.strides = contiguous_strides(sizes);
    return out;
  }
  // Walk the old dimensions in chunks whose elements are evenly spaced (each dim's stride
  // equals the next dim's stride times its size); each chunk can be re-split freely.
  out.strides.assign(sizes.size(), 0);
  int64_t old_dim = view.rank() - 1;
  int64_t new_dim = int64_t(sizes.size()) - 1;
  while (old_dim >= 0 || new_dim >= 0) {
    // Skip size-1 dims of the old view: their stride is meaningless.
    while (old_dim >= 0 && view.sizes[old_dim] == 1) --old_dim;
    if (old_dim < 0) break;
    int64_t chunk_stride = view.strides[old_dim];
    int64_t chunk_size = view.sizes[old_dim];
    for (--old_dim; old_dim >= 0; --old_dim) {
      if (view.sizes[old_dim] == 1) continue;
      if (view.strides[old_dim] != chunk_stride * chunk_size) break;
      chunk_size *= view.sizes[old_dim];
    }
    // Fill new dims (innermost first) until they hold exactly chunk_size elements.
    int64_t filled = 1;
    int64_t stride = chunk_stride;
    while (filled < chunk_size) {
      if (new_dim < 0) return std::nullopt;
      out.strides[new_dim] = stride;
      stride *= sizes[new_dim];
      filled *= sizes[new_dim];
      --new_dim;
    }
    if (filled != chunk_size) return std::nullopt;
  }
  // Remaining new dims must be size 1; give them a plausible stride.
  for (; new_dim >= 0; --new_dim) {
    if (sizes[new_dim] != 1) return std::nullopt;
    out.strides[new_dim] = new_dim + 1 < int64_t(sizes.size())
                               ? out.strides[new_dim + 1] * sizes[new_dim + 1]
                               : 1;
  }
  return out;
}

Result<TensorView> broadcast_view(const TensorView& view, std::span<const int64_t> sizes) {
  if (int64_t(sizes.size()) < view.rank())
    return invalid_argument(fmt::format("cannot broadcast {} to {}", shape_to_string(view.sizes),
                                        shape_to_string(sizes)));
  size_t lead = sizes.size() - view.sizes.size();
  Strides strides(sizes.size(), 0);
  for (size_t i = 0; i < view.sizes.size(); ++i) {
    int64_t from = view.sizes[i];
    int64_t to = sizes[lead + i];
    if (from == to) strides[lead + i] = view.strides[i];
    else if (from != 1)
      return invalid_argument(fmt::format("cannot broadcast {} to {}",
                                          shape_to_string(view.sizes), shape_to_string(sizes)));
  }
  return reinterpret(view, Shape(sizes.begin(), sizes.end()), std::move(strides), 0, "broadcast");
}

}  // namespace strider

namespace strider {

Status check_inside_allocation(const TensorView& view, std::string_view what) {
  if (view.allocation == nullptr) return internal_error(fmt::format("{}: a view without an allocation", what));
  return make_view(*view.allocation, view.byte_offset, view.dtype, view.sizes, view.strides, what).status();
}

Strides dense_strides_in_order_of(const Shape& sizes, const Strides& like) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return std::abs(like[a]) > std::abs(like[b]); });
  Strides strides(sizes.size(), 1);
  int64_t step = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = step;
    step *= std::max<int64_t>(sizes[*it], 1);
  }
  return strides;
}

}  // namespace strider
