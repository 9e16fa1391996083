// ONNX model import: a ModelProto file or buffer -> Graph (src/ir/graph.h).
//
// What the Graph holds after import:
// - opsets(): the model's opset_import; "ai.onnx" is stored as "" (the default domain).
//   Each Node has `domain` normalized the same way and `opset` = that domain's version.
// - Initializers are constant Values (dtype, shape and tensor set). A graph input that is
//   also an initializer (IR < 4 models list them as inputs) is a constant, not an input.
// - Graph inputs carry dtype and shape from their declared type. An unknown dimension is
//   -1; `dim_params` is then one entry per dimension: "" for a known one, the dim_param
//   name or "?" for an unknown one (empty when every dimension is known).
// - Nodes keep their order when it is topological; a node that reads a value produced by
//   a later node is moved after it (stable sort; ImportOptions::sort_nodes) and a cycle is
//   INVALID_MODEL. Unnamed nodes get "<op_type>_<index in the model>", made unique.
//   Empty input/output names are kNoValue (omitted optionals).
// - Node output values have no type or shape: shape inference sets them. value_info,
//   declared output types and model functions are ignored; ops, domains and subgraph
//   attributes are imported as-is (whether they run is the session's decision).
//
// Errors are one line starting "model '<what>': " and naming the node, value, tensor or
// field: NOT_FOUND (missing file), INVALID_MODEL (corrupt, truncated or inconsistent
// model), UNSUPPORTED (an input or initializer type strider lacks). Bad input never
// crashes or aborts.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

struct ImportOptions {
  // Topologically sort a graph whose nodes are out of order; false makes a read of a
  // value produced by a later node an error, as the ONNX spec requires.
  bool sort_nodes = true;
  // The most bytes the initializers may hold together: a model whose weights need more is
  // RESOURCE_EXHAUSTED before they are read (Session::load passes its memory budget).
  int64_t max_constant_bytes = int64_t(1) << 52;
};

// Reads a .onnx file. External tensor data resolves relative to the model's folder; a
// location that is absolute or leaves that folder (.., symlinks) is refused.
Result<Graph> import_model_file(const std::string& path, const ImportOptions& options = {});

// Imports a serialized ModelProto. `base_dir_for_external_data` is the folder external
// data is relative to (empty: external data is refused); `what` names the model in
// messages (usually its path).
Result<Graph> import_model_bytes(std::span<const std::byte> bytes,
                                 const std::string& base_dir_for_external_data,
                                 const std::string& what, const ImportOptions& options = {});

}  // namespace strider
