#include "onnx/importer.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "onnx/tensor_proto.h"
#include "support/test_util.h"

namespace strider {
namespace {

using testing::add_input;
using testing::add_node;
using testing::add_output;
using ::testing::HasSubstr;
using testing::make_model;
using testing::random_tensor;
using testing::same_tensor;
using testing::serialize;
using testing::TempDir;
using TP = onnx::TensorProto;

Result<Graph> import(const onnx::ModelProto& m, const ImportOptions& options = {}) {
  std::vector<std::byte> bytes = serialize(m);
  return import_model_bytes(bytes, "", "test.onnx", options);
}

// y = Relu(Conv(x, W, B)) with a symbolic batch and an unnamed Conv.
onnx::ModelProto conv_model(const Tensor& w, const Tensor& b) {
  onnx::ModelProto m = make_model(13);
  auto* g = m.mutable_graph();
  add_input(g, "x", TP::FLOAT, {"N", 3, "", 8});
  *g->add_initializer() = tensor_to_proto(w, "W");
  *g->add_initializer() = testing::typed_proto(b, "B");
  auto* conv = add_node(g, "Conv", {"x", "W", "B"}, {"c"});
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int p : {1, 1, 1, 1}) pads->add_ints(p);
  add_node(g, "Relu", {"c"}, {"y"}, "relu");
  add_output(g, "y");
  return m;
}

TEST(Importer, ImportsInputsInitializersNodesAndOutputs) {
  Tensor w = random_tensor(DType::kF32, {4, 3, 3, 3}, 1), b = random_tensor(DType::kF32, {4}, 2);
  Result<Graph> r = import(conv_model(w, b));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Graph& g = *r;
  EXPECT_EQ(g.opsets(), (std::map<std::string, int>{{"", 13}}));
  ASSERT_EQ(g.inputs().size(), 1u);
  const Value& x = g.value(g.inputs()[0]);
  EXPECT_EQ(x.name, "x");
  EXPECT_TRUE(x.has_type && x.has_shape);
  EXPECT_EQ(x.dtype, DType::kF32);
  EXPECT_EQ(x.shape, (Shape{-1, 3, -1, 8}));
  EXPECT_EQ(x.dim_params, (std::vector<std::string>{"N", "", "?", ""}));
  const Value& wv = g.value(*g.find_value("W"));
  ASSERT_TRUE(wv.is_constant());
  EXPECT_TRUE(same_tensor(*wv.constant, w));
  EXPECT_EQ(wv.shape, w.shape());
  EXPECT_TRUE(same_tensor(*g.value(*g.find_value("B")).constant, b));
  ASSERT_EQ(g.num_nodes(), 2);
  const Node& conv = g.node(0);
  EXPECT_EQ(conv.name, "Conv_0");
  EXPECT_EQ(conv.op_type, "Conv");
  EXPECT_EQ(conv.opset, 13);
  EXPECT_EQ(conv.domain, "");
  EXPECT_EQ(conv.inputs,
            (std::vector<ValueId>{g.inputs()[0], *g.find_value("W"), *g.find_value("B")}));
  EXPECT_EQ(*conv.attributes.get_ints("pads", {}), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(g.node(1).name, "relu");
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "y");
  EXPECT_EQ(g.value(g.outputs()[0]).producer, 1);
  EXPECT_FALSE(g.value(g.outputs()[0]).has_type);  // shape inference sets it
}

TEST(Importer, InitializersOfEveryDTypeRawAndTyped) {
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  std::vector<Tensor> tensors;
  uint32_t seed = 10;
  for (DType d : kAllDTypes) {
    for (bool raw : {true, false}) {
      Tensor t = random_tensor(d, {2, 5}, seed++);
      std::string name = fmt::format("{}_{}", dtype_name(d), raw ? "raw" : "typed");
      *g->add_initializer() = raw ? tensor_to_proto(t, name) : testing::typed_proto(t, name);
      add_output(g, name, onnx_type_from_dtype(d));
      tensors.push_back(std::move(t));
    }
  }
  Result<Graph> r = import(m);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->inputs().empty());
  ASSERT_EQ(r->outputs().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Value& v = r->value(r->outputs()[i]);
    ASSERT_TRUE(v.is_constant()) << v.name;
    EXPECT_EQ(v.dtype, tensors[i].dtype());
    EXPECT_TRUE(same_tensor(*v.constant, tensors[i])) << v.name;
  }
}

