// The elementwise ops of ops/elementwise_math.h seen from the host: their names, kinds and
// parameters. resolve_elementwise_params is the one place a node's attributes become its
// functor's ElementwiseParams (with the ONNX defaults of the table's rows): the kernels
// of every device and the fusion pass call it, and nothing else reads those attributes.
#pragma once

#include <optional>
#include <string_view>

#include "ir/attributes.h"
#include "ops/elementwise_math.h"
#include "strider/status.h"

namespace strider {

// The op of an ONNX op type in the default domain, or nullopt when it is not in the table.
std::optional<ElementwiseOp> elementwise_op_from_onnx(std::string_view op_type);
std::string_view elementwise_op_name(ElementwiseOp op);
ElementwiseKind elementwise_kind(ElementwiseOp op);
ElementwiseKernel elementwise_kernel(ElementwiseOp op);

// INVALID_MODEL naming the attribute when one has the wrong kind or value.
Result<ElementwiseParams> resolve_elementwise_params(ElementwiseOp op, const AttributeMap& attributes);

}  // namespace strider
