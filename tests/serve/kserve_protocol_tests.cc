// The Open Inference Protocol's request parsing and response writing (tools/serve/
// kserve_protocol.h), without a server: every datatype's JSON decoding and its range checks,
// nested data, the binary extension's offsets, and each malformed request's message.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kserve_protocol.h"

namespace strider::serve {
namespace {

using nlohmann::json;

std::vector<ValueInfo> model_inputs() {
  return {{"x", DType::kF32, {-1, 3}, {}}, {"ids", DType::kI64, {2}, {}}, {"flag", DType::kBool, {1}, {}}};
}

json three_inputs(json x_data) {
  return {{"inputs", {{{"name", "x"}, {"shape", {2, 3}}, {"datatype", "FP32"}, {"data", x_data}},
                      {{"name", "ids"}, {"shape", {2}}, {"datatype", "INT64"}, {"data", {-5, 9007199254740993LL}}},
                      {{"name", "flag"}, {"shape", {1}}, {"datatype", "BOOL"}, {"data", {true}}}}}};
}

std::string error_of(const std::string& body, std::optional<size_t> header = std::nullopt,
                     std::vector<ValueInfo> inputs = model_inputs()) {
  Result<InferRequest> r = parse_infer_request(body, header, inputs);
  return r.is_ok() ? "parsed" : r.status().message();
}

TEST(KserveProtocol, NestedAndFlatDataDecodeTheSame) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> v(6);
  for (float& f : v) f = u(rng);
  json flat = v, nested = {{v[0], v[1], v[2]}, {v[3], v[4], v[5]}};
  for (const json& data : {flat, nested}) {
    Result<InferRequest> r = parse_infer_request(three_inputs(data).dump(), std::nullopt, model_inputs());
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Tensor& x = r->inputs.at("x");
    EXPECT_EQ(x.shape(), (Shape{2, 3}));
    EXPECT_EQ(std::memcmp(x.data<float>(), v.data(), 24), 0);
    EXPECT_EQ(r->inputs.at("ids").data<int64_t>()[1], 9007199254740993LL) << "int64 beyond a double's 53 bits";
    EXPECT_TRUE(r->inputs.at("flag").data<bool>()[0]);
  }
}

TEST(KserveProtocol, IntegersOutOfTheirRangeAndWrongKindsAreNamed) {
  std::vector<ValueInfo> small = {{"b", DType::kI8, {2}, {}}, {"u", DType::kU16, {1}, {}}};
  auto body = [](json b, json u) {
    return json{{"inputs", {{{"name", "b"}, {"shape", {2}}, {"datatype", "INT8"}, {"data", b}},
                            {{"name", "u"}, {"shape", {1}}, {"datatype", "UINT16"}, {"data", u}}}}}.dump();
  };
  EXPECT_EQ(error_of(body({1, -128}, {65535}), std::nullopt, small), "parsed");
  EXPECT_EQ(error_of(body({1, 128}, {1}), std::nullopt, small), "input 'b': element 1 (128) is not an integer of its datatype");
  EXPECT_EQ(error_of(body({1, 2}, {-1}), std::nullopt, small), "input 'u': element 0 (-1) is not an integer of its datatype");
  EXPECT_EQ(error_of(body({1, 2.5}, {1}), std::nullopt, small), "input 'b': element 1 (2.5) is not an integer of its datatype");
  EXPECT_EQ(error_of(three_inputs({1, 2, 3, 4, 5, "6"}).dump()), "input 'x': element 5 (\"6\") is not a number");
}

TEST(KserveProtocol, HalfPrecisionInputsRoundFromJson) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    std::vector<ValueInfo> inputs = {{"h", t, {3}, {}}};
    json body = {{"inputs", {{{"name", "h"}, {"shape", {3}}, {"datatype", std::string(kserve_datatype(t))}, {"data", {0.5, -3.25, 1e-3}}}}}};
    Result<InferRequest> r = parse_infer_request(body.dump(), std::nullopt, inputs);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Tensor& h = r->inputs.at("h");
    EXPECT_EQ(h.dtype(), t);
    EXPECT_EQ(h.element_as_double(1), -3.25);
    EXPECT_NEAR(h.element_as_double(2), 1e-3, 1e-5);
  }
}

