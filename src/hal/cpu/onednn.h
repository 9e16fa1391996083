// oneDNN glue for the CPU kernels: one engine per process, a stream per thread, a
// scratchpad per kernel, memory
// descriptors built from a view's real sizes and strides (never a packed copy), and
// conversion of oneDNN's exceptions into Statuses at the kernel boundary.
#pragma once

#include <omp.h>
#include "hal/cpu/own_team.h"
#include "hal/cpu/parallel.h"
#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>
#include <string>
#include <unordered_map>

#include "hal/kernel.h"
#include "memory/tensor_view.h"
#include "ops/fused_elementwise.h"
#include "strider/status.h"

namespace strider::cpu {

dnnl::engine& onednn_engine();
// The calling thread's stream (oneDNN streams are not shared between threads).
dnnl::stream& onednn_stream();

// Attributes every primitive starts from: a scratchpad owned by the kernel
// (scratchpad_mode::user). oneDNN's own scratchpad is per thread and sized when a
// primitive is created, so a kernel created on one thread and run on a queue's worker
// would overrun it.
dnnl::primitive_attr onednn_attr();

// The oneDNN data type for a dtype, or nullopt when oneDNN has none that we use.
std::optional<dnnl::memory::data_type> onednn_type(DType dtype);

// A descriptor with the view's sizes and strides (in elements). Stride-0 broadcast dims are
// not expressible: callers pass views whose broadcast dims have size 1.
dnnl::memory::desc onednn_desc(const TensorView& view);
// The same with explicit sizes/strides (for reshaped views such as grouped weights).
dnnl::memory::desc onednn_desc(DType dtype, const Shape& sizes, const Strides& strides);
// A memory object over the view's bytes: no copy.
dnnl::memory onednn_memory(const TensorView& view, const dnnl::memory::desc& desc);

// A copy of constant weights in the layout a primitive asked for (its weights_desc), made
// once when the kernel is created; the kernel owns it. Runs on the creating thread alone:
// a team started there would be a second OpenMP pool beside the worker's
// (hal/cpu/parallel.h says why that costs every later run).
dnnl::memory reorder_constant(const dnnl::memory& source, const dnnl::memory::desc& layout);

// The OpenMP team a oneDNN primitive of `multiply_adds` is created under (oneDNN fixes its
// team then): one thread below kSerialMultiplyAdds, where waking a team and joining it cost
// more than splitting saves (PointwiseC2f's 32k-MAC convs ran slower on two threads than on
// one); else 0, the session's team. See hal/cpu/parallel.h for strider's own kernels.
inline constexpr int64_t kSerialMultiplyAdds = int64_t(1) << 18;
inline int onednn_team_for(int64_t multiply_adds) { return own_team_enabled() || multiply_adds < kSerialMultiplyAdds ? 1 : 0; }

// kSerialMultiplyAdds, lowered with the calling thread's minimum work a thread (the kernel
// suite's cpu-split device lowers it so that small cases split): below it a primitive is
// not cut into pieces for strider's own team (hal/cpu/own_team.h).
inline int64_t serial_multiply_adds() {
  return kSerialMultiplyAdds * std::min(thread_min_work_per_thread, kMinWorkPerThread) / kMinWorkPerThread;
}

// The part [i0, i1) along `axis` of an operand of a primitive cut into pieces, `extent`
// being the whole's size on that axis; an operand of size 1 there (broadcast) stays whole.
Result<TensorView> part_of(const TensorView& v, int axis, int64_t i0, int64_t i1, int64_t extent);

struct OneDnnPostOp;
// The binary post-ops' operands of `ops` cut to their part [i0, i1) along `axis` (part_of).
Status cut_binary_operands(std::vector<OneDnnPostOp>& ops, int axis, int64_t i0, int64_t i1, int64_t extent);

// Runs the pieces of one node (kernels over disjoint parts of its views) side by side on
// the calling thread's team, `work_per_piece` sizing it (parallel_for); returns the first
// failure.
template <typename Pieces>
Status run_side_by_side(const Pieces& pieces, int64_t work_per_piece, const QueueContext& context) {
  std::atomic<bool> failed{false};
  Status first_failure = Status::ok();
  std::mutex failure;
  parallel_for(int64_t(pieces.size()), work_per_piece, [&](int64_t begin, int64_t end, int) {
    for (int64_t p = begin; p < end; ++p)
      if (Status s = pieces[size_t(p)]->run(context); !s.is_ok() && !failed.exchange(true)) {
        std::lock_guard lock(failure);
        first_failure = s;
      }
  });
  return first_failure;
}

// Whether a primitive created now runs on a team of two or more: oneDNN fixes its team at
// creation from the creating thread's OpenMP setting (onednn_team_for, ScopedOmpThreads).
inline bool onednn_creates_team() { return omp_get_max_threads() > 1; }

// Executes `primitive` on the calling thread's stream and waits for it. `team`: it was
// created for a team (onednn_creates_team), so the thread notes that it started one
// (thread_started_team in hal/cpu/parallel.h); else it runs under a one-thread setting.
void onednn_execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args, bool team);

