// The signature check against libonnx's schemas, by hand: what it refuses and, as much,
// what it must keep accepting (newer opsets than libonnx knows, omitted optionals).
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ops/op_registry.h"
#include "ops/signature.h"

namespace strider {
namespace {

// A one-node graph: inputs of the given dtypes (shape [2]), `outputs` outputs.
struct OneNode {
  Graph graph;
  Node node;
};

OneNode make(const std::string& op, std::vector<DType> input_types, int outputs, int opset = 17,
             std::vector<bool> present = {}) {
  OneNode g;
  g.node.name = "n";
  g.node.op_type = op;
  g.node.opset = opset;
  for (size_t i = 0; i < input_types.size(); ++i) {
    if (!present.empty() && !present[i]) {
      g.node.inputs.push_back(kNoValue);
      continue;
    }
    ValueId id = *g.graph.add_value("in" + std::to_string(i));
    Value& v = g.graph.value(id);
    v.has_type = v.has_shape = true;
    v.dtype = input_types[i];
    v.shape = {2};
    g.node.inputs.push_back(id);
  }
  for (int i = 0; i < outputs; ++i) g.node.outputs.push_back(*g.graph.add_value("out" + std::to_string(i)));
  return g;
}

Status check(const OneNode& g) { return check_node_signature(g.graph, g.node); }

// Every op's shape function, on every arity its signature allows, with inputs whose values
// are unknown (scalars, empty and rank-4 shapes too): it answers (a shape or an error),
// never reads a constant that is not there.
// Data-dependent ops (Compress, NonZero, Unique, NonMaxSuppression) once dereferenced the
// missing value; infer_and_fold does not call them so, but a schema's infer is public.
TEST(Signature, EveryShapeFunctionAnswersWithoutConstantInputs) {
  int called = 0;
  for (std::string_view op : registered_op_types()) {
    const OpSchema* schema = find_op_schema("", op);
    if (schema == nullptr || schema->infer == nullptr) continue;
    for (DType dtype : {DType::kF32, DType::kI64})
      for (const Shape& shape : {Shape{2, 3}, Shape{}, Shape{1, 2, 3, 4}, Shape{0, 3}})
        for (int inputs = 1; inputs <= 5; ++inputs)
          for (int outputs = 1; outputs <= 3; ++outputs) {
            OneNode g = make(std::string(op), std::vector<DType>(size_t(inputs), dtype), outputs);
            if (!check(g).is_ok()) continue;
            for (ValueId id : g.node.inputs) g.graph.value(id).shape = shape;
            NodeId id = *g.graph.add_node(g.node);
            InferContext context(g.graph, id);
            (void)schema->infer(context);
            ++called;
          }
  }
  EXPECT_GT(called, 600);
}

TEST(Signature, EveryOpStriderRegistersHasAnOnnxSchema) {
  for (std::string_view op : registered_op_types()) EXPECT_TRUE(has_onnx_signature(op)) << op;
}

// Ops libonnx 1.12 does not know (after opset 17) are checked against strider's own table.
TEST(Signature, OpsNewerThanLibonnxHaveTheirOwnSignatures) {
  EXPECT_TRUE(check(make("Gelu", {DType::kF32}, 1, 20)).is_ok());
  Status two = check(make("Gelu", {DType::kF32, DType::kF32}, 1, 20));
  EXPECT_EQ(two.code(), StatusCode::kInvalidModel);
  EXPECT_NE(two.message().find("has 2 inputs; Gelu-20 takes 1 to 1"), std::string::npos) << two.message();
  Status early = check(make("Gelu", {DType::kF32}, 1, 17));
  EXPECT_NE(early.message().find("does not exist at opset 17 (ONNX defines it from opset 20)"), std::string::npos)
      << early.message();
  EXPECT_EQ(check(make("Mish", {DType::kI64}, 1, 18)).code(), StatusCode::kInvalidModel);
  EXPECT_EQ(check(make("Swish", {DType::kF32}, 2, 24)).code(), StatusCode::kInvalidModel);
  OneNode wrong_kind = make("Gelu", {DType::kF32}, 1, 20);
  wrong_kind.node.attributes.set_int("approximate", 1);
  Status kind = check(wrong_kind);
  EXPECT_NE(kind.message().find("attribute 'approximate' is int, but Gelu-20 takes string"), std::string::npos)
      << kind.message();
  OneNode unknown = make("Swish", {DType::kF32}, 1, 24);
  unknown.node.attributes.set_float("beta", 1.0f);
  EXPECT_EQ(check(unknown).code(), StatusCode::kInvalidModel);
}

TEST(Signature, ArityRequiredInputsAndOutputs) {
  EXPECT_TRUE(check(make("Relu", {DType::kF32}, 1)).is_ok());
  Status three = check(make("Relu", {DType::kF32, DType::kF32, DType::kF32}, 1));
  EXPECT_EQ(three.code(), StatusCode::kInvalidModel);
  EXPECT_NE(three.message().find("node 'n' (Relu) has 3 inputs; Relu-14 takes 1"), std::string::npos) << three.message();
  EXPECT_EQ(check(make("CastLike", {DType::kF32}, 1)).code(), StatusCode::kInvalidModel);
  EXPECT_EQ(check(make("Relu", {DType::kF32}, 2)).code(), StatusCode::kInvalidModel);
  EXPECT_EQ(check(make("Relu", {DType::kF32}, 0)).code(), StatusCode::kInvalidModel);
  // Omitted optionals are fine, an omitted required input is not.
  EXPECT_TRUE(check(make("Clip", {DType::kF32, DType::kF32, DType::kF32}, 1, 13, {true, false, true})).is_ok());
  EXPECT_EQ(check(make("Clip", {DType::kF32, DType::kF32}, 1, 13, {false, true})).code(), StatusCode::kInvalidModel);
  EXPECT_EQ(check(make("Mean", {DType::kF32, DType::kF32}, 1, 13, {true, false})).code(), StatusCode::kInvalidModel);
  EXPECT_EQ(check(make("Concat", {}, 1)).code(), StatusCode::kInvalidModel);
}

TEST(Signature, ElementTypesAndTypeParameters) {
  EXPECT_EQ(check(make("Add", {DType::kF32, DType::kI64}, 1)).code(), StatusCode::kInvalidModel);
  EXPECT_EQ(check(make("Sigmoid", {DType::kI64}, 1)).code(), StatusCode::kInvalidModel);
  EXPECT_TRUE(check(make("Add", {DType::kI64, DType::kI64}, 1)).is_ok());
  // Newer than libonnx: lists later opsets widened are not held against the node...
  EXPECT_TRUE(check(make("ReduceMax", {DType::kBool, DType::kI64}, 1, 20)).is_ok());
  EXPECT_TRUE(check(make("Relu", {DType::kBF16}, 1, 22)).is_ok());
  // ...but one type parameter still means one type.
  EXPECT_EQ(check(make("Add", {DType::kF32, DType::kI64}, 1, 22)).code(), StatusCode::kInvalidModel);
  // Inputs later opsets added (the reductions' axes at 18) count at those opsets only.
  EXPECT_TRUE(check(make("ReduceMean", {DType::kF32, DType::kI64}, 1, 18)).is_ok());
  EXPECT_EQ(check(make("ReduceMean", {DType::kF32, DType::kI64}, 1, 17)).code(), StatusCode::kInvalidModel);
  // GridSample's grid has a type parameter of its own (libonnx 1.12's schema binds it to X's).
  EXPECT_TRUE(check(make("GridSample", {DType::kF32, DType::kF16}, 1, 16)).is_ok());
  EXPECT_TRUE(check(make("GridSample", {DType::kF16, DType::kF32}, 1, 22)).is_ok());
}

// Sum and Mean take float types at every opset. Past libonnx's opsets the signature check
// once let an integer Sum or Mean through (a fuzzed opset-18 Mean of u64 overflowed the
// CPU's conversion back from its f64 scale): now both the signature check and their shape
// function refuse it; Min and Max take integers.
TEST(Signature, SumAndMeanTakeFloatsOnlyPastLibonnxToo) {
  for (const char* op : {"Sum", "Mean", "Min", "Max"})
    for (DType dtype : {DType::kU64, DType::kI32, DType::kF32}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(dtype)));
      OneNode g = make(op, {dtype, dtype}, 1, 18);
      const bool float_only = std::string_view(op) == "Sum" || std::string_view(op) == "Mean";
      const bool refused = float_only && dtype != DType::kF32;
      Status signature = check(g);
      EXPECT_EQ(signature.code(), refused ? StatusCode::kInvalidModel : StatusCode::kOk) << signature.to_string();
      NodeId id = *g.graph.add_node(g.node);
      InferContext context(g.graph, id);
      Status inferred = find_op_schema("", op)->infer(context);
      if (refused) {
        EXPECT_EQ(inferred.code(), StatusCode::kInvalidModel);
        EXPECT_NE(inferred.message().find("takes float tensors"), std::string::npos) << inferred.message();
      } else {
        EXPECT_TRUE(inferred.is_ok()) << inferred.to_string();
      }
    }
}

