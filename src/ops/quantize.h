// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and QLinearMatMul / QLinearConv:
// their parameters, resolved once for shape inference and for the expansion into float ops
// (passes/expand_quantize.cc); the reference has its own (reference/quantize_ops.cc).
//
// strider runs quantized ops by dequantizing: (q - zero_point) * scale in the scale's
// float type, the float op, then round-half-even(x / scale) + zero_point saturated to the
// integer type. No device has int8 kernels yet.
#pragma once

#include "ops/op_registry.h"

namespace strider {

// How a scale (and its zero point) maps onto the quantized tensor.
enum class QuantGranularity : uint8_t {
  kTensor,  // one scale: a scalar or [1]
  kAxis,    // 1-D, one per index of `axis`
  kBlock,   // x's rank; along `axis` one per `block` consecutive indices
};

struct QuantizeParams {
  QuantGranularity granularity = QuantGranularity::kTensor;
  int64_t axis = 1;   // normalized against x's rank
  int64_t block = 0;  // kBlock only
  DType quantized = DType::kU8;  // QuantizeLinear's output, DequantizeLinear's input
  DType real = DType::kF32;      // QuantizeLinear's input, DequantizeLinear's output
  bool has_zero_point = false;
  // QuantizeLinear to a float8 type: beyond its largest value, that value (the default) or
  // NaN / infinity (saturate = 0), as Cast does.
  bool saturate = true;
};

// Inputs (x, scale, zero_point?) with x at input 0, scale at 1, zero point at 2.
Result<QuantizeParams> resolve_quantize_linear(const NodeInputs& node);
Result<QuantizeParams> resolve_dequantize_linear(const NodeInputs& node);

// The saturation range of a quantized dtype.
struct IntegerRange {
  double low = 0, high = 0;
};
IntegerRange quantized_range(DType dtype);

// MatMulInteger and ConvInteger give exact int32 sums; strider computes them in f32, which
// is exact while every partial sum stays below 2^24: at most kExactF32Terms products of
// operands in [-255, 255] (after the zero points) per output. Longer sums are refused.
inline constexpr int64_t kExactF32Terms = (int64_t(1) << 24) / (255 * 255);
// The terms of one output of MatMulInteger (K) or ConvInteger (C / group x kernel), with
// an UNSUPPORTED error when there are more than kExactF32Terms.
Result<int64_t> exact_integer_terms(int64_t terms);

void register_quantize_ops(std::vector<OpSchema>& ops);

}  // namespace strider
