// GridSample, AffineGrid, RoiAlign and DeformConv on the CPU, over views of any strides. The sampling
// math is ops/grid_sample.h's and ops/roi_align.h's; here only the loops: the taps of a
// point (or the samples of a region) are found once and reused for every channel.
#include <fmt/format.h>

#include <array>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "ops/function_ops.h"
#include "ops/grid_sample.h"
#include "ops/roi_align.h"

namespace strider::cpu {
namespace {

using KernelPtr = std::unique_ptr<Kernel>;

// Element `index` (row-major over view.sizes) of a float view, as double.
double load_float(const TensorView& view, int64_t offset) {
  return dispatch_dtype(view.dtype, [&]<typename T>() -> double {
    if constexpr (is_float_storage_v<T>) return double(load(view.host_data_as<T>()[offset]));
    else return 0.0;
  });
}

// The element offset (in elements) of `index` (row-major over `sizes`) in a strided view.
int64_t offset_of(const Shape& sizes, const Strides& strides, int64_t index) {
  int64_t offset = 0;
  for (int64_t d = int64_t(sizes.size()); d-- > 0;) {
    offset += (index % sizes[size_t(d)]) * strides[size_t(d)];
    index /= sizes[size_t(d)];
  }
  return offset;
}

template <typename T>
class GridSampleKernel final : public Kernel {
 public:
  GridSampleKernel(GridSampleParams p, TensorView x, TensorView grid, TensorView y)
      : p_(p), x_(std::move(x)), grid_(std::move(grid)), y_(std::move(y)) {}

  Status run(const QueueContext&) override {
    const int r = p_.spatial_rank;
    const int64_t batch = x_.sizes[0], channels = x_.sizes[1];
    Shape points_shape(y_.sizes.begin() + 2, y_.sizes.end());
    Strides y_point_strides(y_.strides.begin() + 2, y_.strides.end());
    Shape grid_points(grid_.sizes.begin() + 1, grid_.sizes.end() - 1);
    Strides grid_strides(grid_.strides.begin() + 1, grid_.strides.end() - 1);
    const int64_t points = num_elements(points_shape);
    const T* x = x_.host_data_as<T>();
    T* y = y_.host_data_as<T>();
    std::array<grid_sample::AxisTaps, 3> taps;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t q = 0; q < points; ++q) {
        const int64_t g = n * grid_.strides[0] + offset_of(grid_points, grid_strides, q);
        for (int a = 0; a < r; ++a) {  // grid's coordinate k is for spatial axis r-1-k
          const double normalized = load_float(grid_, g + (r - 1 - a) * grid_.strides.back());
          taps[size_t(a)] = grid_sample::axis_taps(normalized, x_.sizes[size_t(2 + a)], p_);
        }
        const int64_t y_at = n * y_.strides[0] + offset_of(points_shape, y_point_strides, q);
        for (int64_t c = 0; c < channels; ++c)
          y[y_at + c * y_.strides[1]] = store<T>(sample(x + n * x_.strides[0] + c * x_.strides[1], taps, 0, 1.0));
      }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:grid_sample"; }

 private:
  // The sum over the taps of axes a.. of weight products times X.
  double sample(const T* at, const std::array<grid_sample::AxisTaps, 3>& taps, int a, double weight) const {
    // (spatial_rank is at most 3: the bound is said again for the compiler, which unrolls this.)
    if (a == p_.spatial_rank || a >= int(taps.size())) return weight * double(load(*at));
    const grid_sample::AxisTaps& t = taps[size_t(a)];
    double sum = 0;
    for (int k = 0; k < t.count; ++k) {
      if (t.index[k] == grid_sample::kOutside || t.weight[k] == 0) continue;
      sum += sample(at + t.index[k] * x_.strides[size_t(2 + a)], taps, a + 1, weight * t.weight[k]);
    }
    return sum;
  }