// Past libonnx's opsets, lists widened within a kind (bf16, float8, int4, ReduceMax's bool)
// are accepted and a new kind is not; the quantizers, which crossed kinds, are left to
// their shape functions.
TEST(Signature, NewerOpsetsWidenTypeListsWithinAKind) {
  EXPECT_TRUE(check(make("Relu", {DType::kBF16}, 1, 22)).is_ok());
  EXPECT_TRUE(check(make("Identity", {DType::kI4}, 1, 21)).is_ok());
  OneNode cast = make("Cast", {DType::kF8E4M3FN}, 1, 19);
  cast.node.attributes.set_int("to", 1);
  EXPECT_TRUE(check(cast).is_ok());
  EXPECT_TRUE(check(make("ReduceMin", {DType::kBool}, 1, 20)).is_ok());
  EXPECT_TRUE(check(make("DequantizeLinear", {DType::kF8E4M3FN, DType::kF32}, 1, 19)).is_ok());
  EXPECT_EQ(check(make("Sigmoid", {DType::kI64}, 1, 22)).code(), StatusCode::kInvalidModel);
  EXPECT_EQ(check(make("Relu", {DType::kBool}, 1, 22)).code(), StatusCode::kInvalidModel);
  Status mean = check(make("Mean", {DType::kU64, DType::kU64}, 1, 18));
  EXPECT_NE(mean.message().find("input 0 ('in0') is u64, which Mean-13 does not take there"), std::string::npos)
      << mean.message();
  // Below the schema's opset, the list is exact.
  EXPECT_EQ(check(make("Relu", {DType::kBF16}, 1, 13)).code(), StatusCode::kOk);  // Relu-14 lists bf16
  EXPECT_EQ(check(make("Relu", {DType::kI4}, 1, 14)).code(), StatusCode::kInvalidModel);
}

