// bf16 Conv, MatMul and Gemm on every device and view layout of the catalog, against the
// float64 reference, with weights both as runtime inputs and as constants. On the CPU they
// run either natively (oneDNN's bf16, with AVX-512) or widened (f32 kernels over f32
// copies, src/hal/cpu/widened_kernels.h), depending on the machine; "cpu-widened" and
// "cpu-native" force each path so both are proven on every machine.
#include <gtest/gtest.h>

#include <cstdio>
#include <tuple>

#include "hal/cpu/cpu_device.h"
#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/widened_kernels.h"
#include "strider/tools.h"
#include "ir/builder.h"
#include "kernel_harness.h"
#include "kernel_suite.h"

namespace strider {
namespace {

using kernel_test::ViewLayout;

// The CPU device with its bf16 arithmetic forced, remembering what it made.
class ForcedBf16CpuDevice final : public cpu::CpuDevice {
 public:
  ForcedBf16CpuDevice(cpu::Bf16Arithmetic mode, std::vector<std::string>* made)
      : cpu::CpuDevice(DeviceOptions{}), mode_(mode), made_(made) {}
  Result<std::unique_ptr<Kernel>> create_kernel(const KernelRequest& request) override {
    auto kernel = cpu::create_kernel(request, mode_);
    if (kernel.is_ok()) made_->push_back((*kernel)->implementation());
    return kernel;
  }

 private:
  cpu::Bf16Arithmetic mode_;
  std::vector<std::string>* made_;
};

#if STRIDER_TEST_CUDA_ROWS
constexpr const char* kBf16Devices[] = {"cpu", "sim", "cuda", "cpu-widened", "cpu-native"};
#else  // a build without the CUDA backend (tests/CMakeLists.txt)
constexpr const char* kBf16Devices[] = {"cpu", "sim", "cpu-widened", "cpu-native"};
#endif

class Bf16MatMulConv : public ::testing::TestWithParam<std::tuple<const char*, ViewLayout>> {
 protected:
  void SetUp() override {
    std::string name = std::get<0>(GetParam());
    if (name == "cpu-widened" || name == "cpu-native") {
      forced_ = name == "cpu-widened" ? cpu::Bf16Arithmetic::kWidened : cpu::Bf16Arithmetic::kNative;
      device_ = std::make_unique<ForcedBf16CpuDevice>(*forced_, &made_);
      return;
    }
    auto device = kernel_test::open_device(name);
    if (!device.is_ok()) GTEST_SKIP() << name << " is not here: " << device.status().message();
    device_ = std::move(*device);
  }
  void TearDown() override {
    // Packed views must take the forced path (strided ones may be refused, then packed).
    if (forced_ == cpu::Bf16Arithmetic::kWidened && layout() == ViewLayout::kDense) {
      ASSERT_FALSE(made_.empty());
      for (const std::string& kernel : made_) EXPECT_NE(kernel.find("widened"), std::string::npos) << kernel;
    }
    if (forced_ == cpu::Bf16Arithmetic::kNative) {
      for (const std::string& kernel : made_) EXPECT_EQ(kernel.find("widened"), std::string::npos) << kernel;
    }
  }
  ViewLayout layout() const { return std::get<1>(GetParam()); }
  void check(GraphBuilder& b, const std::map<std::string, Tensor>& inputs) {
    kernel_test::check_node(*device_, b.build(), inputs, layout());
  }
  static Tensor bf16(const Shape& shape, uint32_t seed) { return kernel_test::random_tensor(DType::kBF16, shape, seed); }

