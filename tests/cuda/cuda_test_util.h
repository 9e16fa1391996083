// Running one node's CUDA kernel on views of device memory in several layouts and
// comparing it with the float64 reference (tests of src/hal/cuda's own kernels).
//
// Every view lives in its own cudaMalloc'd buffer, poisoned (0xA5) around and between its
// elements: inputs are written at their elements only, outputs are checked afterwards to
// have left every other byte alone. Uploads, the kernel and downloads run in order on one
// stream of the test's, which it synchronizes before reading anything back.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strider/compare.h"
#include "hal/kernel.h"
#include "kernel_harness.h"
#include "ir/builder.h"
#include "memory/allocation.h"
#include "memory/tensor_view.h"
#include "strider/tensor.h"

namespace strider::cuda_test {

bool have_gpu();

#define STRIDER_REQUIRE_GPU() \
  if (!::strider::cuda_test::have_gpu()) GTEST_SKIP() << "no CUDA device: CUDA kernel tests run on a GPU only"

// The layouts and values of the kernel harness every device shares
// (tests/support/kernel_harness.h); these tests add the NCHW channel slice cuDNN takes.
using kernel_test::ViewLayout;
using kernel_test::layout_name;
using kernel_test::random_tensor;
using kernel_test::tolerance_for;
inline constexpr ViewLayout kAllLayouts[] = {ViewLayout::kDense, ViewLayout::kChannelsLast, ViewLayout::kReversed, ViewLayout::kChannelSlice,
                                         ViewLayout::kAlignedSlice};

// Device memory for one view, with its poisoned host mirror.
class DeviceTensor {
 public:
  DeviceTensor(DType dtype, const Shape& sizes, ViewLayout layout);
  ~DeviceTensor();
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  const TensorView& view() const { return view_; }
  // Writes `t` (dense, the view's sizes and dtype; null: none) at the view's elements,
  // then uploads the whole buffer with its poison on `stream`.
  void upload(const Tensor* t, void* stream);
  // Downloads the whole buffer into the mirror (on `stream`; synchronize before reading).
  void download(void* stream);
  // The view's elements from the mirror, row-major.
  Tensor elements() const;
  // Byte offsets in the buffer that are not elements of the view and lost their poison.
  std::vector<int64_t> clobbered() const;

 private:
  std::vector<std::byte> host_;
  void* device_ = nullptr;
  std::unique_ptr<Allocation> allocation_;
  TensorView view_;
};

// `values` stored as `dtype` (bf16 and f16 rounded to nearest even).
Tensor tensor_of(DType dtype, const Shape& shape, const std::vector<double>& values);
// Values with |v| in [low, high), positive when `positive` or u8; integers rounded.
Tensor random_magnitudes(DType dtype, const Shape& shape, uint32_t seed, double low, double high, bool positive);

// Infers node 0 of `graph`, runs its CUDA kernel with every non-constant input and every
// output in `layout` (constants dense) and checks each output against the reference.
// `reference`, when given, is an equivalent graph over the same inputs that the float64
// reference evaluates instead (for ops it lacks, such as the variadic Sum).
void check_node(Graph graph, const std::map<std::string, Tensor>& inputs, ViewLayout layout,
                const Graph* reference = nullptr);
// The same for every layout.
void check_node_all_layouts(const Graph& graph, const std::map<std::string, Tensor>& inputs,
                            const Graph* reference = nullptr);

// Node 0 (already inferred) with its inputs uploaded (on `stream`, constants dense) and
// its outputs poisoned, in `layout`, and its CUDA kernel created for those views.
struct PreparedNode {
  std::vector<std::unique_ptr<DeviceTensor>> inputs;
  std::vector<std::unique_ptr<DeviceTensor>> outputs;  // null where the output is omitted
  std::unique_ptr<Kernel> kernel;
  int64_t bytes = 0;  // bytes of every input and output element: what one run moves at least
};
Result<PreparedNode> prepare_node(const Graph& graph, const std::map<std::string, Tensor>& inputs, ViewLayout layout,
                                  void* stream);

// Runs node 0 (already inferred) on dense device views; returns its outputs, or the
// status of kernel creation or launch.
Result<std::vector<Tensor>> run_dense(const Graph& graph, const std::map<std::string, Tensor>& inputs);

Tensor f32(Shape shape, std::vector<float> v);

}  // namespace strider::cuda_test