  GridSampleParams p_;
  TensorView x_, grid_, y_;
};

Status check_host(const KernelRequest& r) {
  for (const TensorView& v : r.inputs)
    if (v.allocation && !v.allocation->host_accessible()) return invalid_argument("grid kernels need host memory");
  if (!r.outputs[0].allocation->host_accessible()) return invalid_argument("grid kernels need host memory");
  return Status::ok();
}

Result<KernelPtr> make_grid_sample(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(GridSampleParams p, resolve_grid_sample(NodeInputs(r.graph, r.node)));
  STRIDER_RETURN_IF_ERROR(check_host(r));
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (!is_float_storage_v<T>) {
      return unsupported(fmt::format("GridSample on {}", dtype_name(r.inputs[0].dtype)));
    } else {
      return KernelPtr(new GridSampleKernel<T>(p, r.inputs[0], r.inputs[1], r.outputs[0]));
    }
  });
}

// AffineGrid: grid[n, point] = theta[n] @ (x, y[, z], 1) over the base grid of each axis
// (align_corners: -1 .. 1 through the pixel centres; else the centres of d cells in [-1, 1]).
// theta may be of another float type than the grid: a bf16 session keeps it f32 (a float
// parameter, OpSchema::float_parameter_inputs) while the grid is bf16, so T is the grid's
// and theta is read through its own type (reading f32 theta as T once wrote f32 elements
// past a bf16 grid, found by the fuzzer).
template <typename T>
class AffineGridKernel final : public Kernel {
 public:
  AffineGridKernel(bool align, TensorView theta, TensorView grid) : align_(align), theta_(std::move(theta)), grid_(std::move(grid)) {}

  Status run(const QueueContext&) override {
    const int r = int(grid_.sizes.back());
    const Shape points_shape(grid_.sizes.begin() + 1, grid_.sizes.end() - 1);
    const Strides point_strides(grid_.strides.begin() + 1, grid_.strides.end() - 1);
    T* out = grid_.host_data_as<T>();
    const int64_t points = num_elements(points_shape);
    for (int64_t n = 0; n < grid_.sizes[0]; ++n) {
      double matrix[3][4] = {};
      for (int k = 0; k < r; ++k)
        for (int j = 0; j <= r; ++j)
          matrix[k][j] = load_float(theta_, n * theta_.strides[0] + k * theta_.strides[1] + j * theta_.strides[2]);
      for (int64_t q = 0; q < points; ++q) {
        double base[4] = {0, 0, 0, 1};  // x, y, z (the last spatial axis first), then 1
        int64_t rest = q;
        for (int a = r; a-- > 0;) {  // spatial axis a of the point; coordinate r-1-a
          const int64_t size = points_shape[size_t(a)], i = rest % size;
          rest /= size;
          base[r - 1 - a] = align_ ? (size > 1 ? -1.0 + 2.0 * double(i) / double(size - 1) : 0.0)
                                   : (2.0 * double(i) + 1.0) / double(size) - 1.0;
        }
        base[r] = 1;
        const int64_t at = n * grid_.strides[0] + offset_of(points_shape, point_strides, q);
        for (int k = 0; k < r; ++k) {
          double sum = 0;
          for (int j = 0; j <= r; ++j) sum += matrix[k][j] * base[j];
          out[at + k * grid_.strides.back()] = store<T>(sum);
        }
      }
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:affine_grid"; }

 private:
  bool align_;
  TensorView theta_, grid_;
};

Result<KernelPtr> make_affine_grid(const KernelRequest& r) {
  STRIDER_RETURN_IF_ERROR(check_host(r));
  STRIDER_ASSIGN_OR_RETURN(int64_t align, r.node.attributes.get_int("align_corners", 0));
  if (!is_floating(r.inputs[0].dtype) || is_small_type(r.inputs[0].dtype))
    return unsupported(fmt::format("AffineGrid of {} theta", dtype_name(r.inputs[0].dtype)));
  if (r.outputs[0].sizes.size() < 3 || r.outputs[0].sizes.back() > 3)
    return internal_error(fmt::format("AffineGrid output of shape {}", shape_to_string(r.outputs[0].sizes)));
  return dispatch_dtype(r.outputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (!is_float_storage_v<T>) {
      return unsupported(fmt::format("AffineGrid to {}", dtype_name(r.outputs[0].dtype)));
    } else {
      return KernelPtr(new AffineGridKernel<T>(align != 0, r.inputs[0], r.outputs[0]));
    }
  });
}

template <typename T>
class RoiAlignKernel final : public Kernel {
 public:
  RoiAlignKernel(RoiAlignParams p, TensorView x, TensorView rois, TensorView indices, TensorView y)
      : p_(std::move(p)), x_(std::move(x)), rois_(std::move(rois)), indices_(std::move(indices)), y_(std::move(y)) {}

