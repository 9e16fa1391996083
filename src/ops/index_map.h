// Pad and Tile, defined once as index maps: output coordinate o along axis d reads input
// coordinate source_coordinate(params, d, o) of that axis, or (Pad's constant mode, and
// reflect/edge/wrap of an empty axis) no element: the pad value. resolve_index_map reads
// the node once (pads, axes and mode, or repeats, with the ONNX defaults) for shape
// inference and every device's kernel, which turn the maps into per-axis tables of
// element offsets (so a kernel adds rank table entries per element and never divides).
#pragma once

#include <vector>

#include "ops/op_registry.h"

namespace strider {

enum class IndexMapMode : uint8_t { kConstant, kReflect, kEdge, kWrap, kTile };

struct IndexMapParams {
  IndexMapMode mode = IndexMapMode::kConstant;
  Shape in_shape, out_shape;
  std::vector<int64_t> before;  // Pad: elements added before each axis (negative: cropped); Tile: 0
  // Pad's value: from the attribute (before opset 11), or input 2 when it is a constant;
  // value_input is 2 when the value is read from the input at run time.
  double value = 0;
  int value_input = -1;
};

// INVALID_MODEL naming what is wrong; output sizes are checked arithmetic.
Result<IndexMapParams> resolve_index_map(const NodeInputs& node);

// The input coordinate output coordinate `o` of `axis` reads, or -1 for the pad value.
int64_t source_coordinate(const IndexMapParams& params, size_t axis, int64_t o);

// Per axis, the element offset (coordinate x `in_strides[axis]`) each output coordinate
// reads, kNoSource for the pad value: what the kernels walk.
inline constexpr int64_t kNoSource = INT64_MIN;
std::vector<std::vector<int64_t>> index_map_tables(const IndexMapParams& params, const Strides& in_strides);

// The pad value as the bits of one element of `dtype` (integers truncated and saturated, bool value != 0,
// f16 and bf16 rounded to nearest even), in the low bytes.
uint64_t pad_value_bits(double value, DType dtype);

void register_index_map_ops(std::vector<OpSchema>& ops);

}  // namespace strider
