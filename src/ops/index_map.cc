#include "ops/index_map.h"

#include <fmt/format.h>

#include <cstring>

#include "base/checked_math.h"
#include "base/float16.h"
#include "strider/printable.h"
#include "base/shape.h"

namespace strider {
namespace {

Result<IndexMapMode> pad_mode(const NodeInputs& node) {
  STRIDER_ASSIGN_OR_RETURN(std::string mode, node.attributes().get_string("mode", "constant"));
  if (mode == "constant") return IndexMapMode::kConstant;
  if (mode == "reflect") return IndexMapMode::kReflect;
  if (mode == "edge") return IndexMapMode::kEdge;
  if (mode == "wrap") return IndexMapMode::kWrap;
  return node.error("mode '{}' is not constant, reflect, edge or wrap", printable(mode));
}

Status resolve_pad(const NodeInputs& node, IndexMapParams& p) {
  const int64_t rank = int64_t(p.in_shape.size());
  STRIDER_ASSIGN_OR_RETURN(p.mode, pad_mode(node));
  std::vector<int64_t> pads;
  if (node.opset() < 11) {
    STRIDER_ASSIGN_OR_RETURN(pads, node.attributes().require_ints("pads"));
    STRIDER_ASSIGN_OR_RETURN(float value, node.attributes().get_float("value", 0.0f));
    p.value = value;
  } else {
    STRIDER_ASSIGN_OR_RETURN(pads, node.constant_ints(1, "pads"));
    if (node.has_input(2)) {
      if (node.input_dtype(2) != node.input_dtype(0))
        return node.error("constant_value is {}, data is {}", dtype_name(node.input_dtype(2)), dtype_name(node.input_dtype(0)));
      if (num_elements(node.input_shape(2)) != 1) return node.error("constant_value must be one element");
      if (const Tensor* v = node.input_constant(2)) p.value = v->element_as_double(0);
      else p.value_input = 2;
    }
  }
  std::vector<int64_t> axes;
  if (node.opset() >= 18 && node.has_input(3)) {
    STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> given, node.constant_ints(3, "axes"));
    for (int64_t a : given) {
      int64_t d = 0;
      if (!normalize_axis(a, rank, &d)) return node.error("axis {} is outside [-{}, {})", a, rank, rank);
      axes.push_back(d);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    return node.error("pads has {} values; {} axes take {}", pads.size(), axes.size(), 2 * axes.size());
  p.before.assign(size_t(rank), 0);
  std::vector<int64_t> after(size_t(rank), 0);
  std::vector<bool> seen(size_t(rank), false);
  for (size_t k = 0; k < axes.size(); ++k) {
    if (seen[size_t(axes[k])]) return node.error("axis {} repeats", axes[k]);
    seen[size_t(axes[k])] = true;
    p.before[size_t(axes[k])] = pads[k];
    after[size_t(axes[k])] = pads[k + axes.size()];
  }
  for (size_t d = 0; d < size_t(rank); ++d) {
    CheckedInt size = CheckedInt(p.in_shape[d]) + p.before[d] + after[d];
    if (!size.ok() || size.value() < 0)
      return node.error("pads {} and {} on axis {} of size {} give no valid size", p.before[d], after[d], d, p.in_shape[d]);
    const bool grows = p.before[d] > 0 || after[d] > 0;
    if (grows && p.in_shape[d] == 0 && p.mode != IndexMapMode::kConstant)
      return node.error("{} padding of the empty axis {}", p.mode == IndexMapMode::kEdge ? "edge" : "reflect or wrap", d);
    p.out_shape.push_back(size.value());
  }
  return Status::ok();
}

Status resolve_tile(const NodeInputs& node, IndexMapParams& p) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, node.constant_ints(1, "repeats"));
  if (repeats.size() != p.in_shape.size())
    return node.error("repeats has {} values for an input of rank {}", repeats.size(), p.in_shape.size());
  p.mode = IndexMapMode::kTile;
  p.before.assign(p.in_shape.size(), 0);
  for (size_t d = 0; d < repeats.size(); ++d) {
    CheckedInt size = CheckedInt(p.in_shape[d]) * repeats[d];
    if (repeats[d] < 0) return node.error("repeats {} on axis {} is negative", repeats[d], d);
    if (!size.ok()) return node.error("repeats {} on axis {} of size {} overflow", repeats[d], d, p.in_shape[d]);
    p.out_shape.push_back(size.value());
  }
  return Status::ok();
}

Status infer_index_map(InferContext& ctx) {
  STRIDER_ASSIGN_OR_RETURN(IndexMapParams p, resolve_index_map(ctx));
  ctx.set_output(0, ctx.input_dtype(0), p.out_shape);
  return Status::ok();
}

}  // namespace