TEST(Importer, InitializerListedAsGraphInputIsAConstant) {
  Tensor w = random_tensor(DType::kF32, {2, 2}, 3);
  onnx::ModelProto m = make_model(9);
  m.set_ir_version(3);
  auto* g = m.mutable_graph();
  add_input(g, "x", TP::FLOAT, {2, 2});
  add_input(g, "w", TP::FLOAT, {2, 2});
  *g->add_initializer() = tensor_to_proto(w, "w");
  add_node(g, "MatMul", {"x", "w"}, {"y"});
  add_output(g, "y");
  Result<Graph> r = import(m);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->inputs().size(), 1u);
  EXPECT_EQ(r->value(r->inputs()[0]).name, "x");
  EXPECT_TRUE(r->value(*r->find_value("w")).is_constant());
}

TEST(Importer, UnnamedNodesGetUniqueNames) {
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  add_input(g, "x", TP::FLOAT, {4});
  add_node(g, "Relu", {"x"}, {"a"}, "Relu_1");
  add_node(g, "Relu", {"a"}, {"b"});
  add_node(g, "Relu", {"b"}, {"c"});
  add_output(g, "c");
  Result<Graph> r = import(m);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->node(0).name, "Relu_1");
  EXPECT_EQ(r->node(1).name, "Relu_1_1");
  EXPECT_EQ(r->node(2).name, "Relu_2");
}

TEST(Importer, OmittedOptionalInputsAndOutputsAreNoValue) {
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  add_input(g, "x", TP::FLOAT, {4});
  *g->add_initializer() = tensor_to_proto(random_tensor(DType::kF32, {}, 4), "hi");
  add_node(g, "Clip", {"x", "", "hi"}, {"c"});
  add_node(g, "Dropout", {"c"}, {"y", ""});
  add_output(g, "y");
  Result<Graph> r = import(m);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Node& clip = r->node(0);
  ASSERT_EQ(clip.inputs.size(), 3u);
  EXPECT_EQ(clip.inputs[1], kNoValue);
  EXPECT_EQ(clip.input(1), kNoValue);
  EXPECT_EQ(clip.inputs[2], *r->find_value("hi"));
  EXPECT_EQ(r->node(1).outputs, (std::vector<ValueId>{*r->find_value("y"), kNoValue}));
}

