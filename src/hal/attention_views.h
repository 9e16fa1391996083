// The operands of a FusedAttention (ops/fused_attention.h) as every device's kernel walks
// them: an odometer over the output's batch dims, and for each operand its strides there
// (0 where it broadcasts) and along its two matrix dims. Q [.., Sq, D] is (row i, col d),
// Kt [.., D, T] (d, j), V [.., T, Dv] (j, e), the output [.., Sq, Dv] (i, e), and each step
// operand, broadcast to the scores [.., Sq, T], (i, j). Any strides, zero and negative
// included: the views are read as the planner made them (a Q chunk at an offset in a fused
// QKV projection, Kt a transposed view of K). Metadata only, no copies.
#pragma once

#include <vector>

#include "hal/kernel.h"
#include "memory/tensor_view.h"
#include "ops/fused_attention.h"

namespace strider {

// Operand order in AttentionViews: the fixed ones, then the steps' in node order.
enum AttentionOperand : int { kAttnViewQ, kAttnViewKt, kAttnViewV, kAttnViewOut, kAttnViewFirstStep };

struct AttentionViews {
  Shape batch;                               // the output's batch dims
  std::vector<Strides> batch_strides;        // per operand, one per batch dim
  std::vector<int64_t> row_stride, col_stride;  // per operand, along its two matrix dims
  std::vector<TensorView> views;             // per operand (for data pointers and dtypes)
  int64_t q_len = 0, head = 0, keys = 0, v_head = 0;  // Sq, D, T, Dv
  int operands() const { return int(views.size()); }
};

// INVALID_ARGUMENT when the views do not fit together (shape inference checked the shapes).
Result<AttentionViews> attention_views(const FusedAttentionParams& params, const KernelRequest& request);

}  // namespace strider