// Runs `fn`, turning a dnnl::error into a Status: UNSUPPORTED when oneDNN has no
// implementation or cannot describe the arguments, DEVICE_ERROR otherwise. `what` names the node.
template <typename Fn>
Status onednn_call(const std::string& what, Fn&& fn) {
  try {
    fn();
    return Status::ok();
  } catch (const dnnl::error& e) {
    std::string message = what + ": oneDNN: " + e.what();
    // No implementation, or geometry oneDNN cannot describe (a stride of 2^63-1): the
    // caller takes another path; neither is a device failure.
    if (e.status == dnnl_unimplemented || e.status == dnnl_invalid_arguments) return unsupported(message);
    return device_error(message);
  }
}

// oneDNN's eltwise post-op computing a one-input fused program (the activation a conv or
// matmul is followed by), if it has one. Its arithmetic is oneDNN's own (vectorized exp),
// within f32 rounding of ours.
struct OneDnnEltwise {
  dnnl::algorithm algorithm;
  float alpha = 0, beta = 0;
};
std::optional<OneDnnEltwise> onednn_eltwise_of(const FusedProgram& program);

// A kernel that is one oneDNN primitive over memory bound at creation (a convolution, a
// matmul): what runs it, names it, and keeps its constant weights in oneDNN's layout.
class OneDnnPrimitiveKernel : public Kernel {
 public:
  Status run(const QueueContext&) override {
    return onednn_call(what_, [&] { onednn_execute(primitive_, args_, team_); });
  }
  std::string implementation() const override { return impl_; }

 protected:
  explicit OneDnnPrimitiveKernel(const char* what) : what_(what) {}
  // The weights' memory the primitive of `pd` reads: `plain` itself when it asks for that
  // layout, else a copy reordered into its layout once, here (constant weights only),
  // which the kernel owns. `shared`: a reorder an earlier piece of the same node made is
  // reused when the layout matches, and this one's is left there for the next. Notes the
  // reorder in the implementation's name.
  dnnl::memory weights_for(const dnnl::primitive_desc_base& pd, const dnnl::memory& plain, dnnl::memory* shared);

  const char* what_;
  dnnl::primitive primitive_;
  std::unordered_map<int, dnnl::memory> args_;
  bool team_ = false;  // created for a team of two or more
  dnnl::memory packed_weights_;  // owned reordered copy of constant weights
  std::string impl_;
};

// What oneDNN applies to a primitive's result, in order: an eltwise activation, or a binary
// op with an operand view (of the output's rank, broadcast dims of size 1).
struct OneDnnPostOp {
  bool is_binary = false;
  OneDnnEltwise eltwise{dnnl::algorithm::eltwise_relu};
  dnnl::algorithm binary = dnnl::algorithm::binary_add;
  TensorView operand;
};

// Appends `ops` to `post_ops`; records where each binary operand goes (the post-op's index,
// for DNNL_ARG_ATTR_MULTIPLE_POST_OP) and the ops' names ("+eltwise_swish") for inspect.
void append_post_ops(std::span<const OneDnnPostOp> ops, dnnl::post_ops& post_ops,
                     std::vector<std::pair<int, const TensorView*>>& binary_args, std::string& names);

// Whether `impl` (onednn_impl_name) applies binary post-ops in its generated code: oneDNN's
// gemm-based convolutions and matmuls apply them in a scalar loop afterwards (WaveNet8:
// 2.5 -> 42 ms with its residuals as gemm:jit post-ops), and its reference ones are slow.
bool onednn_fast_binary_post_ops(const std::string& impl);
bool has_binary(std::span<const OneDnnPostOp> ops);

// "onednn:" + the implementation oneDNN picked (e.g. "onednn:brg:avx512_core").
std::string onednn_impl_name(const dnnl::primitive_desc_base& pd);

}  // namespace strider::cpu
