// One kernel test harness for every device: a one-node graph's kernel, made by the device
// under test (cpu, sim or cuda) through the Device interface, runs on views laid out as
// one catalog says, and is checked against the float64 reference. Every view lives in an
// allocation of its own, poisoned (0xA5) around and between its elements: inputs are
// written at their elements only, and after the run no byte of an output's allocation
// outside its elements may have changed. The same catalog serves every device, so a
// layout bug in one backend cannot hide behind a layout another backend's test never uses.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strider/compare.h"
#include "hal/device.h"
#include "ir/graph.h"
#include "memory/tensor_view.h"
#include "strider/tensor.h"

namespace strider::kernel_test {

// Where a view's elements sit in its allocation.
enum class ViewLayout {
  kDense,         // row-major
  kChannelsLast,  // dim 1 innermost in memory, every dim padded by one element, offset by 3
  kReversed,      // row-major with the outermost and innermost non-trivial dims reversed
  kChannelSlice,  // channels-last; the view is channels [2, 2 + C) of C + 5 (dim 0 if rank 1)
  kAlignedSlice,  // channels-last; channels [8, 8 + C) of C + 16: 16-byte aligned rows when C % 4 == 0
                  // (f32) or C % 8 == 0 (bf16, f16)
  kBroadcast,     // inputs: stride 0 along the outermost dim of size > 1 (outputs: dense)
  kNchwSlice,     // row-major; channels [2, 2 + C) of C + 5 (what cuDNN's convolution takes; not in kCatalog)
  kPackedChannelsLast,  // channels-last, no gaps, at the buffer's start (a channels-last plan's own values; not in kCatalog)
};
inline constexpr ViewLayout kCatalog[] = {ViewLayout::kDense,        ViewLayout::kChannelsLast, ViewLayout::kReversed,
                                      ViewLayout::kChannelSlice, ViewLayout::kAlignedSlice, ViewLayout::kBroadcast};
std::string layout_name(ViewLayout layout);
// "cpu_channels_last_padded": a device and layout as a gtest parameter name.
std::string param_name(std::string_view device, ViewLayout layout);

// A view's strides and offset in its buffer (elements), the buffer's size in elements,
// and the dim an input broadcasts along (-1: none).
struct Placement {
  Strides strides;
  int64_t offset = 0;
  int64_t elements = 0;
  int broadcast_dim = -1;
};
Placement place(const Shape& sizes, ViewLayout layout, bool is_output);

// The devices the harness runs on; cuda is skipped on a machine without a GPU. "cpu-split"
// is the CPU with three threads and every kernel of ours split over them
// (hal/cpu/parallel.h), so splitting is checked on every view layout.
#if !defined(STRIDER_TEST_CUDA_ROWS) || STRIDER_TEST_CUDA_ROWS
inline constexpr const char* kDevices[] = {"cpu", "sim", "cuda", "cpu-split"};
#else  // a build without the CUDA backend (tests/CMakeLists.txt)
inline constexpr const char* kDevices[] = {"cpu", "sim", "cpu-split"};
#endif
// The device (sim with two queues), or a DEVICE_ERROR when it is not here.
Result<std::unique_ptr<Device>> open_device(std::string_view name);

// Tolerance for a floating output of `dtype` (f32/f64 tight, bf16/f16 as src/check/compare.h says).
Tolerance tolerance_for(DType dtype);
// Seeded random values: normal for floats (rounded to the dtype), small integers, 0/1.
Tensor random_tensor(DType dtype, const Shape& shape, uint32_t seed);

// `values` stored as `dtype` (bf16 and f16 rounded to nearest even, integers truncated).
Tensor converted(const Tensor& values, DType dtype);
// A rank-0 tensor of `dtype` holding `value`, converted as above.
Tensor scalar_of(DType dtype, float value);

// `values` made constant along `dim` (every slice a copy of the first): what a view with
// stride 0 there reads.
Tensor constant_along(const Tensor& values, int dim);

// One view in an allocation of `device`'s, poisoned around its elements.
class DeviceBuffer {
 public:
  static Result<std::unique_ptr<DeviceBuffer>> create(Device& device, DType dtype, const Shape& sizes, ViewLayout layout,
                                                      bool is_output);
  ~DeviceBuffer();
  const TensorView& view() const { return view_; }
  // Writes `values` (dense, the view's sizes; constant along a broadcast dim) at the view's elements.
  Status write(const Tensor& values);
  Result<Tensor> read() const;
  // Byte offsets of the allocation that are not bytes of the view's elements and lost
  // their poison.
  Result<std::vector<int64_t>> clobbered() const;

 private:
  DeviceBuffer(Device& device, Allocation* allocation) : device_(device), allocation_(allocation) {}
  Device& device_;
  Allocation* allocation_;
  Placement placement_;
  TensorView view_;
};

// Infers node 0 of `graph`, has `device` make its kernel for views in `layout` (constants
// dense), runs it on a device queue and checks each output against the float64
// reference (of `reference` when given: an equivalent graph the reference can evaluate)
// and its allocation's poison. A kernel may refuse views that are not packed (the planner
// then packs them): that is allowed, and reported; packed views must be taken, except that
// cuda, which lacks kernels for some configurations (f64 matmuls), skips the test then.
void check_node(Device& device, Graph graph, const std::map<std::string, Tensor>& inputs, ViewLayout layout,
                const Graph* reference = nullptr);
// The implementation() of the kernel the last check_node on this thread ran; empty when
// it ran none (the views were refused).
const std::string& last_implementation();

}  // namespace strider::kernel_test
