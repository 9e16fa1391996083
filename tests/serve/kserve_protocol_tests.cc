// The Open Inference Protocol's request parsing and response writing (tools/serve/
// kserve_protocol.h), without a server: every datatype's JSON decoding and its range checks,
// nested data, the binary extension's offsets, and each malformed request's message.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

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

// A POSIX shared-memory object of `bytes` bytes, filled with seeded random bytes, unlinked
// when the test ends (the registry's mappings keep it alive while registered).
class SharedObject {
 public:
  explicit SharedObject(size_t bytes) : key_("/strider-test-" + std::to_string(getpid())) {
    const int fd = shm_open(key_.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, off_t(bytes)), 0);
    data_ = static_cast<std::byte*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
    bytes_ = bytes;
    std::mt19937 rng(11);
    for (size_t i = 0; i < bytes; ++i) data_[i] = std::byte(rng());
  }
  ~SharedObject() {
    munmap(data_, bytes_);
    shm_unlink(key_.c_str());
  }
  const std::string& key() const { return key_; }
  std::byte* at(size_t offset) { return data_ + offset; }

 private:
  std::string key_;
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

// Triton's system shared-memory extension: an input read from a registered range (the
// region starting inside a page, the input at an offset in it), an output written into
// one, and each way a client can get it wrong named.
TEST(KserveProtocol, SharedMemoryRangesCarryInputsAndOutputs) {
  SharedObject object(5000);
  SharedMemoryRegistry regions;
  ASSERT_TRUE(regions.register_region("r", object.key(), 3000, 1000).is_ok());
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2, 2);
  float x[6];
  for (float& f : x) f = u(rng);
  std::memcpy(object.at(3000 + 16), x, sizeof x);
  auto with_shm_x = [](json x_params) {
    json body = three_inputs({});
    body["inputs"][0].erase("data");
    body["inputs"][0]["parameters"] = x_params;
    body["outputs"] = {{{"name", "y"}, {"parameters", {{"shared_memory_region", "r"}, {"shared_memory_byte_size", 24},
                                                        {"shared_memory_offset", 100}}}}};
    return body.dump();
  };
  const json good = {{"shared_memory_region", "r"}, {"shared_memory_byte_size", 24}, {"shared_memory_offset", 16}};
  Result<InferRequest> r = parse_infer_request(with_shm_x(good), std::nullopt, model_inputs(), &regions);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(std::memcmp(r->inputs.at("x").data<float>(), x, sizeof x), 0);
  ASSERT_TRUE(r->outputs[0].shared_memory.has_value());

  // The output lands at the region's offset 100; the response names it and carries no data.
  std::vector<ValueInfo> outputs = {{"y", DType::kF32, {2, 3}, {}}};
  std::vector<Tensor> values = {Tensor::from_values<float>(DType::kF32, {2, 3}, std::vector<float>(x, x + 6))};
  std::byte before[4];
  std::memcpy(before, object.at(3000 + 100 + 24), 4);
  Result<InferResponse> response = make_infer_response("m", "1", *r, outputs, values);
  ASSERT_TRUE(response.is_ok()) << response.status().to_string();
  EXPECT_EQ(std::memcmp(object.at(3000 + 100), x, sizeof x), 0);
  EXPECT_EQ(std::memcmp(object.at(3000 + 100 + 24), before, 4), 0) << "a byte past the output was written";
  const json head = json::parse(response->body);
  EXPECT_EQ(head["outputs"][0]["parameters"]["shared_memory_region"], "r");
  EXPECT_EQ(head["outputs"][0]["parameters"]["shared_memory_byte_size"], 24);
  EXPECT_FALSE(head["outputs"][0].contains("data"));

  // An output larger than its range: an error, and nothing written.
  r->outputs[0].shared_memory->byte_size = 20;
  std::memcpy(object.at(3000 + 100), before, 4);
  EXPECT_EQ(make_infer_response("m", "1", *r, outputs, values).status().message(),
            "output 'y' of 24 bytes does not fit the 20 bytes of shared memory region 'r' asked for");
  EXPECT_EQ(std::memcmp(object.at(3000 + 100), before, 4), 0);

  auto error = [&](json params, const SharedMemoryRegistry* with = nullptr) {
    Result<InferRequest> bad = parse_infer_request(with_shm_x(params), std::nullopt, model_inputs(), with);
    return bad.is_ok() ? "parsed" : bad.status().message();
  };
  json p = good;
  EXPECT_EQ(error(p), "input 'x': this server takes no shared memory");
  p["shared_memory_byte_size"] = 20;
  EXPECT_EQ(error(p, &regions), "input 'x': shared_memory_byte_size 20 for shape [2, 3] of FP32 (24 bytes)");
  p = good, p["shared_memory_offset"] = 980;
  EXPECT_EQ(error(p, &regions), "input 'x': bytes [980, 1004) of shared memory region 'r' lie past its 1000 bytes");
  p = good, p["shared_memory_region"] = "q";
  EXPECT_EQ(error(p, &regions), "input 'x': no shared memory region 'q' is registered");
  p = good, p.erase("shared_memory_byte_size");
  EXPECT_EQ(error(p, &regions), "input 'x': shared_memory_byte_size must be given as a non-negative integer");

  // Registration's own errors, the status, and a request after the region is gone.
  EXPECT_EQ(regions.register_region("r", object.key(), 0, 8).message(), "shared memory region 'r' is already registered");
  EXPECT_EQ(regions.register_region("s", "no-slash", 0, 8).message(),
            "shared memory region 's': key 'no-slash' is not a shared-memory object name (\"/name\")");
  EXPECT_EQ(regions.register_region("s", object.key(), 4990, 11).message(),
            "shared memory region 's': bytes [4990, 5001) lie past the end of '" + object.key() + "' (5000 bytes)");
  EXPECT_EQ(regions.register_region("s", "/strider-test-none", 0, 8).code(), StatusCode::kNotFound);
  Result<json> status = regions.status(std::nullopt);
  ASSERT_TRUE(status.is_ok());
  EXPECT_EQ(*status, json::parse(R"([{"name": "r", "key": ")" + object.key() + R"(", "offset": 3000, "byte_size": 1000}])"));
  ASSERT_TRUE(regions.unregister("r").is_ok());
  EXPECT_EQ(regions.unregister("r").code(), StatusCode::kNotFound);
  EXPECT_EQ(error(good, &regions), "input 'x': no shared memory region 'r' is registered");
}

}  // namespace
}  // namespace strider::serve
