// Element types ONNX stores in fewer bits than strider computes in: the float8 formats
// (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), float4 e2m1 and the 4- and 2-bit integers.
//
// strider holds each element of these in one byte (a sub-byte value unpacked, an integer
// sign-extended), so views, strides and offsets mean what they mean for every other dtype;
// the ONNX boundary (tensor protos) packs and unpacks the sub-byte ones, two or four to a
// byte, low bits first. They are storage types only: Cast and CastLike convert to and from
// them (QuantizeLinear and DequantizeLinear reach them through Cast), and the ops that only
// move bytes carry them; no kernel computes in them (hal/cpu/cpu_kernels.cc says so in one
// place). The conversions here are the ONNX ones: round to nearest even; with `saturate`
// (Cast's default) a value beyond the format's largest, infinities included, becomes the
// largest of its sign, without it NaN (or infinity for e5m2); the integers wrap.
#pragma once

#include <cstdint>

#include "strider/dtype.h"

namespace strider {

// The element as a double (NaN for a NaN encoding). `byte` is the one-byte form strider holds.
double small_type_to_double(uint8_t byte, DType dtype);
// v converted to the type's one-byte form.
uint8_t small_type_from_double(double v, DType dtype, bool saturate = true);
// Bits one element takes in an ONNX tensor (8, 4 or 2).
int small_type_bits(DType dtype);

}  // namespace strider
