// ONNX AttributeProto -> strider Attribute (internal to the importer).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "ir/attributes.h"
#include "strider/status.h"

namespace strider {

// Converts one node attribute. INT, FLOAT, STRING and their lists map one to one; TENSOR
// becomes a Tensor (read like an initializer, external data relative to `base_dir`).
// GRAPH, GRAPHS, TENSORS, SPARSE_TENSOR(S) and TYPE_PROTO(S) are imported as Kind::kGraph
// with no payload: only ops that need them refuse them, when they are executed. An
// attribute without a type takes the kind of the field that is set (old exporters).
// A reference to a function attribute (ref_attr_name) is UNSUPPORTED. `node` names the
// node in messages: "node 'Conv_3' (Conv)".
Result<Attribute> attribute_from_proto(const onnx::AttributeProto& proto,
                                       const std::string& base_dir, const std::string& node);

}  // namespace strider