TEST(Importer, EveryAttributeKind) {
  using AP = onnx::AttributeProto;
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  add_input(g, "x", TP::FLOAT, {4});
  auto* n = add_node(g, "Custom", {"x"}, {"y"}, "custom");
  auto attr = [&](const char* name, AP::AttributeType type) {
    auto* a = n->add_attribute();
    a->set_name(name);
    if (type != AP::UNDEFINED) a->set_type(type);
    return a;
  };
  attr("i", AP::INT)->set_i(-7);
  attr("f", AP::FLOAT)->set_f(0.25f);
  attr("s", AP::STRING)->set_s("nearest");
  auto* ints = attr("ints", AP::INTS);
  ints->add_ints(3), ints->add_ints(-1);
  auto* floats = attr("floats", AP::FLOATS);
  floats->add_floats(1.5f), floats->add_floats(-2.f);
  auto* strings = attr("strings", AP::STRINGS);
  strings->add_strings("a"), strings->add_strings("bc");
  Tensor value = random_tensor(DType::kI64, {3}, 5);
  *attr("t", AP::TENSOR)->mutable_t() = tensor_to_proto(value, "");
  attr("g", AP::GRAPH)->mutable_g()->set_name("body");
  attr("sparse", AP::SPARSE_TENSOR)->mutable_sparse_tensor();
  attr("tp", AP::TYPE_PROTO)->mutable_tp();
  attr("untyped", AP::UNDEFINED)->set_i(12);  // old exporters omit the type
  add_output(g, "y");
  Result<Graph> r = import(m);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const AttributeMap& a = r->node(0).attributes;
  EXPECT_EQ(*a.get_int("i", 0), -7);
  EXPECT_EQ(*a.get_float("f", 0), 0.25f);
  EXPECT_EQ(*a.get_string("s", ""), "nearest");
  EXPECT_EQ(*a.get_ints("ints", {}), (std::vector<int64_t>{3, -1}));
  EXPECT_EQ(*a.get_floats("floats", {}), (std::vector<float>{1.5f, -2.f}));
  EXPECT_EQ(a.find("strings")->strings, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(same_tensor(**a.require_tensor("t"), value));
  for (const char* k : {"g", "sparse", "tp"})
    EXPECT_EQ(a.find(k)->kind, Attribute::Kind::kGraph) << k;
  EXPECT_EQ(*a.get_int("untyped", 0), 12);

  n->mutable_attribute(0)->set_ref_attr_name("alpha");
  Result<Graph> ref = import(m);
  EXPECT_EQ(ref.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(ref.status().message(), HasSubstr("node 'custom' (Custom) attribute 'i'"));
  n->mutable_attribute(0)->clear_ref_attr_name();
  *n->add_attribute() = n->attribute(0);
  EXPECT_EQ(import(m).status().code(), StatusCode::kInvalidModel);  // duplicate attribute
}

TEST(Importer, DomainsAreNormalizedAndOpsetsAssigned) {
  onnx::ModelProto m = make_model();
  m.mutable_opset_import(0)->set_domain("ai.onnx");
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  auto* g = m.mutable_graph();
  add_input(g, "x", TP::FLOAT, {4});
  add_node(g, "Relu", {"x"}, {"a"})->set_domain("ai.onnx");
  add_node(g, "FusedGemm", {"a"}, {"y"})->set_domain("com.microsoft");
  add_output(g, "y");
  Result<Graph> r = import(m);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->opsets(), (std::map<std::string, int>{{"", 17}, {"com.microsoft", 1}}));
  EXPECT_EQ(r->node(0).domain, "");
  EXPECT_EQ(r->node(0).opset, 17);
  EXPECT_EQ(r->node(1).domain, "com.microsoft");
  EXPECT_EQ(r->node(1).opset, 1);
  m.mutable_graph()->mutable_node(1)->set_domain("org.unknown");
  Result<Graph> bad = import(m);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(bad.status().message(), HasSubstr("'org.unknown'"));
}

TEST(Importer, DanglingInputNamesTheNodeAndTheValue) {
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  add_input(g, "x", TP::FLOAT, {4});
  add_node(g, "Relu", {"x"}, {"a"}, "first");
  add_node(g, "Where", {"a", "x", "foo"}, {"y"}, "X");
  add_output(g, "y");
  Result<Graph> r = import(m);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(r.status().message(),
              HasSubstr("model 'test.onnx': node 'X' (Where) input 2 'foo' is not produced by any "
                        "earlier node, graph input or initializer"));
}

TEST(Importer, OutOfOrderNodesAreSortedAndCyclesRefused) {
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  add_input(g, "x", TP::FLOAT, {4});
  add_node(g, "Add", {"a", "b"}, {"y"}, "add");
  add_node(g, "Relu", {"x"}, {"a"}, "relu");
  add_node(g, "Neg", {"a"}, {"b"}, "neg");
  add_output(g, "y");
  Result<Graph> r = import(m);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->node(0).name, "relu");
  EXPECT_EQ(r->node(1).name, "neg");
  EXPECT_EQ(r->node(2).name, "add");
  EXPECT_EQ(r->value(*r->find_value("y")).producer, 2);

  Result<Graph> strict = import(m, ImportOptions{.sort_nodes = false});
  EXPECT_EQ(strict.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(strict.status().message(), HasSubstr("node 'add' (Add) input 0 'a'"));

  g->mutable_node(1)->set_input(0, "b");  // relu reads neg's output: a cycle
  Result<Graph> cycle = import(m);
  EXPECT_EQ(cycle.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(cycle.status().message(), HasSubstr("cycle"));
}

TEST(Importer, InconsistentGraphsAreInvalidModel) {
  auto base = [] {
    onnx::ModelProto m = make_model();
    add_input(m.mutable_graph(), "x", TP::FLOAT, {4});
    add_node(m.mutable_graph(), "Relu", {"x"}, {"y"}, "r");
    add_output(m.mutable_graph(), "y");
    return m;
  };
  onnx::ModelProto undefined_output = base();
  add_output(undefined_output.mutable_graph(), "nowhere");
  Result<Graph> r = import(undefined_output);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(r.status().message(), HasSubstr("graph output 'nowhere'"));

  onnx::ModelProto twice = base();
  add_node(twice.mutable_graph(), "Neg", {"x"}, {"y"}, "n");
  r = import(twice);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(r.status().message(), HasSubstr("node 'n' (Neg) output 0 'y'"));

  onnx::ModelProto overwrite_input = base();
  overwrite_input.mutable_graph()->mutable_node(0)->set_output(0, "x");
  EXPECT_EQ(import(overwrite_input).status().code(), StatusCode::kInvalidModel);

  onnx::ModelProto no_op = base();
  no_op.mutable_graph()->mutable_node(0)->clear_op_type();
  EXPECT_EQ(import(no_op).status().code(), StatusCode::kInvalidModel);

  onnx::ModelProto negative_dim = base();
  negative_dim.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(-4);
  EXPECT_EQ(import(negative_dim).status().code(), StatusCode::kInvalidModel);

  onnx::ModelProto typeless = base();
  typeless.mutable_graph()->mutable_input(0)->clear_type();
  EXPECT_EQ(import(typeless).status().code(), StatusCode::kInvalidModel);
}

TEST(Importer, UnsupportedInputTypesNameTheInputAndTheType) {
  onnx::ModelProto m = make_model();
  auto* g = m.mutable_graph();
  add_input(g, "words", TP::STRING, {3});
  add_node(g, "Identity", {"words"}, {"y"});
  add_output(g, "y", TP::STRING);
  Result<Graph> r = import(m);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(r.status().message(), HasSubstr("graph input 'words'"));
  EXPECT_THAT(r.status().message(), HasSubstr("STRING"));

  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(24);
  EXPECT_THAT(import(m).status().message(), HasSubstr("FLOAT8E8M0"));

  g->mutable_input(0)
      ->mutable_type()
      ->mutable_sequence_type()
      ->mutable_elem_type()
      ->mutable_tensor_type()
      ->set_elem_type(TP::FLOAT);
  r = import(m);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(r.status().message(), HasSubstr("sequence"));
}

TEST(Importer, ExternalDataRelativeToTheModelFile) {
  TempDir dir;
  Tensor w = random_tensor(DType::kF32, {8, 4}, 21);
  testing::write_bytes(dir.file("w.bin"),
                       std::string(reinterpret_cast<const char*>(w.bytes()), w.byte_size()));
  testing::write_bytes(dir.file("escape.bin"), std::string(w.byte_size(), '\0'));
  std::filesystem::create_directories(dir.path() / "model");
  std::filesystem::copy_file(dir.file("w.bin"), dir.file("model/w.bin"));
  auto model_with = [&](const std::string& location) {
    onnx::ModelProto m = make_model();
    auto* g = m.mutable_graph();
    add_input(g, "x", TP::FLOAT, {2, 8});
    TP* init = g->add_initializer();
    init->set_name("w");
    init->set_data_type(TP::FLOAT);
    init->add_dims(8), init->add_dims(4);
    init->set_data_location(TP::EXTERNAL);
    auto* e = init->add_external_data();
    e->set_key("location"), e->set_value(location);
    add_node(g, "MatMul", {"x", "w"}, {"y"});
    add_output(g, "y");
    return m;
  };
  testing::write_bytes(dir.file("model/good.onnx"), serialize(model_with("w.bin")));
  Result<Graph> r = import_model_file(dir.file("model/good.onnx"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(same_tensor(*r->value(*r->find_value("w")).constant, w));

  for (const std::string& location : {std::string("../escape.bin"), dir.file("escape.bin")}) {
    testing::write_bytes(dir.file("model/bad.onnx"), serialize(model_with(location)));
    Result<Graph> bad = import_model_file(dir.file("model/bad.onnx"));
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidModel) << location;
    EXPECT_THAT(bad.status().message(), HasSubstr("initializer 'w'"));
    EXPECT_THAT(bad.status().message(), HasSubstr(location));
  }
  // Bytes imported without a folder cannot resolve external data.
  EXPECT_EQ(import(model_with("w.bin")).status().code(), StatusCode::kInvalidArgument);
}

TEST(Importer, TruncatedGarbageAndMissingFilesAreStatuses) {
  TempDir dir;
  std::vector<std::byte> full = serialize(
      conv_model(random_tensor(DType::kF32, {4, 3, 3, 3}, 6), random_tensor(DType::kF32, {4}, 7)));
  std::vector<std::byte> half(full.begin(), full.begin() + std::ptrdiff_t(full.size() / 2));
  testing::write_bytes(dir.file("half.onnx"), half);
  Result<Graph> r = import_model_file(dir.file("half.onnx"));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(
      r.status().message(),
      HasSubstr(fmt::format("model '{}': not a valid ONNX ModelProto (truncated or corrupt?)",
                            dir.file("half.onnx"))));
  for (size_t n = 0; n < full.size(); ++n) {  // every cut fails cleanly
    Result<Graph> cut = import_model_bytes(std::span(full.data(), n), "", "cut");
    EXPECT_EQ(cut.status().code(), StatusCode::kInvalidModel) << n;
  }
  std::mt19937 rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::byte> garbage(size_t(rng() % 4096));
    for (std::byte& b : garbage) b = std::byte(rng());
    EXPECT_FALSE(import_model_bytes(garbage, "", "garbage").is_ok()) << trial;
  }
  testing::write_bytes(dir.file("garbage.onnx"), std::string("this is not a model at all\n"));
  EXPECT_EQ(import_model_file(dir.file("garbage.onnx")).status().code(), StatusCode::kInvalidModel);
  Result<Graph> missing = import_model_file(dir.file("missing.onnx"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir.file("missing.onnx")));
}

TEST(Importer, CorruptedBytesNeverCrash) {
  std::vector<std::byte> full = serialize(
      conv_model(random_tensor(DType::kF32, {4, 3, 3, 3}, 8), random_tensor(DType::kF32, {4}, 9)));
  std::mt19937 rng(7);
  int imported = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::byte> bytes = full;
    for (int k = 0; k < 1 + int(rng() % 4); ++k) bytes[rng() % bytes.size()] = std::byte(rng());
    imported += import_model_bytes(bytes, "", "flipped").is_ok();  // either way, no crash
  }
  RecordProperty("imported", imported);
}

}  // namespace
}  // namespace strider
