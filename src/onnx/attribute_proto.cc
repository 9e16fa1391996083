#include "onnx/attribute_proto.h"

#include <fmt/format.h>

#include "onnx/tensor_proto.h"

namespace strider {
namespace {

using AP = onnx::AttributeProto;

// The declared type, or the one implied by the field that is set when none is declared.
int effective_type(const AP& p) {
  if (p.type() != AP::UNDEFINED) return p.type();
  if (p.has_f()) return AP::FLOAT;
  if (p.has_i()) return AP::INT;
  if (p.has_s()) return AP::STRING;
  if (p.has_t()) return AP::TENSOR;
  if (p.has_g()) return AP::GRAPH;
  if (p.has_sparse_tensor()) return AP::SPARSE_TENSOR;
  if (p.has_tp()) return AP::TYPE_PROTO;
  if (p.floats_size()) return AP::FLOATS;
  if (p.ints_size()) return AP::INTS;
  if (p.strings_size()) return AP::STRINGS;
  if (p.tensors_size()) return AP::TENSORS;
  if (p.graphs_size()) return AP::GRAPHS;
  if (p.sparse_tensors_size()) return AP::SPARSE_TENSORS;
  if (p.type_protos_size()) return AP::TYPE_PROTOS;
  return AP::UNDEFINED;
}

}  // namespace

Result<Attribute> attribute_from_proto(const AP& p, const std::string& base_dir,
                                       const std::string& node) {
  if (p.name().empty()) return invalid_model(fmt::format("{}: an attribute has no name", node));
  if (!p.ref_attr_name().empty())
    return unsupported(fmt::format(
        "{} attribute '{}' refers to function attribute '{}' (only valid inside a function body)",
        node, p.name(), p.ref_attr_name()));
  Attribute a;
  switch (effective_type(p)) {
    case AP::INT:
      a.kind = Attribute::Kind::kInt, a.i = p.i();
      break;
    case AP::FLOAT:
      a.kind = Attribute::Kind::kFloat, a.f = p.f();
      break;
    case AP::STRING:
      a.kind = Attribute::Kind::kString, a.s = p.s();
      break;
    case AP::INTS:
      a.kind = Attribute::Kind::kInts;
      a.ints.assign(p.ints().begin(), p.ints().end());
      break;
    case AP::FLOATS:
      a.kind = Attribute::Kind::kFloats;
      a.floats.assign(p.floats().begin(), p.floats().end());
      break;
    case AP::STRINGS:
      a.kind = Attribute::Kind::kStrings;
      a.strings.assign(p.strings().begin(), p.strings().end());
      break;
    case AP::TENSOR: {
      std::string what = fmt::format("{} attribute '{}'", node, p.name());
      STRIDER_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(p.t(), base_dir, what));
      a.kind = Attribute::Kind::kTensor;
      a.tensor = std::make_shared<const Tensor>(std::move(t));
      break;
    }
    case AP::GRAPH:
    case AP::GRAPHS:
    case AP::TENSORS:
    case AP::SPARSE_TENSOR:
    case AP::SPARSE_TENSORS:
    case AP::TYPE_PROTO:
    case AP::TYPE_PROTOS:
      a.kind = Attribute::Kind::kGraph;
      break;
    default:
      return invalid_model(
          fmt::format("{} attribute '{}' has no type and no value", node, p.name()));
  }
  return a;
}

}  // namespace strider
