// RNN, GRU and LSTM: the runtime's unrolled expansion against the reference's step loops,
// over what the ONNX node tests leave out: both directions, sequence_lens (state frozen and
// Y zeroed past each entry's length, the reverse direction starting at its last step),
// batch-major layout, initial states, peepholes, linear_before_reset, input_forget, clip and
// activations with their alpha and beta.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "plan_test_util.h"
#include "reference/reference.h"
#include "strider/compare.h"

namespace strider {
namespace {

using testing::random_f32;

struct RecurrentCase {
  std::string op;
  int64_t gates, hidden = 4, steps = 5, batch = 3, input = 3;
  std::string direction = "forward";
  int64_t layout = 0;
  bool lengths = false, initial = false, peepholes = false;
  AttributeMap extra;
};

void expect_unrolled_matches_reference(const RecurrentCase& c) {
  const int64_t d = c.direction == "bidirectional" ? 2 : 1, rows = c.gates * c.hidden;
  GraphBuilder b(14);
  const Shape x_shape = c.layout == 0 ? Shape{c.steps, c.batch, c.input} : Shape{c.batch, c.steps, c.input};
  const Shape state = c.layout == 0 ? Shape{d, c.batch, c.hidden} : Shape{c.batch, d, c.hidden};
  std::map<std::string, Tensor> inputs{{"x", random_f32(x_shape, 1)}, {"w", random_f32({d, rows, c.input}, 2)},
                                       {"r", random_f32({d, rows, c.hidden}, 3)}, {"bias", random_f32({d, 2 * rows}, 4)}};
  std::vector<ValueId> in{b.input("x", DType::kF32, x_shape), b.input("w", DType::kF32, {d, rows, c.input}),
                          b.input("r", DType::kF32, {d, rows, c.hidden}), b.input("bias", DType::kF32, {d, 2 * rows})};
  in.push_back(kNoValue);
  if (c.lengths) {  // one entry full, one short, one of a single step
    in.back() = b.input("lens", DType::kI32, {c.batch});
    inputs["lens"] = Tensor::from_values<int32_t>(DType::kI32, {c.batch}, std::vector<int32_t>{int32_t(c.steps), 2, 1});
  }
  in.push_back(kNoValue);
  if (c.initial) {
    in.back() = b.input("h0", DType::kF32, state);
    inputs["h0"] = random_f32(state, 5);
  }
  if (c.op == "LSTM") {
    in.push_back(kNoValue);
    if (c.initial) {
      in.back() = b.input("c0", DType::kF32, state);
      inputs["c0"] = random_f32(state, 6);
    }
    if (c.peepholes) {
      in.push_back(b.input("p", DType::kF32, {d, 3 * c.hidden}));
      inputs["p"] = random_f32({d, 3 * c.hidden}, 7);
    }
  }
  AttributeMap attributes = c.extra;
  attributes.set_int("hidden_size", c.hidden);
  attributes.set_string("direction", c.direction);
  attributes.set_int("layout", c.layout);
  const int outputs = c.op == "LSTM" ? 3 : 2;
  for (ValueId out : b.ops(c.op, in, outputs, attributes, "cell")) b.output(out);
  Graph g = b.build();
  auto p = testing::plan_in_session(g, testing::verified(), SessionOptions{});
  ASSERT_NE(p.session, nullptr);
  std::vector<Tensor> given;
  for (ValueId id : g.inputs()) given.push_back(inputs.at(g.value(id).name));
  auto actual = p.session->run(given);
  ASSERT_TRUE(actual.is_ok()) << actual.status().to_string();
  auto expected = evaluate_reference(g, inputs);
  ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
  ASSERT_EQ(actual->size(), size_t(outputs));
  testing::expect_outputs_near(*actual, expected->outputs, default_tolerance(DType::kF32), c.op);
}

TEST(Recurrent, BidirectionalLstmWithLengthsStatesAndPeepholes) {
  expect_unrolled_matches_reference({"LSTM", 4, 4, 5, 3, 3, "bidirectional", 0, true, true, true, {}});
}

TEST(Recurrent, BatchMajorLstmWithCoupledGatesAndOtherActivations) {
  AttributeMap a;
  a.set_int("input_forget", 1);
  a.set_strings("activations", {"HardSigmoid", "Tanh", "Softsign"});
  a.set_floats("activation_alpha", {0.3f});
  a.set_floats("activation_beta", {0.4f});
  expect_unrolled_matches_reference({"LSTM", 4, 4, 5, 3, 3, "forward", 1, true, true, false, a});
}

TEST(Recurrent, BidirectionalGruLinearBeforeResetWithLengths) {
  AttributeMap a;
  a.set_int("linear_before_reset", 1);
  expect_unrolled_matches_reference({"GRU", 3, 5, 4, 3, 2, "bidirectional", 1, true, true, false, a});
}

TEST(Recurrent, ReverseGruWithLengths) {
  expect_unrolled_matches_reference({"GRU", 3, 4, 5, 3, 3, "reverse", 0, true, false, false, {}});
}

TEST(Recurrent, ReverseRnnWithClipAndLeakyRelu) {
  AttributeMap a;
  a.set_float("clip", 0.7f);
  a.set_strings("activations", {"LeakyRelu"});
  a.set_floats("activation_alpha", {0.2f});
  expect_unrolled_matches_reference({"RNN", 1, 4, 5, 3, 3, "reverse", 0, false, true, false, a});
}

}  // namespace
}  // namespace strider
