#include "onnx/tensor_proto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "strider/tensor_file.h"
#include "support/test_util.h"

namespace strider {
namespace {

using ::testing::HasSubstr;
using testing::random_tensor;
using testing::same_tensor;
using testing::TempDir;
using TP = onnx::TensorProto;

TEST(TensorProto, DTypeMappingMatchesOnnxCodes) {
  EXPECT_EQ(dtype_from_onnx(TP::FLOAT), DType::kF32);
  EXPECT_EQ(dtype_from_onnx(TP::FLOAT16), DType::kF16);
  EXPECT_EQ(dtype_from_onnx(TP::BFLOAT16), DType::kBF16);
  EXPECT_EQ(dtype_from_onnx(TP::DOUBLE), DType::kF64);
  EXPECT_EQ(dtype_from_onnx(TP::INT64), DType::kI64);
  EXPECT_EQ(dtype_from_onnx(TP::INT32), DType::kI32);
  EXPECT_EQ(dtype_from_onnx(TP::INT8), DType::kI8);
  EXPECT_EQ(dtype_from_onnx(TP::UINT8), DType::kU8);
  EXPECT_EQ(dtype_from_onnx(TP::BOOL), DType::kBool);
  EXPECT_EQ(dtype_from_onnx(TP::INT16), DType::kI16);
  EXPECT_EQ(dtype_from_onnx(TP::UINT16), DType::kU16);
  EXPECT_EQ(dtype_from_onnx(TP::UINT32), DType::kU32);
  EXPECT_EQ(dtype_from_onnx(TP::UINT64), DType::kU64);
  EXPECT_EQ(dtype_from_onnx(17), DType::kF8E4M3FN);
  EXPECT_EQ(dtype_from_onnx(22), DType::kI4);
  for (int t : {0, 8, 14, 15, 24, 99})
    EXPECT_FALSE(dtype_from_onnx(t).has_value()) << t;
  for (DType d : kAllDTypes) EXPECT_EQ(dtype_from_onnx(onnx_type_from_dtype(d)), d);
  EXPECT_EQ(onnx_type_name(17), "FLOAT8E4M3FN");
  EXPECT_EQ(onnx_type_name(TP::STRING), "STRING");
}

TEST(TensorProto, RawDataRoundTripsEveryDType) {
  uint32_t seed = 1;
  for (DType d : kAllDTypes) {
    for (const Shape& shape : {Shape{}, Shape{7}, Shape{2, 3, 5}, Shape{4, 0, 2}}) {
      Tensor t = random_tensor(d, shape, seed++);
      TP proto = tensor_to_proto(t, "w");
      EXPECT_EQ(proto.data_type(), onnx_type_from_dtype(d));
      EXPECT_TRUE(proto.has_raw_data());
      Result<Tensor> back = tensor_from_proto(proto, "", "");
      ASSERT_TRUE(back.is_ok()) << back.status().to_string();
      EXPECT_TRUE(same_tensor(t, *back)) << dtype_name(d);
    }
  }
}

TEST(TensorProto, TypedFieldsGiveTheSameTensorAsRawData) {
  uint32_t seed = 100;
  for (DType d : kAllDTypes) {
    Tensor t = random_tensor(d, {3, 4}, seed++);
    Result<Tensor> back = tensor_from_proto(testing::typed_proto(t, "w"), "", "");
    ASSERT_TRUE(back.is_ok()) << dtype_name(d) << ": " << back.status().to_string();
    EXPECT_TRUE(same_tensor(t, *back)) << dtype_name(d);
  }
}

TEST(TensorProto, ElementCountMustMatchDims) {
  Tensor t = random_tensor(DType::kF32, {2, 3}, 7);
  TP raw = tensor_to_proto(t, "weights");
  raw.add_dims(2);  // [2, 3, 2] needs twice the bytes
  Result<Tensor> r = tensor_from_proto(raw, "", "");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(r.status().message(), HasSubstr("tensor 'weights'"));
  EXPECT_THAT(r.status().message(), HasSubstr("raw_data"));

  TP typed = testing::typed_proto(t, "bias");
  typed.mutable_float_data()->RemoveLast();
  r = tensor_from_proto(typed, "", "initializer 'bias'");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(r.status().message(), HasSubstr("initializer 'bias': float_data holds 5"));

  TP empty;  // no data at all for 6 elements
  empty.set_name("e");
  empty.set_data_type(TP::INT64);
  empty.add_dims(6);
  EXPECT_EQ(tensor_from_proto(empty, "", "").status().code(), StatusCode::kInvalidModel);
}

TEST(TensorProto, BadDimsAreErrorsWithoutHugeAllocations) {
  TP p;
  p.set_name("w");
  p.set_data_type(TP::FLOAT);
  p.add_dims(2);
  p.add_dims(-3);
  Result<Tensor> r = tensor_from_proto(p, "", "");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(r.status().message(), HasSubstr("negative dimension"));
  p.clear_dims();
  p.add_dims(int64_t(1) << 40);
  p.add_dims(int64_t(1) << 40);
  EXPECT_EQ(tensor_from_proto(p, "", "").status().code(), StatusCode::kInvalidModel);
  p.clear_dims();
  p.add_dims(int64_t(1) << 40);  // representable, but no data behind it
  EXPECT_EQ(tensor_from_proto(p, "", "").status().code(), StatusCode::kInvalidModel);
}

TEST(TensorProto, UnsupportedTypesNameTheTensorAndTheType) {
  struct Case {
    int type;
    const char* name;
  };
  for (Case c :
       {Case{TP::STRING, "STRING"}, Case{TP::COMPLEX64, "COMPLEX64"}, Case{TP::COMPLEX128, "COMPLEX128"},
        Case{24, "FLOAT8E8M0"}}) {
    TP p;
    p.set_name("odd");
    p.set_data_type(c.type);
    p.add_dims(1);
    p.set_raw_data(std::string(16, '\0'));
    Result<Tensor> r = tensor_from_proto(p, "", "");
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << c.name;
    EXPECT_THAT(r.status().message(), HasSubstr("tensor 'odd'"));
    EXPECT_THAT(r.status().message(), HasSubstr(c.name));
  }
  TP seg = tensor_to_proto(random_tensor(DType::kF32, {4}, 3), "seg");
  seg.mutable_segment()->set_begin(0);
  seg.mutable_segment()->set_end(2);
  EXPECT_EQ(tensor_from_proto(seg, "", "").status().code(), StatusCode::kUnsupported);
  TP undefined;
  undefined.set_name("u");
  EXPECT_EQ(tensor_from_proto(undefined, "", "").status().code(), StatusCode::kInvalidModel);
}

TEST(TensorProto, NarrowValuesInInt32DataAreRangeChecked) {
  TP p;
  p.set_name("q");
  p.set_data_type(TP::INT8);
  p.add_dims(3);
  for (int v : {5, -100, 300}) p.add_int32_data(v);
  Result<Tensor> r = tensor_from_proto(p, "", "");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(r.status().message(), HasSubstr("int32_data[2] = 300"));
}

TEST(TensorProto, BoolBytesAreNormalizedToZeroOrOne) {
  TP p;
  p.set_name("mask");
  p.set_data_type(TP::BOOL);
  p.add_dims(4);
  p.set_raw_data(std::string("\x00\x07\x01\xff", 4));
  Result<Tensor> r = tensor_from_proto(p, "", "");
  ASSERT_TRUE(r.is_ok());
  const uint8_t* b = r->data<uint8_t>();
  EXPECT_EQ(std::vector<int>(b, b + 4), (std::vector<int>{0, 1, 1, 1}));
}

// A TensorProto whose data lives in `location` at `offset`.
TP external_proto(const Tensor& t, const std::string& location, int64_t offset) {
  TP p = tensor_to_proto(t, "big");
  p.clear_raw_data();
  p.set_data_location(TP::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = p.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  add("offset", std::to_string(offset));
  add("length", std::to_string(t.byte_size()));
  return p;
}

TEST(TensorProto, ExternalDataIsReadFromTheModelFolder) {
  TempDir dir;
  Tensor t = random_tensor(DType::kF32, {3, 5}, 11);
  std::string blob(100, 'x');
  blob.append(reinterpret_cast<const char*>(t.bytes()), t.byte_size());
  std::filesystem::create_directories(dir.path() / "weights");
  testing::write_bytes(dir.file("weights/w.bin"), blob);
  Result<Tensor> r = tensor_from_proto(external_proto(t, "weights/w.bin", 100), dir.path(), "");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(same_tensor(t, *r));

  // Wrong length, a file too short, a missing file, no folder at all.
  TP bad = external_proto(t, "weights/w.bin", 100);
  bad.mutable_external_data(2)->set_value("8");
  EXPECT_EQ(tensor_from_proto(bad, dir.path(), "").status().code(), StatusCode::kInvalidModel);
  Result<Tensor> short_file =
      tensor_from_proto(external_proto(t, "weights/w.bin", 120), dir.path(), "");
  EXPECT_EQ(short_file.status().code(), StatusCode::kInvalidModel);
  Result<Tensor> missing = tensor_from_proto(external_proto(t, "nope.bin", 0), dir.path(), "");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidModel);  // the model's bundle is incomplete
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.bin"));
  Result<Tensor> no_dir = tensor_from_proto(external_proto(t, "weights/w.bin", 100), "", "");
  EXPECT_EQ(no_dir.status().code(), StatusCode::kInvalidArgument);
  TP bad_offset = external_proto(t, "weights/w.bin", 0);
  bad_offset.mutable_external_data(1)->set_value("12abc");
  EXPECT_EQ(tensor_from_proto(bad_offset, dir.path(), "").status().code(),
            StatusCode::kInvalidModel);
}

TEST(TensorProto, ExternalDataOutsideTheModelFolderIsRefused) {
  TempDir outer;
  std::filesystem::create_directories(outer.path() / "model");
  Tensor t = random_tensor(DType::kF32, {4}, 12);
  std::string bytes(reinterpret_cast<const char*>(t.bytes()), t.byte_size());
  testing::write_bytes(outer.file("escape.bin"), bytes);
  std::string model_dir = outer.file("model");
  for (const std::string& location :
       {std::string("../escape.bin"), std::string("sub/../../escape.bin"),
        outer.file("escape.bin")}) {
    Result<Tensor> r = tensor_from_proto(external_proto(t, location, 0), model_dir, "");
    ASSERT_FALSE(r.is_ok()) << location;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel) << location;
    EXPECT_THAT(r.status().message(), HasSubstr(location));
  }
  // A symlink inside the folder that points outside it.
  std::error_code ec;
  std::filesystem::create_symlink(outer.file("escape.bin"), outer.file("model/link.bin"), ec);
  ASSERT_FALSE(ec) << ec.message();
  Result<Tensor> r = tensor_from_proto(external_proto(t, "link.bin", 0), model_dir, "");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_THAT(r.status().message(), HasSubstr("is a symbolic link"));
}

TEST(TensorPb, RoundTripsEveryDTypeThroughFiles) {
  TempDir dir;
  uint32_t seed = 200;
  for (DType d : kAllDTypes) {
    Tensor t = random_tensor(d, {2, 3, 4}, seed++);
    std::string path = dir.file(std::string(dtype_name(d)) + ".pb");
    ASSERT_TRUE(write_tensor_pb(path, t, "x").is_ok());
    Result<Tensor> back = read_tensor_pb(path);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_TRUE(same_tensor(t, *back)) << dtype_name(d);
    Result<Tensor> by_ext = read_tensor_file(path);
    ASSERT_TRUE(by_ext.is_ok());
    EXPECT_TRUE(same_tensor(t, *by_ext));
  }
}

TEST(TensorPb, BadFilesAreStatuses) {
  TempDir dir;
  Result<Tensor> missing = read_tensor_pb(dir.file("missing.pb"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.pb"));
  testing::write_bytes(dir.file("garbage.pb"), std::string("\xff\xff\xff\xff\x0f garbage", 13));
  Result<Tensor> garbage = read_tensor_pb(dir.file("garbage.pb"));
  EXPECT_EQ(garbage.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(garbage.status().message(), HasSubstr("garbage.pb"));
  // Every prefix of a valid file: an error or (at full length) the tensor, never a crash.
  Tensor t = random_tensor(DType::kI32, {5, 3}, 5);
  std::string full = tensor_to_proto(t, "t").SerializeAsString();
  for (size_t n = 0; n < full.size(); ++n) {
    testing::write_bytes(dir.file("cut.pb"), full.substr(0, n));
    EXPECT_FALSE(read_tensor_pb(dir.file("cut.pb")).is_ok()) << n;
  }
  Result<Tensor> unknown = read_tensor_file(dir.file("x.bin"));
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr(".npy, .pb"));
  EXPECT_EQ(write_tensor_file(dir.file("x.txt"), t, "t").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(write_tensor_pb(dir.file("no/such/dir/x.pb"), t, "t").code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace strider
