// GridSample (16, 20) and AffineGrid (20), in float64, written from the ONNX definitions
// (which follow PyTorch's grid_sampler): an output point unnormalizes each coordinate,
// clamps or reflects it when it falls outside the border, and interpolates the input one
// axis at a time from the outermost spatial axis in (as ONNX's own reference does),
// each pixel read through the padding mode.
#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <functional>

#include "reference/op_support.h"

namespace strider::ref {
namespace {

struct Sampling {
  std::string mode, padding;
  bool align = false;
  int rank = 0;
  Shape dims;  // X's spatial dims
};

double reflect(double x, double low, double high) {
  const double range = high - low;
  if (x < low) {
    const double dx = low - x;
    const int64_t n = int64_t(dx / range);
    const double r = dx - double(n) * range;
    return n % 2 == 0 ? low + r : high - r;
  }
  if (x > high) {
    const double dx = x - high;
    const int64_t n = int64_t(dx / range);
    const double r = dx - double(n) * range;
    return n % 2 == 0 ? high - r : low + r;
  }
  return x;
}

double low_border(const Sampling& s, int64_t) { return s.align ? 0.0 : -0.5; }
double high_border(const Sampling& s, int64_t d) { return s.align ? double(d - 1) : double(d) - 0.5; }

// The input value at integer position `index` (one per spatial axis) of the plane at
// `plane`, through the padding mode; nullopt reads as 0.
std::optional<double> pixel(const RefTensor& x, int64_t plane, const Sampling& s, const std::vector<int64_t>& index) {
  int64_t offset = 0;
  for (int a = 0; a < s.rank; ++a) {
    const int64_t d = s.dims[size_t(a)];
    int64_t i = index[size_t(a)];
    if (i < 0 || i >= d) {
      if (s.padding == "zeros") return std::nullopt;
      if (s.padding == "border") i = std::clamp<int64_t>(i, 0, d - 1);
      else i = std::clamp<int64_t>(int64_t(reflect(double(i), low_border(s, d), high_border(s, d))), 0, d - 1);
    }
    offset = offset * d + i;
  }
  return x.floats[size_t(plane + offset)];
}

void keys_cubic(double t, double* c) {
  const double a = -0.75;
  const double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
  c[0] = ((a * x0 - 5 * a) * x0 + 8 * a) * x0 - 4 * a;
  c[1] = ((a + 2) * x1 - (a + 3)) * x1 * x1 + 1;
  c[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
  c[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
}

// Interpolates along axes a.. with the positions of axes ..a fixed in `index`.
double interpolate(const RefTensor& x, int64_t plane, const Sampling& s, const std::vector<double>& coords,
                   std::vector<int64_t>& index, int a) {
  if (a == s.rank) return pixel(x, plane, s, index).value_or(0.0);
  const double c = coords[size_t(a)];
  const int64_t base = int64_t(std::floor(c));
  const double t = c - double(base);
  double weights[4];
  int first = 0, taps = 2;
  if (s.mode == "cubic") {
    keys_cubic(t, weights);
    first = -1;
    taps = 4;
  } else {
    weights[0] = 1 - t;
    weights[1] = t;
  }
  double sum = 0;
  for (int k = 0; k < taps; ++k) {
    index[size_t(a)] = base + first + k;
    sum += weights[k] * interpolate(x, plane, s, coords, index, a + 1);
  }
  return sum;
}

Result<OpOutputs> grid_sample_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* grid, ctx.input(1, "grid"));
  if (!x->is_floating() || !grid->is_floating()) return invalid_model("GridSample takes floating X and grid");
  Sampling s;
  s.rank = int(x->rank()) - 2;
  if (s.rank < 1 || grid->rank() != x->rank() || grid->shape.back() != s.rank || grid->shape[0] != x->shape[0])
    return invalid_model(fmt::format("grid {} does not fit X {}", describe(*grid), describe(*x)));
  if (ctx.opset() < 20 && s.rank != 2) return invalid_model("GridSample-16 takes 4-D inputs");
  STRIDER_ASSIGN_OR_RETURN(s.mode, ctx.attributes().get_string("mode", ctx.opset() < 20 ? "bilinear" : "linear"));
  if (s.mode == "bilinear") s.mode = "linear";
  if (s.mode == "bicubic") s.mode = "cubic";
  if (s.mode != "linear" && s.mode != "nearest" && s.mode != "cubic") return invalid_model("unknown mode " + s.mode);
  if (s.mode == "cubic" && s.rank != 2) return unsupported("cubic GridSample beyond 2-D");
  STRIDER_ASSIGN_OR_RETURN(s.padding, ctx.attributes().get_string("padding_mode", "zeros"));
  if (s.padding != "zeros" && s.padding != "border" && s.padding != "reflection")
    return invalid_model("unknown padding_mode " + s.padding);
  STRIDER_ASSIGN_OR_RETURN(int64_t align, ctx.attributes().get_int("align_corners", 0));
  s.align = align != 0;
  s.dims.assign(x->shape.begin() + 2, x->shape.end());
  Shape out_shape = {x->shape[0], x->shape[1]};
  out_shape.insert(out_shape.end(), grid->shape.begin() + 1, grid->shape.end() - 1);
  RefTensor y = RefTensor::zeros(x->dtype, out_shape);
  const int64_t batch = x->shape[0], channels = x->shape[1];
  int64_t plane_size = 1, points = 1;
  for (int64_t d : s.dims) plane_size *= d;
  for (size_t d = 2; d < out_shape.size(); ++d) points *= out_shape[d];
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t q = 0; q < points; ++q) {
      std::vector<double> coords(size_t(s.rank));
      for (int a = 0; a < s.rank; ++a) {
        const double normalized = grid->floats[size_t((n * points + q) * s.rank + (s.rank - 1 - a))];
        const double d = double(s.dims[size_t(a)]);
        double c = s.align ? (normalized + 1) / 2 * (d - 1) : ((normalized + 1) * d - 1) / 2;
        if (s.mode == "nearest") c = std::nearbyint(c);  // half to even, 3-D too (the node tests' data)
        const double low = low_border(s, s.dims[size_t(a)]), high = high_border(s, s.dims[size_t(a)]);
        if (c < low || c > high) {
          if (s.padding == "border") c = std::clamp(c, 0.0, d - 1);
          else if (s.padding == "reflection") c = reflect(c, low, high);
        }
        coords[size_t(a)] = c;
      }
      for (int64_t ch = 0; ch < channels; ++ch) {
        const int64_t plane = (n * channels + ch) * plane_size;
        std::vector<int64_t> index(size_t(s.rank));
        double value;
        if (s.mode == "nearest") {
          for (int a = 0; a < s.rank; ++a) index[size_t(a)] = int64_t(coords[size_t(a)]);
          value = pixel(*x, plane, s, index).value_or(0.0);
        } else {
          value = interpolate(*x, plane, s, coords, index, 0);
        }
        y.floats[size_t((n * channels + ch) * points + q)] = value;
      }
    }
  return OpOutputs{std::move(y)};
}

Result<OpOutputs> affine_grid_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* theta, ctx.input(0, "theta"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* size, ctx.input(1, "size"));
  if (size->num_elements() != 4 && size->num_elements() != 5) return invalid_model("size is [N, C, (D,) H, W]");
  STRIDER_RETURN_IF_ERROR(require_integer(*size, "input 1 (size)"));
  const int r = int(size->num_elements()) - 2;
  if (!theta->is_floating() || theta->shape != Shape{size->ints[0], r, r + 1})
    return invalid_model(fmt::format("theta {} is not [N, {}, {}]", describe(*theta), r, r + 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t align, ctx.attributes().get_int("align_corners", 0));
  Shape dims(size->ints.begin() + 2, size->ints.end());
  Shape out_shape = {size->ints[0]};
  out_shape.insert(out_shape.end(), dims.begin(), dims.end());
  out_shape.push_back(r);
  STRIDER_RETURN_IF_ERROR(checked_element_count(out_shape, "the grid's shape"));
  RefTensor grid = RefTensor::zeros(theta->dtype, out_shape);
  int64_t points = 1;
  for (int64_t d : dims) points *= d;
  // The base grid's coordinate along an axis of d points.
  auto base = [&](int64_t i, int64_t d) {
    if (align) return d > 1 ? -1.0 + 2.0 * double(i) / double(d - 1) : 0.0;
    return (2.0 * double(i) + 1.0) / double(d) - 1.0;
  };
  for (int64_t n = 0; n < size->ints[0]; ++n)
    for (int64_t q = 0; q < points; ++q) {
      std::vector<double> homogeneous(size_t(r + 1), 1.0);  // (x, y[, z], 1)
      int64_t rest = q;
      for (int a = r; a-- > 0;) {
        homogeneous[size_t(r - 1 - a)] = base(rest % dims[size_t(a)], dims[size_t(a)]);
        rest /= dims[size_t(a)];
      }
      for (int k = 0; k < r; ++k) {
        double sum = 0;
        for (int j = 0; j <= r; ++j) sum += theta->floats[size_t((n * r + k) * (r + 1) + j)] * homogeneous[size_t(j)];
        grid.floats[size_t((n * points + q) * r + k)] = sum;
      }
    }
  return OpOutputs{std::move(grid)};
}

// RoiAlign, from the ONNX definition (ONNX Runtime's algorithm): per region, bins of
// grid_h x grid_w bilinear samples, averaged, or in max mode the largest weighted corner.
Result<OpOutputs> roi_align_op(const OpContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* x, ctx.input(0, "X"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* rois, ctx.input(1, "rois"));
  STRIDER_ASSIGN_OR_RETURN(const RefTensor* batch_indices, ctx.input(2, "batch_indices"));
  if (x->rank() != 4 || rois->rank() != 2 || rois->shape[1] != 4 || batch_indices->shape != Shape{rois->shape[0]})
    return invalid_model("RoiAlign takes X [N, C, H, W], rois [R, 4] and batch_indices [R]");
  STRIDER_ASSIGN_OR_RETURN(std::string mode, ctx.attributes().get_string("mode", "avg"));
  STRIDER_ASSIGN_OR_RETURN(std::string coordinates, ctx.attributes().get_string(
      "coordinate_transformation_mode", ctx.opset() < 16 ? "output_half_pixel" : "half_pixel"));
  STRIDER_ASSIGN_OR_RETURN(int64_t out_h, ctx.attributes().get_int("output_height", 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t out_w, ctx.attributes().get_int("output_width", 1));
  STRIDER_ASSIGN_OR_RETURN(int64_t ratio, ctx.attributes().get_int("sampling_ratio", 0));
  STRIDER_ASSIGN_OR_RETURN(float scale, ctx.attributes().get_float("spatial_scale", 1.0f));
  const int64_t batch = x->shape[0], channels = x->shape[1], height = x->shape[2], width = x->shape[3];
  const int64_t regions = rois->shape[0];
  RefTensor y = RefTensor::zeros(x->dtype, {regions, channels, out_h, out_w});
  auto at = [&](int64_t n, int64_t c, int64_t i, int64_t j) { return x->floats[size_t(((n * channels + c) * height + i) * width + j)]; };
  const double shift = coordinates == "half_pixel" ? 0.5 : 0.0;
  for (int64_t r = 0; r < regions; ++r) {
    const int64_t n = batch_indices->ints[size_t(r)];
    if (n < 0 || n >= batch) return invalid_argument(fmt::format("batch index {} is outside [0, {})", n, batch));
    const double* box = &rois->floats[size_t(r * 4)];
    const double x0 = box[0] * scale - shift, y0 = box[1] * scale - shift;
    double w = box[2] * scale - shift - x0, h = box[3] * scale - shift - y0;
    if (shift == 0) w = std::max(w, 1.0), h = std::max(h, 1.0);
    const double bin_h = h / double(out_h), bin_w = w / double(out_w);
    if (!std::isfinite(bin_h) || !std::isfinite(bin_w)) return invalid_argument("a region is not finite");
    const double gh = ratio > 0 ? double(ratio) : std::ceil(bin_h), gw = ratio > 0 ? double(ratio) : std::ceil(bin_w);
    if (gh * gw * double(out_h * out_w) > double(int64_t(1) << 24)) return invalid_argument("a region takes too many samples");
    const int64_t grid_h = std::max<int64_t>(int64_t(gh), 0), grid_w = std::max<int64_t>(int64_t(gw), 0);
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t ph = 0; ph < out_h; ++ph)
        for (int64_t pw = 0; pw < out_w; ++pw) {
          double value = 0;
          bool first = true;
          for (int64_t iy = 0; iy < grid_h; ++iy)
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              double sy = y0 + double(ph) * bin_h + (double(iy) + 0.5) * bin_h / double(grid_h);
              double sx = x0 + double(pw) * bin_w + (double(ix) + 0.5) * bin_w / double(grid_w);
              double corner[4] = {0, 0, 0, 0};
              if (!(sy < -1.0 || sy > double(height) || sx < -1.0 || sx > double(width))) {
                sy = std::max(sy, 0.0), sx = std::max(sx, 0.0);
                int64_t top = int64_t(sy), left = int64_t(sx), bottom = top + 1, right = left + 1;
                if (top >= height - 1) bottom = top = height - 1, sy = double(top);
                if (left >= width - 1) right = left = width - 1, sx = double(left);
                const double ly = sy - double(top), lx = sx - double(left);
                corner[0] = (1 - ly) * (1 - lx) * at(n, c, top, left);
                corner[1] = (1 - ly) * lx * at(n, c, top, right);
                corner[2] = ly * (1 - lx) * at(n, c, bottom, left);
                corner[3] = ly * lx * at(n, c, bottom, right);
              } else {
                for (double& v : corner) v = 0 * at(n, c, 0, 0);  // ONNX weights a pixel 0 by zero
              }
              if (mode == "avg") {
                value += corner[0] + corner[1] + corner[2] + corner[3];
              } else {
                const double largest = std::max({corner[0], corner[1], corner[2], corner[3]});
                value = first ? largest : std::max(value, largest);
              }
              first = false;
            }
          if (mode == "avg") value /= double(std::max<int64_t>(grid_h * grid_w, 1));
          y.floats[size_t(((r * channels + c) * out_h + ph) * out_w + pw)] = value;
        }
  }
  return OpOutputs{std::move(y)};
}

constexpr OpDefinition kGridOps[] = {
    {"RoiAlign", 10, 27, roi_align_op},
    {"GridSample", 16, 27, grid_sample_op},
    {"AffineGrid", 20, 27, affine_grid_op},
};

}  // namespace

std::span<const OpDefinition> grid_op_definitions() { return kGridOps; }

}  // namespace strider::ref