  Status run(const QueueContext&) override {
    const int64_t height = x_.sizes[2], width = x_.sizes[3], channels = x_.sizes[1];
    const T* x = x_.host_data_as<T>();
    T* y = y_.host_data_as<T>();
    for (int64_t r = 0; r < rois_.sizes[0]; ++r) {
      double box[4];
      for (int k = 0; k < 4; ++k) box[k] = load_float(rois_, r * rois_.strides[0] + k * rois_.strides[1]);
      const int64_t batch = load_index(r);
      if (batch < 0 || batch >= x_.sizes[0])
        return invalid_argument(fmt::format("RoiAlign: batch index {} of region {} is outside [0, {})", batch, r, x_.sizes[0]));
      STRIDER_ASSIGN_OR_RETURN(roi_align::RegionSamples s, roi_align::region_samples(p_, box, height, width));
      const int64_t per_bin = s.grid_h * s.grid_w;
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = x + batch * x_.strides[0] + c * x_.strides[1];
        for (int64_t bin = 0; bin < p_.out_h * p_.out_w; ++bin) {
          double value = 0;
          for (int64_t k = 0; k < per_bin; ++k) {
            const roi_align::Sample& sample = s.samples[size_t(bin * per_bin + k)];
            double corners[4];
            for (int j = 0; j < 4; ++j) corners[j] = sample.weight[j] * pixel(plane, sample.offset[j], width);
            if (p_.average) value += corners[0] + corners[1] + corners[2] + corners[3];
            else {
              const double largest = std::max(std::max(corners[0], corners[1]), std::max(corners[2], corners[3]));
              value = k == 0 ? largest : std::max(value, largest);
            }
          }
          if (p_.average) value /= double(std::max<int64_t>(per_bin, 1));
          y[r * y_.strides[0] + c * y_.strides[1] + (bin / p_.out_w) * y_.strides[2] + (bin % p_.out_w) * y_.strides[3]] = store<T>(value);
        }
      }
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:roi_align"; }

 private:
  double pixel(const T* plane, int64_t offset, int64_t width) const {
    return double(load(plane[(offset / width) * x_.strides[2] + (offset % width) * x_.strides[3]]));
  }
  int64_t load_index(int64_t r) const {
    const int64_t at = r * indices_.strides[0];
    return indices_.dtype == DType::kI32 ? int64_t(indices_.host_data_as<int32_t>()[at]) : indices_.host_data_as<int64_t>()[at];
  }

  RoiAlignParams p_;
  TensorView x_, rois_, indices_, y_;
};

Result<KernelPtr> make_roi_align(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(RoiAlignParams p, resolve_roi_align(NodeInputs(r.graph, r.node)));
  STRIDER_RETURN_IF_ERROR(check_host(r));
  if (r.inputs[2].dtype != DType::kI64 && r.inputs[2].dtype != DType::kI32)
    return unsupported(fmt::format("RoiAlign batch_indices of {}", dtype_name(r.inputs[2].dtype)));
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (!is_float_storage_v<T>) {
      return unsupported(fmt::format("RoiAlign on {}", dtype_name(r.inputs[0].dtype)));
    } else {
      return KernelPtr(new RoiAlignKernel<T>(p, r.inputs[0], r.inputs[1], r.inputs[2], r.outputs[0]));
    }
  });
}

// DeformConv: per output position, each tap of each input channel is read bilinearly at
// its regular place moved by the offset of its offset group (zero outside the image, a
// corner outside reading 0), scaled by the mask, and the taps are contracted with W per
// group. Naive loops over strided views (the reference's order of work, in double).
template <typename T>
class DeformConvKernel final : public Kernel {
 public:
  DeformConvKernel(DeformConvParams p, std::vector<TensorView> in, TensorView y) : p_(std::move(p)), in_(std::move(in)), y_(std::move(y)) {}

