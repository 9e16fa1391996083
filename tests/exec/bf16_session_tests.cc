// Sessions that compute in bf16 (lower_to_bf16): a node whose float parameter input keeps
// f32 while its output is lowered (OpSchema::float_parameter_inputs) must read each operand
// through its own type. AffineGrid's kernel read its f32 theta as the grid's type and wrote
// f32 elements past the bf16 grid (found by the fuzzer, session 44).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "onnx/tensor_proto.h"
#include "strider/session.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

Tensor read_pb(const fs::path& file) {
  auto t = read_tensor_pb(file.string());
  EXPECT_TRUE(t.is_ok()) << file << ": " << t.status().to_string();
  return t.is_ok() ? *t : Tensor();
}

// The ONNX node tests' AffineGrid cases in a bf16 session, against their expected f32
// grids: within bf16's rounding of the grid values (|grid| < 4: 2^-7 relative).
TEST(Bf16Session, AffineGridKeepsItsF32ThetaAndWritesABf16Grid) {
  const fs::path tests = fs::path(STRIDER_SOURCE_DIR) / "tests/conformance/onnx-node-tests";
  for (const char* name : {"test_affine_grid_2d", "test_affine_grid_3d_align_corners"}) {
    SCOPED_TRACE(name);
    const fs::path data = tests / name / "test_data_set_0";
    SessionOptions options;
    options.dtype = DType::kBF16;
    options.constant_inputs["size"] = read_pb(data / "input_1.pb");
    auto session = Session::load((tests / name / "model.onnx").string(), options);
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    auto outputs = (*session)->run(std::vector<Tensor>{read_pb(data / "input_0.pb")});
    ASSERT_TRUE(outputs.is_ok()) << outputs.status().to_string();
    const Tensor expected = read_pb(data / "output_0.pb");
    ASSERT_EQ((*outputs)[0].shape(), expected.shape());
    ASSERT_EQ((*outputs)[0].dtype(), DType::kF32);
    for (int64_t i = 0; i < expected.num_elements(); ++i) {
      const float want = expected.data<float>()[i], got = (*outputs)[0].data<float>()[i];
      ASSERT_NEAR(got, want, 1e-2 + std::fabs(want) / 64) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace strider
