// Pad and Tile on the GPU (ops/index_map.h): a thread per output element adds up one table
// entry per axis (no division by the input's sizes) and copies the element's bytes, or
// writes the pad value.
#include <cstdint>

#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/launch.h"

namespace strider::cuda {
namespace {

using namespace device;

template <typename W>
__global__ void __launch_bounds__(kThreads) index_map_kernel(const IndexMapLaunch a) {
  device::order_after_producers();
  const W value = a.value ? *static_cast<const W*>(a.value) : W(a.value_bits);
  for (int64_t e = global_thread(); e < a.count; e += grid_threads()) {
    int64_t rest = e, target = 0, source = 0;
    bool pad = false;
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d >= a.rank) continue;
      int64_t coordinate;
      if (a.count <= int64_t(INT32_MAX)) {
        const uint32_t quotient = fast_divide(uint32_t(rest), a.div[d]);
        coordinate = rest - int64_t(quotient) * a.div[d].divisor;
        rest = quotient;
      } else {
        coordinate = rest % a.sizes[d];
        rest /= a.sizes[d];
      }
      target += coordinate * a.out_strides[d];
      const int64_t entry = a.tables[a.table_start[d] + coordinate];
      pad |= entry == kIndexMapNoSource;
      source += pad ? 0 : entry;
    }
    static_cast<W*>(a.out)[target] = pad ? value : static_cast<const W*>(a.in)[source];
  }
}

template <typename W>
cudaError_t launch_index_map(const IndexMapLaunch& l, cudaStream_t stream) {
  launch_dependent(index_map_kernel<W>, grid_for(l.count, kThreads), kThreads, 0, stream, l);
  return cudaGetLastError();
}

}  // namespace

Status prepare_index_map(const TensorView& in, const TensorView& out, const int64_t* tables, int element_size,
                         IndexMapLaunch* l) {
  if (out.rank() > kMaxDims) return unsupported("Pad or Tile of rank " + std::to_string(out.rank()) + " on CUDA");
  l->rank = int(out.rank());
  l->count = out.num_elements();
  int64_t start = 0;
  for (int d = 0; d < l->rank; ++d) {
    l->sizes[d] = out.sizes[size_t(d)];
    l->out_strides[d] = out.strides[size_t(d)];
    l->table_start[d] = start;
    start += out.sizes[size_t(d)];
    l->div[d] = make_fast_divisor(out.sizes[size_t(d)]);
  }
  l->tables = tables;
  l->in = device_data<const std::byte>(in);
  l->out = device_data<std::byte>(out);
  dispatch_words(element_size, [&]<typename Word>() { l->launcher = &launch_index_map<Word>; });
  return Status::ok();
}

Status run_index_map(const IndexMapLaunch& l, cudaStream_t stream) {
  if (l.count == 0) return Status::ok();
  cudaError_t error = l.launcher(l, stream);
  if (error == cudaSuccess) return Status::ok();
  return device_error(std::string("Pad/Tile kernel launch failed: ") + cudaGetErrorString(error));
}

}  // namespace strider::cuda
