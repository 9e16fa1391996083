#include "ops/wavenet_layer.h"

#include <fmt/format.h>

#include "ops/shape_ops.h"

namespace strider {
namespace {

// Checks input `i` (present) is `dtype` of `shape`; `what` names it in the error.
Status expect_input(const InferContext& ctx, size_t i, DType dtype, const Shape& shape, std::string_view what) {
  if (ctx.input_dtype(i) != dtype || ctx.input_shape(i) != shape)
    return ctx.error("{} is {} {}, not {} {}", what, dtype_name(ctx.input_dtype(i)), shape_to_string(ctx.input_shape(i)),
                     dtype_name(dtype), shape_to_string(shape));
  return Status::ok();
}

Status infer_wavenet_layer(InferContext& ctx) {
  if (ctx.num_inputs() < 2 || ctx.num_inputs() > 7 || ctx.num_outputs() != 3)
    return ctx.error("FusedWaveNetLayer takes X, Wg and up to five more inputs, and has three outputs");
  const Shape& x = ctx.input_shape(kWaveX);
  const DType t = ctx.input_dtype(kWaveX);
  if (x.size() != 3 || !is_floating(t)) return ctx.error("X must be a float [N, C, T], not {} {}", dtype_name(t), shape_to_string(x));
  const Shape& wg = ctx.input_shape(kWaveGateW);
  const int64_t c = x[1];
  if (wg.size() != 3 || wg[0] != 2 * c || wg[1] != c || ctx.input_dtype(kWaveGateW) != t)
    return ctx.error("Wg {} is not {} [{}, {}, K]", shape_to_string(wg), dtype_name(t), 2 * c, c);
  Result<WaveNetLayerGeometry> g = wavenet_layer_geometry(ctx.graph(), ctx.node());
  if (!g.is_ok()) return g.status();
  if (ctx.has_input(kWaveGateB)) STRIDER_RETURN_IF_ERROR(expect_input(ctx, kWaveGateB, t, {2 * c}, "Bg"));
  if (ctx.has_input(kWaveResW) != ctx.has_output(kWaveY)) return ctx.error("Y must be present exactly when Wr is");
  if (ctx.has_input(kWaveSkipW) != ctx.has_output(kWaveS)) return ctx.error("S must be present exactly when Ws is");
  if (!ctx.has_output(kWaveY) && !ctx.has_output(kWaveS) && !ctx.has_output(kWaveG)) return ctx.error("no output");
  if (ctx.has_input(kWaveResW)) {
    STRIDER_RETURN_IF_ERROR(expect_input(ctx, kWaveResW, t, {c, c, 1}, "Wr"));
    if (ctx.has_input(kWaveResB)) STRIDER_RETURN_IF_ERROR(expect_input(ctx, kWaveResB, t, {c}, "Br"));
    ctx.set_output(kWaveY, t, x);
  }
  if (ctx.has_input(kWaveSkipW)) {
    const int64_t s = ctx.input_shape(kWaveSkipW).empty() ? 0 : ctx.input_shape(kWaveSkipW)[0];
    STRIDER_RETURN_IF_ERROR(expect_input(ctx, kWaveSkipW, t, {s, c, 1}, "Ws"));
    if (ctx.has_input(kWaveSkipB)) STRIDER_RETURN_IF_ERROR(expect_input(ctx, kWaveSkipB, t, {s}, "Bs"));
    ctx.set_output(kWaveS, t, {x[0], s, x[2]});
  }
  if (ctx.has_output(kWaveG)) ctx.set_output(kWaveG, t, x);
  return Status::ok();
}

}  // namespace

Result<WaveNetLayerGeometry> wavenet_layer_geometry(const Graph& graph, const Node& layer) {
  NodeInputs in(graph, layer);
  WaveNetLayerGeometry g;
  const Shape& wg = in.input_shape(kWaveGateW);
  if (wg.size() != 3 || in.input_rank(kWaveX) != 3) return in.error("FusedWaveNetLayer: X or Wg is not of rank 3");
  g.channels = wg[1], g.taps = wg[2];
  g.skip_channels = in.has_input(kWaveSkipW) && in.input_rank(kWaveSkipW) == 3 ? in.input_shape(kWaveSkipW)[0] : 0;
  STRIDER_ASSIGN_OR_RETURN(g.dilation, layer.attributes.get_int("dilation", 1));
  STRIDER_ASSIGN_OR_RETURN(g.pad_begin, layer.attributes.get_int("pad_begin", 0));
  if (g.taps < 1 || g.dilation < 1 || g.pad_begin < 0 || g.pad_begin > (g.taps - 1) * g.dilation)
    return in.error("FusedWaveNetLayer: {} taps, dilation {} and pad_begin {} do not keep T", g.taps, g.dilation,
                    g.pad_begin);
  return g;
}

OpSchema wavenet_layer_schema() { return {kFusedWaveNetLayerOp, infer_wavenet_layer, {}, {}, {}}; }

}  // namespace strider
