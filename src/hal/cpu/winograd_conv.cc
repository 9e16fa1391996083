#include "hal/cpu/winograd_conv.h"

#include <algorithm>
#include <atomic>
#include <array>
#include <cstring>
#include <new>
#include <vector>

#include <fmt/format.h>

#include "hal/cpu/onednn.h"
#include "hal/cpu/parallel.h"
#include "hal/cpu/staged_output.h"
#include "hal/cpu/vector_math.h"
#include "hal/cpu/worker_queue.h"

namespace strider::cpu {
namespace {

constexpr int kTile = 4;                 // output tile edge: F(4x4, 3x3)
constexpr int kPatch = kTile + 2;        // input patch edge
constexpr int kPoints = kPatch * kPatch;  // transform points: the batched product's batch
constexpr int kLanes = 16;               // channels a transform handles at once (one AVX-512 vector)
// Scratch per thread for one chunk's transformed inputs and products: about half of a 1 MiB
// L2, so a chunk's product reads what its input transform just wrote from cache.
constexpr int64_t kChunkBytes = 512 * 1024;

// G (6x3) of F(4x4, 3x3) with interpolation points 0, 1, -1, 2, -2 and infinity.
constexpr double kG[kPatch][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                  {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                  {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};

// Sixteen channels as one vector (an AVX-512 register; two or four in the narrower builds).
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

// Loads and stores through references: a function taking or returning a 64-byte vector by
// value has a different ABI with and without AVX-512 (clang refuses it in the baseline build).
[[gnu::always_inline]] inline void load_lanes(Lanes& v, const float* p, int lanes) {
  v = Lanes{};
  if (lanes == kLanes) std::memcpy(&v, p, sizeof(v));
  else
    for (int l = 0; l < lanes; ++l) v[l] = p[l];
}

[[gnu::always_inline]] inline void store_lanes(float* p, const Lanes& v, int lanes) {
  if (lanes == kLanes) std::memcpy(p, &v, sizeof(v));
  else
    for (int l = 0; l < lanes; ++l) p[l] = v[l];
}

// out = B^T r for six vectors, written with B^T's structure (points 0, +-1, +-2).
[[gnu::always_inline]] inline void input_transform_6(const Lanes* r, Lanes* out) {
  const Lanes a = r[4] - 4.0f * r[2], b = r[3] - 4.0f * r[1];  // shared by rows 1 and 2
  const Lanes c = r[4] - r[2], d = 2.0f * (r[3] - r[1]);       // shared by rows 3 and 4
  out[0] = 4.0f * r[0] - 5.0f * r[2] + r[4];
  out[1] = a + b;
  out[2] = a - b;
  out[3] = c + d;
  out[4] = c - d;
  out[5] = 4.0f * r[1] - 5.0f * r[3] + r[5];
}

// out = A^T m for six vectors (four results).
[[gnu::always_inline]] inline void output_transform_6(const Lanes* m, Lanes* out) {
  const Lanes s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
  out[0] = m[0] + s12 + s34;
  out[1] = d12 + 2.0f * d34;
  out[2] = s12 + 4.0f * s34;
  out[3] = d12 + 8.0f * d34 + m[5];
}

// One tile's patch of `lanes` channels (the rest of the 16 zero) transformed into its 36
// rows of `v` (row p at v + p * point_stride). `rows[i]` points at input row i of the
// patch at column 0 (nullptr: outside x, zero), `column_ok[j]` says whether column j is
// inside, `pixel_stride` steps columns.
STRIDER_CPU_CLONES void transform_input_tile(const float* const* rows, const bool* column_ok, int64_t pixel_stride,
                                             int lanes, float* v, int64_t point_stride) {
  Lanes t[kPatch][kPatch];  // B^T along each patch row
  for (int i = 0; i < kPatch; ++i) {
    Lanes r[kPatch];
    for (int j = 0; j < kPatch; ++j) {
      r[j] = Lanes{};
      if (rows[i] && column_ok[j]) load_lanes(r[j], rows[i] + j * pixel_stride, lanes);
    }
    input_transform_6(r, t[i]);
  }
  for (int k = 0; k < kPatch; ++k) {  // then along each column
    Lanes column[kPatch], out[kPatch];
    for (int i = 0; i < kPatch; ++i) column[i] = t[i][k];
    input_transform_6(column, out);
    for (int i = 0; i < kPatch; ++i) store_lanes(v + (i * kPatch + k) * point_stride, out[i], lanes);
  }
}

// y = act(A^T m A + bias) for one tile's 16 (or `lanes`) output channels; m's row p at
// m + p * point_stride. Writes the 4x4 outputs that `rows` (nullptr: below y) and
// `column_ok` allow, at rows[i] + j * pixel_stride.
STRIDER_CPU_CLONES void transform_output_tile(const float* m, int64_t point_stride, const float* bias, int lanes,
                                              WinogradActivation activation, float* const* rows,
                                              const bool* column_ok, int64_t pixel_stride) {
  Lanes t[kPatch][kTile];  // A^T along each row of points
  for (int i = 0; i < kPatch; ++i) {
    Lanes r[kPatch];
    for (int j = 0; j < kPatch; ++j) load_lanes(r[j], m + (i * kPatch + j) * point_stride, lanes);
    output_transform_6(r, t[i]);
  }
  Lanes bias_lanes;
  std::memcpy(&bias_lanes, bias, sizeof(bias_lanes));  // padded to a multiple of 16
  alignas(64) Lanes y[kTile][kTile];
  for (int j = 0; j < kTile; ++j) {
    Lanes column[kPatch], out[kTile];
    for (int i = 0; i < kPatch; ++i) column[i] = t[i][j];
    output_transform_6(column, out);
    for (int i = 0; i < kTile; ++i) y[i][j] = out[i] + bias_lanes;
  }
  constexpr int kCount = kTile * kTile * kLanes;
  float* flat = reinterpret_cast<float*>(y);
  if (activation == WinogradActivation::kRelu) {
    for (int i = 0; i < kTile; ++i)
      for (int j = 0; j < kTile; ++j) y[i][j] = y[i][j] > 0.0f || y[i][j] != y[i][j] ? y[i][j] : Lanes{};
  } else if (activation != WinogradActivation::kNone) {
    alignas(64) float s[kCount];
    vector_math::sigmoid_row(flat, s, kCount);
    if (activation == WinogradActivation::kSilu) {
      for (int e = 0; e < kCount; ++e) flat[e] *= s[e];
    } else {
      std::memcpy(flat, s, sizeof(s));
    }
  }
  for (int i = 0; i < kTile; ++i)
    if (rows[i])
      for (int j = 0; j < kTile; ++j)
        if (column_ok[j]) store_lanes(rows[i] + j * pixel_stride, y[i][j], lanes);
}

// Output channels [first, first + count) and the batched product that computes them: the
// whole of K, or, when a layer has too few tiles to give each thread a product of its own
// (a 10x10 map is 9 tiles), one slice per thread, so each reads only its part of the
// transformed weights (36 x C x K floats: 2.4 MB at 128 -> 128, more than the product's
// other operands together).
struct OutputSlice {
  int64_t first = 0, count = 0;
  dnnl::matmul product;
  dnnl::memory weights;  // U's columns of the slice, in the layout the product asked for
  dnnl::memory::desc products_desc, scratchpad_desc;
};

// The calling thread's scratch `slot` (0: transformed inputs, 1: products, 2: oneDNN's
// scratchpad) of at least `bytes`, shared by every Winograd kernel the thread runs: kernels
// on one thread run one at a time, and a buffer of its own per kernel (30 layers of a
// detector, ~1 MB each) was out of cache by the time its kernel ran again, so the
// transforms' stores missed (the input transform alone took 1.8 ms of a 13 ms YOLOv8n
// run). Grows once to the largest layer's need, then is reused; freed when the thread ends.
// Null when the memory is not there (it is asked for inside an OpenMP team, where nothing
// may throw: the kernel reports RESOURCE_EXHAUSTED instead).
std::byte* thread_scratch(int slot, size_t bytes) {
  struct Buffer {
    std::unique_ptr<std::byte, AlignedFree> bytes;
    size_t size = 0;
  };
  thread_local std::array<Buffer, 3> buffers;
  Buffer& b = buffers[size_t(slot)];
  if (b.size < bytes) {
    b.bytes.reset();
    b.size = 0;
    b.bytes.reset(static_cast<std::byte*>(::operator new(bytes, std::align_val_t(64), std::nothrow)));
    if (!b.bytes) return nullptr;
    std::memset(b.bytes.get(), 0, bytes);  // a last chunk's unused rows stay finite
    b.size = bytes;
  }
  return b.bytes.get();
}

// A thread's memory objects over its scratch (their handles set at each run).
struct ThreadScratch {
  dnnl::memory v_memory;
  std::vector<dnnl::memory> m_memory, scratchpad_memory;  // per slice
};

class WinogradConv final : public Kernel {
 public:
  Status init(const WinogradConvArgs& args, const std::string& node);
  Status run(const QueueContext& context) override;
  std::string implementation() const override { return impl_; }

 private:
  void plan_work(int threads);
  void transform_inputs(int64_t chunk, float* v) const;
  bool run_item(int64_t chunk, const OutputSlice& slice, ThreadScratch& s, int64_t* transformed_chunk) const;
  std::vector<float> transformed_weights() const;

  WinogradConvArgs a_;
  int64_t channels_ = 0, outputs_ = 0, tiles_h_ = 0, tiles_w_ = 0, tiles_ = 0, chunk_ = 0, chunks_ = 0;
  std::vector<float> bias_;  // K, zero when absent (padded to a multiple of kLanes)
  std::vector<OutputSlice> slices_;
  std::vector<ThreadScratch> scratch_;
  size_t v_bytes_ = 0, m_bytes_ = 0, scratchpad_bytes_ = 0;
  std::string impl_;
};

// U[p][c][k] = (G w[k][c] G^T)[p], p = 6 * row + column, in double then rounded once.
std::vector<float> WinogradConv::transformed_weights() const {
  std::vector<float> u(size_t(kPoints * channels_ * outputs_));
  const Strides& s = a_.weight_strides;
  for (int64_t k = 0; k < outputs_; ++k)
    for (int64_t c = 0; c < channels_; ++c) {
      double g[3][3], gw[kPatch][3];
      for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 3; ++q) g[r][q] = a_.weights[k * s[0] + c * s[1] + r * s[2] + q * s[3]];
      for (int i = 0; i < kPatch; ++i)
        for (int q = 0; q < 3; ++q) gw[i][q] = kG[i][0] * g[0][q] + kG[i][1] * g[1][q] + kG[i][2] * g[2][q];
      for (int i = 0; i < kPatch; ++i)
        for (int j = 0; j < kPatch; ++j) {
          const double value = gw[i][0] * kG[j][0] + gw[i][1] * kG[j][1] + gw[i][2] * kG[j][2];
          u[size_t(((i * kPatch + j) * channels_ + c) * outputs_ + k)] = float(value);
        }
    }
  return u;
}

// Chunks of tiles of at most kChunkBytes of scratch; with a team, either as many chunks as a
// multiple of the team (each thread the same number, none waiting for another at the end),
// or, with fewer tiles than kMinRowsPerThread per thread and at least kMinSliceBlocks
// blocks of output channels per thread, every tile in few chunks and the output channels
// sliced over the team. Thinner slices do not pay: every thread transforms all of the
// chunk's inputs, and with 32-channel slices the output transforms took as long on two
// threads as on one (winograd_bench 64 -> 64 at 20x20, two threads against one: 50 against
// 64 us warm sliced, 42 us split by tiles; cold 119 -> 85 us, direct 93).
void WinogradConv::plan_work(int threads) {
  constexpr int64_t kMinRowsPerThread = 24, kMinSliceBlocks = 4;
  const int64_t by_cache = std::clamp<int64_t>(kChunkBytes / (kPoints * int64_t(sizeof(float)) * (channels_ + outputs_)), 8, 96);
  const int64_t blocks = (outputs_ + kLanes - 1) / kLanes;
  const bool slice_outputs =
      threads > 1 && (tiles_ + threads - 1) / threads < kMinRowsPerThread && blocks >= kMinSliceBlocks * threads;
  chunks_ = (tiles_ + by_cache - 1) / by_cache;
  if (!slice_outputs) chunks_ = std::min(tiles_, (chunks_ + threads - 1) / threads * threads);
  chunk_ = (tiles_ + chunks_ - 1) / chunks_;
  chunks_ = (tiles_ + chunk_ - 1) / chunk_;
  const int64_t parts = slice_outputs ? threads : 1;
  for (int64_t i = 0; i < parts; ++i) {
    OutputSlice slice;
    slice.first = i * blocks / parts * kLanes;
    slice.count = std::min(outputs_, (i + 1) * blocks / parts * kLanes) - slice.first;
    slices_.push_back(std::move(slice));
  }
}

Status WinogradConv::init(const WinogradConvArgs& args, const std::string& node) {
  a_ = args;
  channels_ = a_.x.sizes[1];
  outputs_ = a_.y.sizes[1];
  tiles_h_ = (a_.y.sizes[2] + kTile - 1) / kTile;
  tiles_w_ = (a_.y.sizes[3] + kTile - 1) / kTile;
  tiles_ = a_.y.sizes[0] * tiles_h_ * tiles_w_;
  const int threads = max_parallel_threads();  // the session's team
  plan_work(threads);
  bias_.assign(size_t((outputs_ + kLanes - 1) / kLanes * kLanes), 0.0f);
  if (a_.bias)
    for (int64_t k = 0; k < outputs_; ++k) bias_[size_t(k)] = a_.bias->host_data_as<float>()[k * a_.bias->strides[0]];
  return onednn_call(node, [&] {
    using dnnl::memory;
    using tag = memory::format_tag;
    ScopedOmpThreads team(1);  // each product runs on one thread of the kernel's team
    memory::desc v_md({kPoints, chunk_, channels_}, memory::data_type::f32, tag::abc);
    std::vector<float> u = transformed_weights();
    size_t m_bytes = 0, scratchpad_bytes = 0;
    for (OutputSlice& slice : slices_) {
      const memory::dims u_dims = {kPoints, channels_, slice.count};
      slice.products_desc = memory::desc({kPoints, chunk_, slice.count}, memory::data_type::f32, tag::abc);
      memory::desc u_any(u_dims, memory::data_type::f32, tag::any);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(v_md, u_any, slice.products_desc), onednn_attr(), onednn_engine());
      slice.product = dnnl::matmul(pd);
      memory::desc u_columns(u_dims, memory::data_type::f32, memory::dims{channels_ * outputs_, outputs_, 1});
      slice.weights = reorder_constant(memory(u_columns, onednn_engine(), u.data() + slice.first), pd.weights_desc());
      slice.scratchpad_desc = pd.scratchpad_desc();
      m_bytes = std::max(m_bytes, slice.products_desc.get_size());
      scratchpad_bytes = std::max(scratchpad_bytes, slice.scratchpad_desc.get_size());
      impl_ = "strider:winograd-f4x4-3x3+" + onednn_impl_name(pd);
    }
    v_bytes_ = v_md.get_size();
    m_bytes_ = m_bytes;
    scratchpad_bytes_ = std::max<size_t>(scratchpad_bytes, 1);
    static float placeholder;  // handles are set to the running thread's scratch at each run
    for (int t = 0; t < threads; ++t) {
      ThreadScratch s;
      s.v_memory = memory(v_md, onednn_engine(), &placeholder);
      for (const OutputSlice& slice : slices_) {
        s.m_memory.emplace_back(slice.products_desc, onednn_engine(), &placeholder);
        s.scratchpad_memory.emplace_back(slice.scratchpad_desc, onednn_engine(), &placeholder);
      }
      scratch_.push_back(std::move(s));
    }
    if (slices_.size() > 1) impl_ += fmt::format(" (output channels in {} slices)", slices_.size());
  });
}

void WinogradConv::transform_inputs(int64_t chunk, float* v) const {
  const int64_t first = chunk * chunk_, count = std::min(chunk_, tiles_ - first);
  const TensorView& x = a_.x;
  const int64_t height = x.sizes[2], width = x.sizes[3];
  for (int64_t t = 0; t < count; ++t) {
    const int64_t tile = first + t, n = tile / (tiles_h_ * tiles_w_), th = tile / tiles_w_ % tiles_h_,
                  tw = tile % tiles_w_;
    const int64_t top = th * kTile - a_.pad_top, left = tw * kTile - a_.pad_left;
    const float* rows[kPatch];
    bool column_ok[kPatch];
    for (int i = 0; i < kPatch; ++i) {
      const int64_t h = top + i;
      rows[i] = h >= 0 && h < height ? x.host_data_as<float>() + n * x.strides[0] + h * x.strides[2] + left * x.strides[3]
                                     : nullptr;
      column_ok[i] = left + i >= 0 && left + i < width;
    }
    for (int64_t c = 0; c < channels_; c += kLanes) {
      const float* at[kPatch];
      for (int i = 0; i < kPatch; ++i) at[i] = rows[i] ? rows[i] + c : nullptr;
      transform_input_tile(at, column_ok, x.strides[3], int(std::min<int64_t>(kLanes, channels_ - c)),
                           v + t * channels_ + c, chunk_ * channels_);
    }
  }
}

// False when this thread's scratch could not be had.
bool WinogradConv::run_item(int64_t chunk, const OutputSlice& slice, ThreadScratch& s, int64_t* transformed_chunk) const {
  float* v = reinterpret_cast<float*>(thread_scratch(0, v_bytes_));
  float* m = reinterpret_cast<float*>(thread_scratch(1, m_bytes_));
  std::byte* scratchpad = thread_scratch(2, scratchpad_bytes_);
  if (!v || !m || !scratchpad) return false;
  if (*transformed_chunk != chunk) transform_inputs(chunk, v);
  *transformed_chunk = chunk;
  const size_t index = size_t(&slice - slices_.data());
  s.v_memory.set_data_handle(v);
  s.m_memory[index].set_data_handle(m);
  s.scratchpad_memory[index].set_data_handle(scratchpad);
  slice.product.execute(onednn_stream(), {{DNNL_ARG_SRC, s.v_memory},
                                          {DNNL_ARG_WEIGHTS, slice.weights},
                                          {DNNL_ARG_DST, s.m_memory[index]},
                                          {DNNL_ARG_SCRATCHPAD, s.scratchpad_memory[index]}});
  onednn_stream().wait();
  const TensorView& y = a_.y;
  const int64_t first = chunk * chunk_, count = std::min(chunk_, tiles_ - first), out_h = y.sizes[2], out_w = y.sizes[3];
  for (int64_t t = 0; t < count; ++t) {
    const int64_t tile = first + t, n = tile / (tiles_h_ * tiles_w_), th = tile / tiles_w_ % tiles_h_,
                  tw = tile % tiles_w_;
    const int64_t top = th * kTile, left = tw * kTile;
    float* rows[kTile];
    bool column_ok[kTile];
    for (int i = 0; i < kTile; ++i) {
      rows[i] = top + i < out_h ? y.host_data_as<float>() + n * y.strides[0] + (top + i) * y.strides[2] + left * y.strides[3]
                                : nullptr;
      column_ok[i] = left + i < out_w;
    }
    for (int64_t k = 0; k < slice.count; k += kLanes) {
      float* at[kTile];
      for (int i = 0; i < kTile; ++i) at[i] = rows[i] ? rows[i] + slice.first + k : nullptr;
      transform_output_tile(m + t * slice.count + k, chunk_ * slice.count, bias_.data() + slice.first + k,
                            int(std::min<int64_t>(kLanes, slice.count - k)), a_.activation, at, column_ok, y.strides[3]);
    }
  }
  return true;
}

// Items are (chunk, slice) pairs, chunk-major, so a thread given several slices of one
// chunk transforms its inputs once.
// Nothing may leave the team's threads by throwing: a oneDNN error or missing scratch is
// noted and reported after the team joined.
Status WinogradConv::run(const QueueContext&) {
  const int64_t slices = int64_t(slices_.size()), items = chunks_ * slices;
  const int64_t work = chunk_ * kPoints * (channels_ + outputs_ / slices);
  std::atomic<bool> no_scratch{false}, failed{false};
  parallel_for(items, work, [&](int64_t begin, int64_t end, int thread) {
    int64_t transformed_chunk = -1;  // the chunk this thread's scratch holds
    try {
      for (int64_t item = begin; item < end; ++item)
        if (!run_item(item / slices, slices_[size_t(item % slices)], scratch_[size_t(thread)], &transformed_chunk))
          no_scratch = true;
    } catch (...) {
      failed = true;
    }
  }, int(scratch_.size()));
  if (no_scratch)
    return resource_exhausted(fmt::format("Conv: Winograd scratch of {} bytes a thread", v_bytes_ + m_bytes_ + scratchpad_bytes_));
  if (failed) return device_error("Conv: oneDNN's batched product of the Winograd convolution failed");
  return Status::ok();
}

}  // namespace

// Channels: bench/winograd_bench, one thread, AMD EPYC (Zen 5, AVX-512), warm: Winograd
// over direct 0.44-0.75 from 64 channels up, 0.86 at 32 -> 32 (40x40), 1.07-1.2 at 16 -> 16
// and 24 -> 24, 2.6 at 8 -> 8: below 32 channels the products are too thin to pay for the
// transforms. Tiles: the transformed weights are four times the direct kernel's and are out
// of cache when a layer runs (the bench flushes before each call: 1.4-1.6x slower than
// direct at 10x10, 9 tiles, where the product is all weights and few rows); on YOLOv8n at
// 320, leaving out the maps under 16 tiles or not made no difference (one thread: medians
// of five alternated runs 11.6 and 11.9 ms, no Winograd 14.4 ms; two threads 6.2, 6.3, 7.1).
bool winograd_conv_pays(int64_t in_channels, int64_t out_channels, int64_t out_height, int64_t out_width) {
  const int64_t tiles = ((out_height + kTile - 1) / kTile) * ((out_width + kTile - 1) / kTile);
  return in_channels >= 32 && out_channels >= 32 && tiles >= 16;
}

Result<std::unique_ptr<Kernel>> make_winograd_conv(const WinogradConvArgs& args, const std::string& node) {
  if (args.x.dtype != DType::kF32 || args.y.dtype != DType::kF32 || args.x.rank() != 4 || args.y.rank() != 4 ||
      args.x.strides[1] != 1 || args.y.strides[1] != 1 || args.weights == nullptr)
    return unsupported(fmt::format("node '{}': Winograd needs f32 channels-inner views and constant weights", node));
  auto kernel = std::make_unique<WinogradConv>();
  STRIDER_RETURN_IF_ERROR(kernel->init(args, node));
  return std::unique_ptr<Kernel>(std::move(kernel));
}

}  // namespace strider::cpu