  std::unique_ptr<Device> device_;
  std::optional<cpu::Bf16Arithmetic> forced_;
  std::vector<std::string> made_;
};

TEST_P(Bf16MatMulConv, ConvGroupedPaddedStridedWithBias) {
  for (bool constant_weights : {false, true}) {
    SCOPED_TRACE(constant_weights ? "constant weights" : "runtime weights");
    GraphBuilder b;
    AttributeMap attrs = ints_attribute("pads", {1, 0, 1, 2});
    attrs.set_ints("strides", {2, 1});
    attrs.set_int("group", 2);
    Tensor w = bf16({6, 2, 3, 3}, 2), bias = bf16({6}, 3);
    std::map<std::string, Tensor> inputs = {{"x", bf16({2, 4, 7, 6}, 1)}};
    ValueId wv = constant_weights ? b.constant("w", w) : b.input("w", DType::kBF16, {6, 2, 3, 3});
    ValueId bv = constant_weights ? b.constant("bias", bias) : b.input("bias", DType::kBF16, {6});
    if (!constant_weights) inputs.insert({{"w", w}, {"bias", bias}});
    b.output(b.op("Conv", {b.input("x", DType::kBF16, {2, 4, 7, 6}), wv, bv}, attrs));
    check(b, inputs);
  }
}

TEST_P(Bf16MatMulConv, PointwiseAndDilatedConv1d) {
  GraphBuilder p;
  p.output(p.op("Conv", {p.input("x", DType::kBF16, {2, 8, 5, 6}), p.constant("w", bf16({4, 8, 1, 1}, 2))}));
  check(p, {{"x", bf16({2, 8, 5, 6}, 1)}});
  GraphBuilder d;  // WaveNet's layer: kernel 2, dilation 4, padded to keep the length
  AttributeMap attrs = ints_attribute("dilations", {4});
  attrs.set_ints("pads", {4, 0});
  d.output(d.op("Conv", {d.input("x", DType::kBF16, {1, 6, 20}), d.constant("w", bf16({6, 6, 2}, 4))}, attrs));
  check(d, {{"x", bf16({1, 6, 20}, 3)}});
}

// MobileNetV2's depthwise 3x3 (stride 1 and 2) and a depthwise dilated Conv1d, with
// strider's own CUDA kernel forced there (the timed choice may keep cuDNN this small).
TEST_P(Bf16MatMulConv, DepthwiseConv) {
  kernel_test::ScopedEnvironment own("STRIDER_CUDA_KERNEL_CHOICE", "own");
  for (int64_t stride : {1, 2}) {
    GraphBuilder b;
    AttributeMap attrs = ints_attribute("pads", {1, 1, 1, 1});
    attrs.set_ints("strides", {stride, stride});
    attrs.set_int("group", 8);
    b.output(b.op("Conv", {b.input("x", DType::kBF16, {2, 8, 9, 10}), b.constant("w", bf16({8, 1, 3, 3}, 2)),
                           b.constant("bias", bf16({8}, 3))}, attrs));
    check(b, {{"x", bf16({2, 8, 9, 10}, 1)}});
  }
  GraphBuilder d;
  AttributeMap attrs = ints_attribute("dilations", {3});
  attrs.set_ints("pads", {3, 3});
  attrs.set_int("group", 6);
  d.output(d.op("Conv", {d.input("x", DType::kBF16, {1, 6, 20}), d.constant("w", bf16({6, 1, 3}, 4))}, attrs));
  check(d, {{"x", bf16({1, 6, 20}, 3)}});
}

// A first layer (3 channels, 3x3, stride 2) and WaveNet's dilated Conv1d, with strider's
// direct CUDA kernel forced there.
TEST_P(Bf16MatMulConv, DirectConv) {
  kernel_test::ScopedEnvironment own("STRIDER_CUDA_KERNEL_CHOICE", "own");
  GraphBuilder b;
  AttributeMap attrs = ints_attribute("pads", {1, 1, 1, 1});
  attrs.set_ints("strides", {2, 2});
  b.output(b.op("Conv", {b.input("x", DType::kBF16, {2, 3, 9, 10}), b.constant("w", bf16({10, 3, 3, 3}, 2)),
                         b.constant("bias", bf16({10}, 3))}, attrs));
  check(b, {{"x", bf16({2, 3, 9, 10}, 1)}});
  GraphBuilder e;  // 16 output channels: channels-last outputs stored 8 at once
  e.output(e.op("Conv", {e.input("x", DType::kBF16, {2, 3, 9, 10}), e.constant("w", bf16({16, 3, 3, 3}, 6)),
                         e.constant("bias", bf16({16}, 7))}, attrs));
  check(e, {{"x", bf16({2, 3, 9, 10}, 8)}});
  GraphBuilder d;
  AttributeMap dilated = ints_attribute("dilations", {4});
  dilated.set_ints("pads", {4, 0});
  d.output(d.op("Conv", {d.input("x", DType::kBF16, {2, 6, 20}), d.constant("w", bf16({12, 6, 2}, 4)),
                         d.constant("bias", bf16({12}, 5))}, dilated));
  check(d, {{"x", bf16({2, 6, 20}, 3)}});
}

TEST_P(Bf16MatMulConv, MatMulBatchedAndGemmTransposed) {
  GraphBuilder b;
  b.output(b.op("MatMul", {b.input("a", DType::kBF16, {2, 6, 7}), b.constant("w", bf16({7, 5}, 2))}));
  check(b, {{"a", bf16({2, 6, 7}, 1)}});
  GraphBuilder r;  // both operands at run time (attention's scores)
  r.output(r.op("MatMul", {r.input("a", DType::kBF16, {2, 6, 7}), r.input("b", DType::kBF16, {2, 7, 5})}));
  check(r, {{"a", bf16({2, 6, 7}, 3)}, {"b", bf16({2, 7, 5}, 4)}});
  GraphBuilder g;
  AttributeMap attrs = int_attribute("transB", 1);
  attrs.set_float("alpha", 0.5f);
  g.output(g.op("Gemm", {g.input("a", DType::kBF16, {6, 7}), g.constant("w", bf16({5, 7}, 2)), g.constant("c", bf16({5}, 3))},
                attrs));
  check(g, {{"a", bf16({6, 7}, 5)}});
}

std::string name_of(const ::testing::TestParamInfo<Bf16MatMulConv::ParamType>& info) {
  return kernel_test::param_name(std::get<0>(info.param), std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(DevicesAndLayouts, Bf16MatMulConv,
                         ::testing::Combine(::testing::ValuesIn(kBf16Devices), ::testing::ValuesIn(kernel_test::kCatalog)),
                         name_of);

// `--dtype bf16` on a CPU without bf16 instructions says how it runs instead (the CLI prints
// this once per command); where the CPU has them, and for f32, there is nothing to say.
TEST(Bf16Notice, SaysHowBf16RunsWhereTheCpuHasNoBf16Instructions) {
  EXPECT_EQ(cpu_dtype_notice(DType::kF32), "");
  const bool native = __builtin_cpu_supports("avx512bf16");  // AMX-BF16 CPUs have it too
  const std::string notice = cpu_dtype_notice(DType::kBF16);
  EXPECT_EQ(notice.empty(), native) << notice;
  if (!native) {
    EXPECT_NE(notice.find(cpu::onednn_has_bf16_kernels() ? "emulates" : "widened"), std::string::npos) << notice;
  }
  std::printf("this CPU: %s\n", native ? "native bf16" : notice.c_str());
}

}  // namespace
}  // namespace strider
