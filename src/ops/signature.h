// Signatures: each node checked against its op's ONNX schema before any shape function
// or kernel sees it.
//
// Why: shape functions and kernels index a node's inputs and read its attributes as the
// op's definition promises. A hostile model breaks those promises (a CastLike with one
// input, a Relu with three, an Add of f32 and i64, a `perm` that is a string), and the
// code after it would throw, read a value that does not exist, or compute with the
// wrong element type. Checking once, here, against the op's signature for the model's
// opset keeps every later stage on a node that means what its op says.
//
// The source is libonnx's schema registry (Debian's libonnx 1.12, which knows opsets up to
// 17): input and output counts, which inputs are required, attribute names, kinds and
// whether they are required, and the element types each input may have (with inputs
// bound to one type parameter sharing their type). For a node whose opset is newer than
// libonnx knows, the latest schema libonnx has is used with what later opsets are known
// to have added (extra optional inputs); attributes unknown to that older schema are then
// allowed and element types are not checked against its lists (later opsets widened
// them), only inputs bound to one type parameter must still agree. Ops ONNX added after
// opset 17 (Mish, GroupNormalization, Gelu, RMSNormalization, Swish), which libonnx lacks, are checked against strider's own table of
// their signatures (signature.cc, from the ONNX operator definitions).
#pragma once

#include <string_view>

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

// The newest ai.onnx opset strider knows the meaning of (the ONNX node tests go this far).
inline constexpr int kMaxKnownOpset = 28;
// Ops are implemented as opset 7 and later define them.
inline constexpr int kOldestImplementedOpset = 7;

// INVALID_MODEL naming the node and what is wrong (arity, a missing required input or
// attribute, an attribute of the wrong kind, an element type the op does not take);
// UNSUPPORTED for a legacy op version strider does not implement (before opset 7, where
// the op has since been revised). Nodes of other domains are not checked here. Inputs
// without an inferred type yet are skipped by the type check.
Status check_node_signature(const Graph& graph, const Node& node);

// Whether libonnx, or strider's table of later ops, has a signature for `op_type` (the
// signature check relies on it for every op strider registers; a test keeps it so).
bool has_onnx_signature(std::string_view op_type);

// UNSUPPORTED when the model imports an ai.onnx opset newer than kMaxKnownOpset.
Status check_model_opsets(const Graph& graph);

}  // namespace strider
