// The table of ops/elementwise_math.h expanded on the host: names, kinds, and the reading of
// each row's parameter list.
#include "ops/elementwise_params.h"

#include <fmt/format.h>

#include "strider/printable.h"

namespace strider {
namespace {

// A float or int attribute (IsInf's detect_* and Mod's fmod are ints), or the default.
Status read_number(const AttributeMap& attributes, const char* name, float fallback, float* out) {
  const Attribute* a = attributes.find(name);
  if (a == nullptr) {
    *out = fallback;
    return Status::ok();
  }
  if (a->kind == Attribute::Kind::kFloat) {
    *out = a->f;
    return Status::ok();
  }
  if (a->kind == Attribute::Kind::kInt) {
    *out = float(a->i);
    return Status::ok();
  }
  return invalid_model(fmt::format("attribute '{}' is {}, expected a number", name, attribute_kind_name(a->kind)));
}

// A string attribute with two allowed values: 0 for the first (the default), 1 for the second.
Status read_choice(const AttributeMap& attributes, const char* name, std::string_view first, std::string_view second,
                   float* out) {
  const Attribute* a = attributes.find(name);
  *out = 0;
  if (a == nullptr) return Status::ok();
  if (a->kind == Attribute::Kind::kString && (a->s == first || a->s == second)) {
    *out = a->s == second ? 1.0f : 0.0f;
    return Status::ok();
  }
  std::string given = a->kind == Attribute::Kind::kString ? printable(a->s) : std::string(attribute_kind_name(a->kind));
  return invalid_model(fmt::format("attribute '{}' must be the string {} or {}, not {}", name, first, second, given));
}

}  // namespace

std::optional<ElementwiseOp> elementwise_op_from_onnx(std::string_view op_type) {
#define STRIDER_MATCH(name, kind, kernel, params) \
  if (op_type == #name) return ElementwiseOp::k##name;
  STRIDER_ELEMENTWISE_OPS(STRIDER_MATCH)
#undef STRIDER_MATCH
  return std::nullopt;
}

std::string_view elementwise_op_name(ElementwiseOp op) {
  switch (op) {
#define STRIDER_NAME(name, kind, kernel, params) \
  case ElementwiseOp::k##name: return #name;
    STRIDER_ELEMENTWISE_OPS(STRIDER_NAME)
#undef STRIDER_NAME
  }
  return "?";
}

ElementwiseKind elementwise_kind(ElementwiseOp op) {
  switch (op) {
#define STRIDER_KIND(name, kind, kernel, params) \
  case ElementwiseOp::k##name: return ElementwiseKind::kind;
    STRIDER_ELEMENTWISE_OPS(STRIDER_KIND)
#undef STRIDER_KIND
  }
  return ElementwiseKind::kFloatUnary;
}

ElementwiseKernel elementwise_kernel(ElementwiseOp op) {
  switch (op) {
#define STRIDER_KERNEL(name, kind, kernel, params) \
  case ElementwiseOp::k##name: return ElementwiseKernel::kernel;
    STRIDER_ELEMENTWISE_OPS(STRIDER_KERNEL)
#undef STRIDER_KERNEL
  }
  return ElementwiseKernel::kOwn;
}

Result<ElementwiseParams> resolve_elementwise_params(ElementwiseOp op, const AttributeMap& attributes) {
  ElementwiseParams p;
#define STRIDER_ATTR(field, name, fallback) \
  STRIDER_RETURN_IF_ERROR(read_number(attributes, name, float(fallback), &p.field));
#define STRIDER_CHOICE(field, name, first, second) \
  STRIDER_RETURN_IF_ERROR(read_choice(attributes, name, first, second, &p.field));
#define STRIDER_EXPAND(...) __VA_ARGS__
#define STRIDER_RESOLVE(name, kind, kernel, params) \
  case ElementwiseOp::k##name: {                    \
    STRIDER_EXPAND params                           \
    break;                                          \
  }
  switch (op) { STRIDER_ELEMENTWISE_OPS(STRIDER_RESOLVE) }
#undef STRIDER_RESOLVE
#undef STRIDER_EXPAND
#undef STRIDER_CHOICE
#undef STRIDER_ATTR
  return p;
}

}  // namespace strider
