// The scatter and GatherND kernels (scatter.h).
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/launch.h"
#include "hal/cuda/scatter.h"

namespace strider::cuda {
namespace {
using namespace device;

template <typename Index>
__device__ __forceinline__ bool read_index(const void* indices, int64_t at, int64_t dim, GatherReport* report,
                                           int64_t* out) {
  int64_t k = int64_t(static_cast<const Index*>(indices)[at]);
  if (k < -dim || k >= dim) {
    report->bad_index = k;
    report->dim = dim;
    report->flagged = 1;
    return false;
  }
  *out = k < 0 ? k + dim : k;
  return true;
}

template <typename T>
__device__ __forceinline__ void combine_into(const ScatterLaunch& l, int64_t at, int64_t from) {
  using C = Compute<T>;
  const C old = load<T>(l.out, at), update = load<T>(l.updates, from);
  store<T>(l.out, at, scatter_combine<C>(l.reduction, old, update));
}

template <typename T, typename Index>
__global__ void scatter_nd_kernel(const ScatterLaunch l) {
  device::order_after_producers();
  for (int64_t s = global_thread(); s < l.threads.count; s += grid_threads()) {
    int64_t slice[3];
    l.threads.offsets(s, slice);
    for (int64_t n = 0; n < l.tuples.count; ++n) {
      int64_t tuple[2];
      l.tuples.offsets(n, tuple);
      int64_t at = slice[0];
      bool ok = true;
      for (int j = 0; j < l.k && ok; ++j) {
        int64_t i = 0;
        ok = read_index<Index>(l.indices, tuple[0] + j * l.index_step, l.dims[j], l.report, &i);
        at += i * l.out_strides[j];
      }
      if (ok) combine_into<T>(l, at, tuple[1] + slice[1]);
    }
  }
}

template <typename T, typename Index>
__global__ void scatter_elements_kernel(const ScatterLaunch l) {
  device::order_after_producers();
  for (int64_t line = global_thread(); line < l.threads.count; line += grid_threads()) {
    int64_t base[3];
    l.threads.offsets(line, base);
    for (int64_t j = 0; j < l.steps; ++j) {
      int64_t i = 0;
      if (read_index<Index>(l.indices, base[1] + j * l.index_step, l.dims[0], l.report, &i))
        combine_into<T>(l, base[0] + i * l.out_strides[0], base[2] + j * l.update_step);
    }
  }
}

template <typename T, typename Index>
void launch_scatter_typed(const ScatterLaunch& l, cudaStream_t stream) {
  if (l.elements) launch_dependent(scatter_elements_kernel<T, Index>, grid_for(l.threads.count), kThreads, 0, stream,
                                   l);
  else launch_dependent(scatter_nd_kernel<T, Index>, grid_for(l.threads.count), kThreads, 0, stream, l);
}

template <typename T>
void launch_scatter_indices(const ScatterLaunch& l, cudaStream_t stream) {
  if (l.indices_i64) launch_scatter_typed<T, int64_t>(l, stream);
  else launch_scatter_typed<T, int32_t>(l, stream);
}

template <typename Word, typename Index>
__global__ void gather_nd_kernel(const GatherNDLaunch l) {
  device::order_after_producers();
  for (int64_t e = global_thread(); e < l.ix.count; e += grid_threads()) {
    int64_t offset[3];
    l.ix.offsets(e, offset);
    int64_t from = offset[2];
    bool ok = true;
    for (int j = 0; j < l.k && ok; ++j) {
      int64_t i = 0;
      ok = read_index<Index>(l.indices, offset[1] + j * l.index_step, l.dims[j], l.report, &i);
      from += i * l.data_strides[j];
    }
    if (ok) static_cast<Word*>(l.out)[offset[0]] = static_cast<const Word*>(l.data)[from];
  }
}

template <typename Word>
void launch_gather_nd_words(const GatherNDLaunch& l, cudaStream_t stream) {
  if (l.indices_i64) launch_dependent(gather_nd_kernel<Word, int64_t>, grid_for(l.ix.count), kThreads, 0, stream, l);
  else launch_dependent(gather_nd_kernel<Word, int32_t>, grid_for(l.ix.count), kThreads, 0, stream, l);
}

Shape dims_of(const Shape& s, size_t from, size_t to) { return Shape(s.begin() + from, s.begin() + to); }
Strides strides_of(const Strides& s, size_t from, size_t to) { return Strides(s.begin() + from, s.begin() + to); }

Status prepare_scatter_nd(const TensorView& indices, const TensorView& updates, const TensorView& out, ScatterLaunch& l) {
  const size_t k = size_t(indices.sizes.back()), q = indices.sizes.size() - 1, rank = out.sizes.size();
  l.k = int(k);
  for (size_t j = 0; j < k; ++j) {
    l.dims[j] = out.sizes[j];
    l.out_strides[j] = out.strides[j];
  }
  l.index_step = indices.strides[q];
  const Shape slice = dims_of(out.sizes, k, rank);
  STRIDER_RETURN_IF_ERROR(make_indexer<3>(slice, {strides_of(out.strides, k, rank), strides_of(updates.strides, q, updates.sizes.size()),
                                                  Strides(slice.size(), 0)}, &l.threads));
  return make_indexer<2>(dims_of(indices.sizes, 0, q), {strides_of(indices.strides, 0, q), strides_of(updates.strides, 0, q)},
                         &l.tuples);
}

Status prepare_scatter_elements(const TensorView& indices, const TensorView& updates, const TensorView& out, int64_t axis,
                                ScatterLaunch& l) {
  const size_t a = size_t(axis);
  Shape lines = updates.sizes;
  lines[a] = 1;
  l.dims[0] = out.sizes[a];
  l.out_strides[0] = out.strides[a];
  l.index_step = indices.strides[a];
  l.update_step = updates.strides[a];
  l.steps = updates.sizes[a];
  Strides out_strides = out.strides;
  out_strides[a] = 0;  // the index supplies the axis offset
  return make_indexer<3>(lines, {out_strides, indices.strides, updates.strides}, &l.threads);
}

}  // namespace

Status prepare_scatter(const TensorView& indices, const TensorView& updates, const TensorView& out, bool elements,
                       const ScatterParams& p, GatherReport* report, ScatterLaunch* launch) {
  if (indices.dtype != DType::kI64 && indices.dtype != DType::kI32) return unsupported("scatter indices must be int64 or int32");
  if (out.dtype == DType::kBool && p.reduction != ScatterReduction::kNone) return unsupported("a scatter reduction on bool");
  if (out.rank() > kMaxDims) return unsupported("a scatter of rank above 8");
  ScatterLaunch l;
  l.elements = elements;
  l.reduction = p.reduction;
  l.dtype = out.dtype;
  l.indices_i64 = indices.dtype == DType::kI64;
  l.out = device_data<void>(out);
  l.indices = device_data<const void>(indices);
  l.updates = device_data<const void>(updates);
  l.report = report;
  STRIDER_RETURN_IF_ERROR(elements ? prepare_scatter_elements(indices, updates, out, p.axis, l)
                                   : prepare_scatter_nd(indices, updates, out, l));
  *launch = l;
  return Status::ok();
}

Status run_scatter(const ScatterLaunch& l, cudaStream_t stream) {
  if (l.threads.count == 0 || (!l.elements && l.tuples.count == 0)) return Status::ok();
  switch (l.dtype) {
    case DType::kF32: launch_scatter_indices<float>(l, stream); break;
    case DType::kF16: launch_scatter_indices<__half>(l, stream); break;
    case DType::kBF16: launch_scatter_indices<__nv_bfloat16>(l, stream); break;
    case DType::kF64: launch_scatter_indices<double>(l, stream); break;
    case DType::kI64: launch_scatter_indices<int64_t>(l, stream); break;
    case DType::kI32: launch_scatter_indices<int32_t>(l, stream); break;
    case DType::kI8: launch_scatter_indices<int8_t>(l, stream); break;
    case DType::kU8: launch_scatter_indices<uint8_t>(l, stream); break;
    case DType::kBool: launch_scatter_indices<bool>(l, stream); break;
  }
  return launch_status("scatter");
}

Status prepare_gather_nd(const TensorView& data, const TensorView& indices, const TensorView& out,
                         const GatherNDParams& p, GatherReport* report, GatherNDLaunch* launch) {
  if (indices.dtype != DType::kI64 && indices.dtype != DType::kI32) return unsupported("GatherND indices must be int64 or int32");
  const size_t b = size_t(p.batch_dims), k = size_t(p.k), q = indices.sizes.size() - 1;
  GatherNDLaunch l;
  l.k = int(k);
  for (size_t j = 0; j < k; ++j) {
    l.dims[j] = data.sizes[b + j];
    l.data_strides[j] = data.strides[b + j];
  }
  l.index_step = indices.strides[q];
  // Per output dim: the tuple dims read the indices (and, the first b, data's batch dims);
  // the slice dims read data's trailing dims.
  Strides index_strides, data_strides;
  for (size_t d = 0; d < out.sizes.size(); ++d) {
    index_strides.push_back(d < q ? indices.strides[d] : 0);
    data_strides.push_back(d < b ? data.strides[d] : (d < q ? 0 : data.strides[b + k + (d - q)]));
  }
  STRIDER_RETURN_IF_ERROR(make_indexer<3>(out.sizes, {out.strides, index_strides, data_strides}, &l.ix));
  l.element_size = int(dtype_size(data.dtype));
  l.indices_i64 = indices.dtype == DType::kI64;
  l.out = device_data<void>(out);
  l.data = device_data<const void>(data);
  l.indices = device_data<const void>(indices);
  l.report = report;
  *launch = l;
  return Status::ok();
}

Status run_gather_nd(const GatherNDLaunch& l, cudaStream_t stream) {
  if (l.ix.count == 0) return Status::ok();
  dispatch_words(l.element_size, [&]<typename Word>() { launch_gather_nd_words<Word>(l, stream); });
  return launch_status("GatherND");
}

}  // namespace strider::cuda
