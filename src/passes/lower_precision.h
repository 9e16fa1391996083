// lower_to_bf16: the session's `--dtype bf16`. Every f32 value (weights, activations)
// becomes bf16, and Casts to f32 cast to bf16 instead; kernels then run in bf16 with f32
// accumulation. The graph's own f32 inputs and outputs keep f32, with a Cast at each, so
// the conversion runs on the device rather than on the host in run(). Float parameters
// that are not data (Resize's scales and roi, as declared by OpSchema::float_parameter_inputs)
// stay f32. Constants are rounded to nearest even, finite ones beyond bf16's range
// saturating to its largest finite value (an exported `* -FLT_MAX` mask stays finite).
// Runs after infer_and_fold, so shape arithmetic folded in f32 and integers is exact.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

// bf16 copies of constants, by the f32 tensor each came from, so the plans of one model (a
// DynamicSession's shapes) share one bf16 copy of each weight: one host tensor, and so one
// device upload (DeviceConstants keys by the host tensor). Holds neither side: a copy
// lives while some plan's graph holds it, and is made again after the last one went.
class LoweredConstants {
 public:
  Result<std::shared_ptr<const Tensor>> lowered(const std::shared_ptr<const Tensor>& source);
  int64_t conversions() const;  // how many copies were made (a test hook)
  // The f32 tensor `lowered` was made from, while both live; null for any other tensor.
  std::shared_ptr<const Tensor> source_of(const std::shared_ptr<const Tensor>& lowered) const;

 private:
  struct Entry {
    std::weak_ptr<const Tensor> source, lowered;
  };
  mutable std::mutex mutex_;
  std::map<const Tensor*, Entry> entries_;
  int64_t conversions_ = 0;
};

// `cache` (optional) shares the lowered constants with other graphs of the same model.
Status lower_to_bf16(Graph& graph, LoweredConstants* cache = nullptr);

// convert_float_tensor: strider/tensor.h.

}  // namespace strider
