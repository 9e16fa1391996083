// RNN, GRU and LSTM (opsets 7 through 22): their parameters, resolved once for shape
// inference and for the expansion that unrolls them over the (static) sequence length
// (passes/expand_recurrent.cc). The reference runs its own loops (reference/recurrent_ops.cc).
//
// Layout 0: X [T, B, I], Y [T, D, B, H], Y_h / Y_c / initial states [D, B, H];
// layout 1: X [B, T, I], Y [B, T, D, H], states [B, D, H]. D is 2 for "bidirectional".
// Gates, in W's and R's row order: LSTM i, o, f, c; GRU z, r, h; RNN one.
#pragma once

#include <string>
#include <vector>

#include "ops/op_registry.h"

namespace strider {

enum class RecurrentCell : uint8_t { kRnn, kGru, kLstm };

// One activation function of the cell and its alpha / beta (defaults filled in).
struct RecurrentActivation {
  std::string op;  // "Sigmoid", "Tanh", "Relu", "LeakyRelu", ... (ONNX's names)
  float alpha = 0, beta = 0;
};

struct RecurrentParams {
  RecurrentCell cell = RecurrentCell::kRnn;
  int64_t gates = 1;          // 1, 3 or 4
  int64_t directions = 1;     // 2 when bidirectional
  bool reverse_only = false;  // direction "reverse"
  int64_t hidden = 0, steps = 0, batch = 0, input = 0;
  int64_t layout = 0;
  bool has_bias = false, has_lengths = false, has_initial_h = false, has_initial_c = false, has_peepholes = false;
  bool has_clip = false;
  float clip = 0;
  bool input_forget = false;         // LSTM: f = 1 - i
  bool linear_before_reset = false;  // GRU
  // Per direction: f, g (GRU, LSTM) and h (LSTM), as ONNX lists them.
  std::vector<RecurrentActivation> activations;
};
Result<RecurrentParams> resolve_recurrent(const NodeInputs& node);

void register_recurrent_ops(std::vector<OpSchema>& ops);

}  // namespace strider