// Ops past libonnx: every input's type against ONNX's constraint, not input 0's alone (an
// int32 DeformConv bias got through to the float64 reference's float reads).
TEST(Signature, OpsNewerThanLibonnxCheckEveryInputsType) {
  using D = DType;
  Status bias = check(make("DeformConv", {D::kF32, D::kF32, D::kF32, D::kI32}, 1, 19));
  EXPECT_NE(bias.message().find("input 3 ('in3') is i32, which DeformConv-19 does not take there (float types only)"),
            std::string::npos)
      << bias.message();
  Status mask = check(make("DeformConv", {D::kF32, D::kF32, D::kF32, D::kF32, D::kF16}, 1, 19));
  EXPECT_NE(mask.message().find("input 4 is f16 but input 0 is f32; DeformConv-19 takes one type for both"),
            std::string::npos)
      << mask.message();
  EXPECT_TRUE(check(make("DeformConv", {D::kF16, D::kF16, D::kF16, D::kF16, D::kF16}, 1, 19)).is_ok());
  // RMSNormalization's scale and Attention's V have type parameters of their own.
  EXPECT_TRUE(check(make("RMSNormalization", {D::kBF16, D::kF32}, 1, 23)).is_ok());
  EXPECT_EQ(check(make("RMSNormalization", {D::kBF16, D::kI32}, 1, 23)).code(), StatusCode::kInvalidModel);
  EXPECT_TRUE(check(make("Attention", {D::kF32, D::kF32, D::kF16}, 1, 23)).is_ok());
  EXPECT_EQ(check(make("Attention", {D::kF32, D::kF16, D::kF32}, 1, 23)).code(), StatusCode::kInvalidModel);
  EXPECT_TRUE(check(make("Attention", {D::kF32, D::kF32, D::kF32, D::kBool}, 1, 23)).is_ok());
  EXPECT_EQ(check(make("RotaryEmbedding", {D::kF32, D::kF32, D::kF32, D::kI32}, 1, 23)).code(),
            StatusCode::kInvalidModel);
  EXPECT_EQ(check(make("AffineGrid", {D::kF32, D::kI32}, 1, 20)).code(), StatusCode::kInvalidModel);
  EXPECT_EQ(check(make("BitwiseAnd", {D::kF32, D::kF32}, 1, 18)).code(), StatusCode::kInvalidModel);
  EXPECT_TRUE(check(make("BitwiseAnd", {D::kU16, D::kU16}, 1, 18)).is_ok());
  EXPECT_EQ(check(make("CumProd", {D::kBool, D::kI64}, 1, 26)).code(), StatusCode::kInvalidModel);
  EXPECT_TRUE(check(make("CenterCropPad", {D::kBool, D::kI32}, 1, 18)).is_ok());
  EXPECT_EQ(check(make("Col2Im", {D::kF32, D::kI32, D::kI64}, 1, 18)).code(), StatusCode::kInvalidModel);
}