Result<IndexMapParams> resolve_index_map(const NodeInputs& node) {
  IndexMapParams p;
  if (!node.has_input(0)) return node.error("needs its data input");
  p.in_shape = node.input_shape(0);
  if (node.node().op_type == "Tile") STRIDER_RETURN_IF_ERROR(resolve_tile(node, p));
  else STRIDER_RETURN_IF_ERROR(resolve_pad(node, p));
  return p;
}

int64_t source_coordinate(const IndexMapParams& p, size_t axis, int64_t o) {
  const int64_t n = p.in_shape[axis];
  const int64_t i = o - p.before[axis];
  if (i >= 0 && i < n) return i;
  if (n == 0) return -1;
  switch (p.mode) {
    case IndexMapMode::kConstant: return -1;
    case IndexMapMode::kEdge: return i < 0 ? 0 : n - 1;
    case IndexMapMode::kWrap:
    case IndexMapMode::kTile: return ((i % n) + n) % n;
    case IndexMapMode::kReflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t r = ((i % period) + period) % period;  // reflections repeat with this period
      return r < n ? r : period - r;
    }
  }
  return -1;
}

std::vector<std::vector<int64_t>> index_map_tables(const IndexMapParams& p, const Strides& in_strides) {
  std::vector<std::vector<int64_t>> tables(p.out_shape.size());
  for (size_t d = 0; d < tables.size(); ++d)
    for (int64_t o = 0; o < p.out_shape[d]; ++o) {
      const int64_t i = source_coordinate(p, d, o);
      tables[d].push_back(i < 0 ? kNoSource : i * in_strides[d]);
    }
  return tables;
}

uint64_t pad_value_bits(double value, DType dtype) {
  uint64_t bits = 0;
  auto put = [&](auto element) { std::memcpy(&bits, &element, sizeof(element)); };
  switch (dtype) {
    case DType::kF32: put(float(value)); break;
    case DType::kF64: put(value); break;
    case DType::kF16: put(f16::from_float(float(value)).bits); break;
    case DType::kBF16: put(bf16::from_float(float(value)).bits); break;
    case DType::kI64: put(saturate_to_int<int64_t>(value)); break;
    case DType::kI32: put(saturate_to_int<int32_t>(value)); break;
    case DType::kI8: put(saturate_to_int<int8_t>(value)); break;
    case DType::kU8: put(saturate_to_int<uint8_t>(value)); break;
    case DType::kBool: put(uint8_t(value != 0)); break;
    case DType::kI16: put(saturate_to_int<int16_t>(value)); break;
    case DType::kU16: put(saturate_to_int<uint16_t>(value)); break;
    case DType::kU32: put(saturate_to_int<uint32_t>(value)); break;
    case DType::kU64: put(saturate_to_int<uint64_t>(value)); break;
    default: break;  // the storage-only types: no kernel pads them (hal/cpu/cpu_kernels.cc)
  }
  return bits;
}

void register_index_map_ops(std::vector<OpSchema>& ops) {
  ops.push_back({"Pad", infer_index_map, {}, {1, 3}});
  ops.push_back({"Tile", infer_index_map, {}, {1}});
}

}  // namespace strider