TEST(KserveProtocol, BinaryInputsTakeTheirBytesInOrderAndNoneAreLeftOver) {
  std::vector<ValueInfo> inputs = {{"a", DType::kF32, {2}, {}}, {"b", DType::kI32, {3}, {}}, {"c", DType::kF32, {1}, {}}};
  json header = {{"inputs", {{{"name", "a"}, {"shape", {2}}, {"datatype", "FP32"}, {"parameters", {{"binary_data_size", 8}}}},
                             {{"name", "c"}, {"shape", {1}}, {"datatype", "FP32"}, {"data", {7.5}}},
                             {{"name", "b"}, {"shape", {3}}, {"datatype", "INT32"}, {"parameters", {{"binary_data_size", 12}}}}}}};
  const std::string head = header.dump();
  const float a[2] = {1.25f, -0.5f};
  const int32_t b[3] = {-7, 3, 1 << 30};
  std::string body = head + std::string(reinterpret_cast<const char*>(a), 8) + std::string(reinterpret_cast<const char*>(b), 12);
  Result<InferRequest> r = parse_infer_request(body, head.size(), inputs);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->inputs.at("a").data<float>()[1], -0.5f);
  EXPECT_EQ(r->inputs.at("b").data<int32_t>()[2], 1 << 30);
  EXPECT_EQ(r->inputs.at("c").data<float>()[0], 7.5f);
  EXPECT_EQ(error_of(body + "x", head.size(), inputs), "1 bytes of binary data follow the header that no input claims");
  EXPECT_EQ(error_of(body.substr(0, body.size() - 1), head.size(), inputs),
            "input 'b': binary_data_size 12 but only 11 bytes of binary data are left");
  EXPECT_EQ(error_of(body, body.size() + 1, inputs), "Inference-Header-Content-Length " + std::to_string(body.size() + 1) +
                                                         " is more than the body's " + std::to_string(body.size()) + " bytes");
}

TEST(KserveProtocol, MalformedRequestsSayWhatIsWrong) {
  EXPECT_EQ(error_of("[1, 2"), "the request is not valid JSON");
  EXPECT_EQ(error_of("[1, 2]"), "the request must be a JSON object");
  EXPECT_EQ(error_of("{}"), "the request needs an 'inputs' array");
  json twice = three_inputs({1, 2, 3, 4, 5, 6});
  twice["inputs"].push_back(twice["inputs"][0]);
  EXPECT_EQ(error_of(twice.dump()), "input 'x' is given twice");
  json missing = three_inputs({1, 2, 3, 4, 5, 6});
  missing["inputs"].erase(2);
  EXPECT_EQ(error_of(missing.dump()), "input 'flag' is missing");
  json negative = three_inputs({1, 2, 3, 4, 5, 6});
  negative["inputs"][0]["shape"] = {-2, 3};
  EXPECT_EQ(error_of(negative.dump()), "input 'x': shape [-2, 3] has a size that is not a non-negative integer");
  json huge = three_inputs({1});
  huge["inputs"][0]["shape"] = {1 << 30, 1 << 30, 1 << 30};
  EXPECT_EQ(error_of(huge.dump()), "input 'x': shape [1073741824, 1073741824, 1073741824] is too large");
  json bytes = three_inputs({1, 2, 3, 4, 5, 6});
  bytes["inputs"][0]["datatype"] = "BYTES";
  EXPECT_EQ(error_of(bytes.dump()), "input 'x': datatype BYTES, the model takes FP32");
}

TEST(KserveProtocol, ResponsesCarryJsonOrBinaryOutputsAsAsked) {
  std::vector<ValueInfo> outputs = {{"y", DType::kF32, {2}, {}}, {"n", DType::kI64, {1}, {}}};
  std::vector<Tensor> values = {Tensor::from_values<float>(DType::kF32, {2}, std::vector<float>{0.75f, -2.0f}),
                                Tensor::from_values<int64_t>(DType::kI64, {1}, std::vector<int64_t>{-3})};
  InferRequest request;
  request.id = "42";
  request.outputs = {{"n", false}, {"y", true}};
  Result<InferResponse> r = make_infer_response("m", "2", request, outputs, values);
  ASSERT_TRUE(r.is_ok());
  ASSERT_TRUE(r->header_length.has_value());
  json head = json::parse(r->body.substr(0, *r->header_length));
  EXPECT_EQ(head["id"], "42");
  EXPECT_EQ(head["model_version"], "2");
  EXPECT_EQ(head["outputs"][0]["data"], json({-3}));
  EXPECT_EQ(head["outputs"][1]["parameters"]["binary_data_size"], 8);
  float y[2];
  ASSERT_EQ(r->body.size(), *r->header_length + 8);
  std::memcpy(y, r->body.data() + *r->header_length, 8);
  EXPECT_EQ(y[0], 0.75f);
  EXPECT_EQ(y[1], -2.0f);
  request.outputs = {{"nope", false}};
  EXPECT_EQ(make_infer_response("m", "2", request, outputs, values).status().message(), "output 'nope' is not an output of the model");
}

}  // namespace
}  // namespace strider::serve