  Status run(const QueueContext&) override {
    const TensorView &x = in_[0], &w = in_[1], &offset = in_[2];
    const int64_t channels = x.sizes[1], height = x.sizes[2], width = x.sizes[3];
    const int64_t kh = p_.kernel[0], kw = p_.kernel[1], taps = kh * kw;
    const int64_t out_c = y_.sizes[1], out_h = y_.sizes[2], out_w = y_.sizes[3];
    const int64_t group_in = channels / p_.group, group_out = out_c / p_.group, per_offset_group = channels / p_.offset_group;
    std::vector<double> columns(size_t(channels * taps));
    for (int64_t n = 0; n < x.sizes[0]; ++n)
      for (int64_t oh = 0; oh < out_h; ++oh)
        for (int64_t ow = 0; ow < out_w; ++ow) {
          for (int64_t c = 0; c < channels; ++c) {
            const int64_t g = c / per_offset_group;
            for (int64_t t = 0; t < taps; ++t) {
              const int64_t i = t / kw, j = t % kw;
              const double dy = at(offset, {n, (g * taps + t) * 2, oh, ow}), dx = at(offset, {n, (g * taps + t) * 2 + 1, oh, ow});
              const double h = double(oh * p_.strides[0] - p_.pads[0] + i * p_.dilations[0]) + dy;
              const double v = double(ow * p_.strides[1] - p_.pads[1] + j * p_.dilations[1]) + dx;
              double value = bilinear(x, n, c, h, v, height, width);
              if (p_.has_mask) value *= at(in_[4], {n, g * taps + t, oh, ow});
              columns[size_t(c * taps + t)] = value;
            }
          }
          for (int64_t oc = 0; oc < out_c; ++oc) {
            const int64_t first = (oc / group_out) * group_in;
            double sum = p_.has_bias ? at(in_[3], {oc}) : 0.0;
            for (int64_t c = 0; c < group_in; ++c)
              for (int64_t t = 0; t < taps; ++t) sum += at(w, {oc, c, t / kw, t % kw}) * columns[size_t((first + c) * taps + t)];
            y_.host_data_as<T>()[n * y_.strides[0] + oc * y_.strides[1] + oh * y_.strides[2] + ow * y_.strides[3]] = store<T>(sum);
          }
        }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:deform_conv"; }

 private:
  static double at(const TensorView& v, std::initializer_list<int64_t> index) {
    int64_t offset = 0, d = 0;
    for (int64_t i : index) offset += i * v.strides[size_t(d++)];
    return double(load(v.host_data_as<T>()[offset]));
  }
  // X[n, c] at (h, w): 0 at or beyond one pixel outside; corners outside read 0.
  static double bilinear(const TensorView& x, int64_t n, int64_t c, double h, double w, int64_t height, int64_t width) {
    if (!(h > -1 && w > -1 && h < double(height) && w < double(width))) return 0;
    const int64_t h0 = int64_t(std::floor(h)), w0 = int64_t(std::floor(w));
    const double lh = h - double(h0), lw = w - double(w0);
    double sum = 0;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        const int64_t hi = h0 + a, wi = w0 + b;
        if (hi < 0 || hi >= height || wi < 0 || wi >= width) continue;
        sum += (a ? lh : 1 - lh) * (b ? lw : 1 - lw) * at(x, {n, c, hi, wi});
      }
    return sum;
  }

  DeformConvParams p_;
  std::vector<TensorView> in_;
  TensorView y_;
};

Result<KernelPtr> make_deform_conv(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(DeformConvParams p, resolve_deform_conv(NodeInputs(r.graph, r.node)));
  STRIDER_RETURN_IF_ERROR(check_host(r));
  std::vector<TensorView> in = r.inputs;
  in.resize(5);
  return dispatch_dtype(r.inputs[0].dtype, [&]<typename T>() -> Result<KernelPtr> {
    if constexpr (!is_float_storage_v<T>) {
      return unsupported(fmt::format("DeformConv on {}", dtype_name(r.inputs[0].dtype)));
    } else {
      return KernelPtr(new DeformConvKernel<T>(p, in, r.outputs[0]));
    }
  });
}

}  // namespace

void register_grid_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"DeformConv", make_deform_conv});
  table.push_back({"RoiAlign", make_roi_align});
  table.push_back({"GridSample", make_grid_sample});
  table.push_back({"AffineGrid", make_affine_grid});
}

}  // namespace strider::cpu
