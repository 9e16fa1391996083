// lower_to_bf16: the session's `--dtype bf16`. Every f32 value (graph inputs, weights,
// activations, outputs) becomes bf16, and Casts to f32 cast to bf16 instead; kernels then
// run in bf16 with f32 accumulation. Float parameters that are not data (Resize's scales
// and roi, as declared by OpSchema::float_parameter_inputs) stay f32. Constants are
// rounded to nearest even, finite ones beyond bf16's range saturating to its largest
// finite value (an exported `* -FLT_MAX` mask stays finite). Runs after infer_and_fold, so shape arithmetic folded in f32
// and integers is exact.
#pragma once

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

Status lower_to_bf16(Graph& graph);

// convert_float_tensor: strider/tensor.h.

}  // namespace strider
