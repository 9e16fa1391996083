// GridSample and AffineGrid: parameters and shape functions (ops/grid_sample.h).
#include "ops/grid_sample.h"

#include <fmt/format.h>

namespace strider {
namespace {

Status check_float(const NodeInputs& node, size_t i, const char* what) {
  if (!is_floating(node.input_dtype(i)))
    return node.error("{} must be a floating type, got {}", what, dtype_name(node.input_dtype(i)));
  return Status::ok();
}

Status infer_grid_sample(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(GridSampleParams p, resolve_grid_sample(ctx));
  const Shape& x = ctx.input_shape(0);
  const Shape& grid = ctx.input_shape(1);
  Shape out = {x[0], x[1]};
  out.insert(out.end(), grid.begin() + 1, grid.end() - 1);
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
  (void)p;
  return Status::ok();
}

// AffineGrid's size input: [N, C, H, W] or [N, C, D, H, W], known at creation.
Result<std::vector<int64_t>> affine_grid_size(const NodeInputs& node) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> size, node.constant_ints(1, "size"));
  const Shape& theta = node.input_shape(0);
  if (size.size() != 4 && size.size() != 5) return node.error("size has {} values; it is [N, C, H, W] or [N, C, D, H, W]", size.size());
  const int64_t r = int64_t(size.size()) - 2;
  if (theta.size() != 3 || theta[1] != r || theta[2] != r + 1)
    return node.error("theta {} is not [N, {}, {}] for a size of {} values", shape_to_string(theta), r, r + 1, size.size());
  if (theta[0] != size[0]) return node.error("theta has {} matrices for a size of batch {}", theta[0], size[0]);
  for (int64_t d : size)
    if (d < 0) return node.error("size {} has a negative value", fmt::join(size, ", "));
  return size;
}

Status infer_affine_grid(InferContext& ctx) {
  STRIDER_RETURN_IF_ERROR(check_float(ctx, 0, "theta"));
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> size, affine_grid_size(ctx));
  STRIDER_ASSIGN_OR_RETURN(int64_t align, ctx.attributes().get_int("align_corners", 0));
  (void)align;
  Shape out = {size[0]};
  out.insert(out.end(), size.begin() + 2, size.end());
  out.push_back(int64_t(size.size()) - 2);
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
  return Status::ok();
}

}  // namespace

Result<GridSampleParams> resolve_grid_sample(const NodeInputs& node) {
  GridSampleParams p;
  STRIDER_RETURN_IF_ERROR(check_float(node, 0, "X"));
  STRIDER_RETURN_IF_ERROR(check_float(node, 1, "grid"));
  const Shape& x = node.input_shape(0);
  const Shape& grid = node.input_shape(1);
  p.spatial_rank = int(x.size()) - 2;
  if (x.size() < 3 || grid.size() != x.size() || grid.back() != int64_t(p.spatial_rank) || grid[0] != x[0])
    return node.error("grid {} does not fit X {}: it must be [N, H1.., {}] with X's N", shape_to_string(grid),
                      shape_to_string(x), p.spatial_rank);
  if (node.opset() < 20 && p.spatial_rank != 2)
    return node.error("GridSample-{} samples 4-D inputs only, got rank {}", node.opset(), x.size());
  STRIDER_ASSIGN_OR_RETURN(std::string mode, node.attributes().get_string("mode", node.opset() < 20 ? "bilinear" : "linear"));
  if (mode == "linear" || mode == "bilinear") p.mode = GridSampleMode::kLinear;
  else if (mode == "nearest") p.mode = GridSampleMode::kNearest;
  else if (mode == "cubic" || mode == "bicubic") p.mode = GridSampleMode::kCubic;
  else return node.error("mode '{}' is not linear, nearest or cubic", mode);
  if (p.mode == GridSampleMode::kCubic && p.spatial_rank != 2)
    return unsupported(fmt::format("cubic GridSample of {} spatial dims (defined for 2)", p.spatial_rank));
  STRIDER_ASSIGN_OR_RETURN(std::string padding, node.attributes().get_string("padding_mode", "zeros"));
  if (padding == "zeros") p.padding = GridPadding::kZeros;
  else if (padding == "border") p.padding = GridPadding::kBorder;
  else if (padding == "reflection") p.padding = GridPadding::kReflection;
  else return node.error("padding_mode '{}' is not zeros, border or reflection", padding);
  STRIDER_ASSIGN_OR_RETURN(int64_t align, node.attributes().get_int("align_corners", 0));
  p.align_corners = align != 0;
  return p;
}

void register_grid_ops(std::vector<OpSchema>& ops) {
  ops.push_back({"GridSample", infer_grid_sample, {1}, {}});
  ops.push_back({"AffineGrid", infer_affine_grid, {0}, {1}});
}

}  // namespace strider
