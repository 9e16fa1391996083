#include "onnx/npy.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/shape.h"
#include "strider/tensor_file.h"
#include "support/test_util.h"

namespace strider {
namespace {

using ::testing::HasSubstr;
using testing::random_tensor;
using testing::same_tensor;
using testing::TempDir;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A .npy file as numpy writes it: magic, version, little-endian header length, header.
std::string npy_file(int major, const std::string& dict, const std::string& data) {
  std::string header = dict;
  size_t preamble = major == 1 ? 10 : 12;
  while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = "\x93NUMPY";
  file += char(major);
  file += char(0);
  for (size_t i = 0; i < preamble - 8; ++i) file += char((header.size() >> (8 * i)) & 0xff);
  return file + header + data;
}

template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(Npy, RoundTripsEveryNumpyDType) {
  TempDir dir;
  uint32_t seed = 300;
  for (DType d : kAllDTypes) {
    if (d == DType::kBF16 || is_small_type(d)) continue;  // no numpy type
    for (const Shape& shape : {Shape{}, Shape{9}, Shape{2, 3, 4}, Shape{3, 0}}) {
      Tensor t = random_tensor(d, shape, seed++);
      std::string path = dir.file("t.npy");
      ASSERT_TRUE(write_npy(path, t).is_ok());
      EXPECT_EQ(read_all(path).size() % 64, t.byte_size() % 64);  // data starts 64-aligned
      Result<Tensor> back = read_npy(path);
      ASSERT_TRUE(back.is_ok()) << back.status().to_string();
      EXPECT_TRUE(same_tensor(t, *back)) << dtype_name(d) << shape_to_string(shape);
      ASSERT_TRUE(write_tensor_file(dir.file("u.npy"), t, "ignored").is_ok());
      EXPECT_TRUE(same_tensor(t, *read_tensor_file(dir.file("u.npy"))));
    }
  }
}

TEST(Npy, WritesTheHeaderNumpyWrites) {
  TempDir dir;
  ASSERT_TRUE(write_npy(dir.file("a.npy"), random_tensor(DType::kF32, {2, 3}, 1)).is_ok());
  std::string file = read_all(dir.file("a.npy"));
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(file.substr(0, 128), npy_file(1, dict, ""));
  ASSERT_TRUE(write_npy(dir.file("b.npy"), random_tensor(DType::kBool, {5}, 1)).is_ok());
  EXPECT_THAT(read_all(dir.file("b.npy")), HasSubstr("{'descr': '|b1', 'fortran_order': False, "
                                                     "'shape': (5,), }"));
}

TEST(Npy, Bf16HasNoNumpyDType) {
  TempDir dir;
  Status s = write_npy(dir.file("x.npy"), random_tensor(DType::kBF16, {2}, 1));
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("bf16"));
}

TEST(Npy, FortranOrderIsTransposedIntoRowMajor) {
  TempDir dir;
  Tensor expected = random_tensor(DType::kI32, {2, 3, 4}, 77);
  std::vector<int32_t> column_major(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        column_major[size_t(i + 2 * j + 6 * k)] = expected.data<int32_t>()[i * 12 + j * 4 + k];
  testing::write_bytes(dir.file("f.npy"),
                       npy_file(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }",
                                bytes_of(column_major)));
  Result<Tensor> r = read_npy(dir.file("f.npy"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(same_tensor(expected, *r));
}

TEST(Npy, ReadsVersions2And3AndLenientHeaders) {
  TempDir dir;
  Tensor t = random_tensor(DType::kF64, {3, 2}, 8);
  std::string data(reinterpret_cast<const char*>(t.bytes()), t.byte_size());
  const std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }";
  for (const auto& [major, d] :
       {std::pair{2, dict}, std::pair{3, dict},
        std::pair{1, std::string(
                         "{\"shape\": (3L, 2L), \"fortran_order\": False, \"descr\": \"=f8\"}")}}) {
    testing::write_bytes(dir.file("v.npy"), npy_file(major, d, data));
    Result<Tensor> r = read_npy(dir.file("v.npy"));
    ASSERT_TRUE(r.is_ok()) << major << ": " << r.status().to_string();
    EXPECT_TRUE(same_tensor(t, *r));
  }
}

TEST(Npy, UnsupportedDTypesAreNamed) {
  TempDir dir;
  struct Case {
    const char* descr;
    const char* says;
  };
  for (Case c : {Case{"<m8", "'<m8' is not supported"}, Case{">f4", "big-endian"},
                 Case{">i8", "big-endian"}, Case{"<c8", "'<c8'"}, Case{"|O", "'|O'"}}) {
    std::string dict =
        fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (2,), }}", c.descr);
    testing::write_bytes(dir.file("u.npy"), npy_file(1, dict, std::string(32, '\1')));
    Result<Tensor> r = read_npy(dir.file("u.npy"));
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << c.descr;
    EXPECT_THAT(r.status().message(), HasSubstr(c.says));
    EXPECT_THAT(r.status().message(), HasSubstr("u.npy"));
  }
  testing::write_bytes(
      dir.file("s.npy"),
      npy_file(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd"));
  EXPECT_EQ(read_npy(dir.file("s.npy")).status().code(), StatusCode::kUnsupported);
}

TEST(Npy, MalformedFilesAreInvalidArgumentNamingTheFile) {
  TempDir dir;
  Tensor t = random_tensor(DType::kF32, {4, 5}, 9);
  ASSERT_TRUE(write_npy(dir.file("ok.npy"), t).is_ok());
  std::string full = read_all(dir.file("ok.npy"));
  for (size_t n = 0; n < full.size(); ++n) {  // every truncation, header or data
    testing::write_bytes(dir.file("cut.npy"), full.substr(0, n));
    Result<Tensor> r = read_npy(dir.file("cut.npy"));
    ASSERT_FALSE(r.is_ok()) << n;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << n;
    EXPECT_THAT(r.status().message(), HasSubstr("cut.npy"));
  }
  testing::write_bytes(dir.file("long.npy"), full + "xx");
  EXPECT_EQ(read_npy(dir.file("long.npy")).status().code(), StatusCode::kInvalidArgument);
  const char* bad_dicts[] = {
      "{'descr': '<f4', 'fortran_order': False}",
      "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
      "['descr', '<f4']",
      "{'descr: '<f4'",
  };
  for (const char* dict : bad_dicts) {
    testing::write_bytes(dir.file("bad.npy"), npy_file(1, dict, std::string(8, '\0')));
    EXPECT_EQ(read_npy(dir.file("bad.npy")).status().code(), StatusCode::kInvalidArgument) << dict;
  }
  testing::write_bytes(dir.file("huge.npy"),
                       npy_file(1,
                                "{'descr': '<f4', 'fortran_order': False, 'shape': "
                                "(1099511627776, 1099511627776), }",
                                "abcd"));
  EXPECT_EQ(read_npy(dir.file("huge.npy")).status().code(), StatusCode::kInvalidArgument);
  std::mt19937 rng(4);
  std::string garbage(300, '\0');
  for (char& c : garbage) c = char(rng());
  testing::write_bytes(dir.file("garbage.npy"), garbage);
  EXPECT_EQ(read_npy(dir.file("garbage.npy")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(read_npy(dir.file("missing.npy")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(read_npy(dir.path().string()).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strider