TEST(Signature, AttributesOfTheRightKindAndKnownToTheOp) {
  OneNode g = make("Transpose", {DType::kF32}, 1);
  g.node.attributes.set_string("perm", "0");
  EXPECT_EQ(check(g).code(), StatusCode::kInvalidModel);
  g.node.attributes.set_ints("perm", {0});
  EXPECT_TRUE(check(g).is_ok());
  g.node.attributes.set_int("frobnicate", 1);
  EXPECT_EQ(check(g).code(), StatusCode::kInvalidModel);
  g.node.opset = 21;  // a newer version may define it
  EXPECT_TRUE(check(g).is_ok());
  OneNode cast = make("Cast", {DType::kF32}, 1);
  Status missing = check(cast);
  EXPECT_NE(missing.message().find("lacks attribute 'to'"), std::string::npos) << missing.message();
}

TEST(Signature, OpsetsItCannotMean) {
  EXPECT_EQ(check(make("CastLike", {DType::kF32, DType::kF32}, 1, 13)).code(), StatusCode::kInvalidModel);
  EXPECT_EQ(check(make("Relu", {DType::kF32}, 1, 1)).code(), StatusCode::kUnsupported);  // Relu-1, revised since
  EXPECT_TRUE(check(make("Not", {DType::kBool}, 1, 1)).is_ok());  // Not-1 is still current
  Graph future;
  future.opsets()[""] = 99;
  EXPECT_EQ(check_model_opsets(future).code(), StatusCode::kUnsupported);
  future.opsets()[""] = kMaxKnownOpset;
  EXPECT_TRUE(check_model_opsets(future).is_ok());
}

}  // namespace
}  // namespace strider
