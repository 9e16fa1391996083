// merge_sibling_matmuls: MatMuls that read one activation x with constant weights of one
// depth ([K, N1], [K, N2], ...) become one MatMul against the weights side by side,
// [K, N1 + N2 + ...], and a Split of its product along the last axis. Llama's gate and up
// projections, and the separate query, key and value projections of Hugging Face and
// Whisper exports, are such siblings. One product reads x once and is one kernel where
// there were several (at batch 1 each was a launch of its own, reading x again); the parts
// are views of it (the planner's Split), read in place by whatever read each product.
//
// Where every sibling adds a constant bias of its own width (broadcast along every other
// axis) and nothing else reads its product, the biases join too, so the one product still
// takes its bias as an epilogue (fuse_matmul_epilogues). Siblings with a bias and siblings
// without merge as two groups: a zero bias for the others would turn their -0 into +0.
// Each output element is the dot product it was (a kernel may sum it in another order, as
// any choice of kernel may).
//
// Runs after precision lowering (the weights are in the session's dtype) and before the
// fusions, for sessions with fusion on.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ir/graph.h"
#include "strider/status.h"

namespace strider {

// The joined weights and biases, shared by the graphs of one model (a DynamicSession's
// shapes) so that each is made, held and uploaded once (DeviceConstants keys by the host
// tensor). Keyed by the tensors the parts were made from (their `origins`: for a bf16
// session, the f32 weights the lowered parts came from, which the model holds; the
// lowered parts themselves go with the graph that merged them). Holds neither side: a
// joined tensor lives while some graph holds it.
class MergedWeights {
 public:
  // `parts`, each [rows, N_i] as laid out in memory (a bias: one row), side by side as one
  // [rows, N1 + N2 + ...] tensor of shape `shape`.
  Result<std::shared_ptr<const Tensor>> joined(const std::vector<std::shared_ptr<const Tensor>>& parts,
                                               const std::vector<std::shared_ptr<const Tensor>>& origins,
                                               int64_t rows, Shape shape);
  int64_t joins() const;  // how many tensors were made (a test hook)

 private:
  struct Entry {
    std::vector<std::weak_ptr<const Tensor>> origins;
    std::weak_ptr<const Tensor> joined;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<DType, std::vector<const Tensor*>>, Entry> entries_;
  int64_t joins_ = 0;
};

// The tensor a graph's constant was made from (itself, unless a pass made it from another).
using ConstantOrigin = std::function<std::shared_ptr<const Tensor>(const std::shared_ptr<const Tensor>&)>;

// The number of groups merged. `cache` (optional) shares the joined constants with other
// graphs of the same model; `origin` (optional) names what a constant was made from.
Result<int> merge_sibling_matmuls(Graph& graph, MergedWeights* cache = nullptr, const ConstantOrigin& origin = {});

}  // namespace strider
