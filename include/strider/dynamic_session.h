// DynamicSession: a model whose inputs may take any shape its symbolic dims allow. The
// model is imported once; each distinct set of input shapes gets its own Session (shape
// inference, planning, kernels), made on the first run that needs it and kept in a bounded
// cache, least recently used out, so the second run of a shape does no planning.
//
//   strider::DynamicSessionOptions dyn;
//   dyn.pinned_dims = {{"batch", 8}};            // optional: fix a symbolic dim for every run
//   auto model = strider::DynamicSession::load("model.onnx", session_options, dyn);
//   auto out = (*model)->run({{"x", tensor_of_batch_4}});  // plans for batch 4 on first use
//
// Sharing: every cached Session runs on one device and shares the imported weights: one
// copy in host memory and one on the device (uploaded by the first plan that needs it;
// a weight a plan lays out differently, channels-last say, gets a copy per layout; bf16
// sessions share one bf16 copy of each weight). Constants folded for a shape are that
// plan's own. `SessionOptions::max_memory_bytes` bounds the whole cache: when a new shape
// does not fit, the least recently used plans are dropped (their arenas freed) until it does.
// Errors: an input whose shape contradicts the model (a static dim, the rank, a pinned dim)
// is INVALID_ARGUMENT naming the input and the dim, and nothing is cached for it.
// Thread safety: run() may be called from several threads; runs are serialized (one at a
// time per DynamicSession), so a caller never sees another's outputs or a half-built plan.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strider/host_buffer.h"
#include "strider/session.h"

namespace strider {

struct DynamicSessionOptions {
  // Symbolic dims (ONNX dim_param names) fixed for every run.
  std::map<std::string, int64_t> pinned_dims;
  // Plans kept at once (at least 1); the least recently used goes first.
  int max_cached_shapes = 8;
  // Input shapes to plan at load ({input name: shape} per set, every input named), so
  // their first runs plan nothing; a set the model cannot take fails the load, naming it.
  std::vector<std::map<std::string, Shape>> prepared_shapes;
};

class DynamicSession {
 public:
  using Options = DynamicSessionOptions;

  static Result<std::unique_ptr<DynamicSession>> load(const std::string& model_path, const SessionOptions& options,
                                                      const Options& dynamic = Options());
  // `count` instances of one model on one device, for running it from several threads at
  // once (a server's instances): each its own device queues (streams on a GPU), arena,
  // plans and lock, so they run side by side; the model is read once and its weights are
  // held once, in host memory and on the device (uploaded by the first instance, read by
  // all; counted in the first one's device memory). The first instance is load()'s.
  static Result<std::vector<std::unique_ptr<DynamicSession>>> load_instances(const std::string& model_path,
                                                                             const SessionOptions& options, int count,
                                                                             const Options& dynamic = Options());
  ~DynamicSession();

  // The model's inputs and outputs: dtypes, shapes with -1 for a dim left to the run (its
  // name in ValueInfo::dim_params when the model names it).
  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;

  // Runs on inputs by name, planning for their shapes first if no cached plan has them.
  // Outputs in outputs() order, with the sizes this run gave them (owning tensors; large
  // ones in pinned memory on cuda, as Session::run says).
  Result<std::vector<Tensor>> run(const std::map<std::string, Tensor>& inputs);
  // Runs on the caller's memory (strider/io_binding.h), planning for the bound inputs'
  // shapes first if no cached plan has them.
  Status run(IoBinding& binding);
  // Plans for these input shapes now (every input named), so their first run does not.
  Status prepare(const std::map<std::string, Shape>& input_shapes);
  // Host memory the model's device moves fastest (strider/host_buffer.h: pinned on cuda),
  // for inputs a caller assembles itself (a server merging requests into one batch).
  Result<HostBuffer> allocate_host_buffer(size_t bytes);

  // How many Sessions (plans) were made so far, and how many are cached now.
  int64_t plans_made() const;
  int cached_shapes() const;
  // Constants uploaded to the device so far (shared by the cached plans: a new shape of a
  // model whose weights fold nothing per shape uploads none).
  int64_t constant_uploads() const;
  // Bytes the device's allocations for this model hold now (every cached plan's arena and
  // workspaces, the uploaded constants), as its memory budget counts them. Safe to call
  // while another thread runs.
  int64_t device_memory_bytes() const;

  struct Impl;

 private:
  friend std::vector<const void*> bound_addresses(const DynamicSession& session);
  explicit DynamicSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strider
