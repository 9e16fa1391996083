// Sessions split at a node whose output shape depends on values (exec/staged_session.h):
// values crossing the split (a graph output computed before it, a value read only after
// it, a graph input read only after it), two splits in a row, a run whose counts differ
// from the last one's, a split node on constants (folded, no split), and the tools that
// need one plan saying so. Every output is checked against the float64 reference, on cpu
// on sim (random interleavings of its queues) and on cuda (skipped without a GPU).
#include <gtest/gtest.h>

#include "exec/session_internal.h"
#include "base/memory_budget.h"
#include "hal/cuda_device_factory.h"
#include "plan/bind.h"
#include "ir/builder.h"
#include "reference/reference.h"
#include "strider/io_binding.h"
#include "strider/tools.h"
#include "support/test_util.h"

namespace strider {
namespace {

Tensor f32_scalar(float v) { return Tensor::from_values<float>(DType::kF32, {}, std::vector<float>{v}); }

// x, y: f32 [4, 6]. a = Relu(x - 0.3) (zeros where x < 0.3), b = a * y (an output from
// before the split), nz = NonZero(a) (the split), h = GatherND(b, Transpose(nz)) + sum(y)
// (after: reads b, crossing the split, and y, a graph input).
Graph one_split() {
  GraphBuilder b(17);
  ValueId x = b.input("x", DType::kF32, {4, 6}), y = b.input("y", DType::kF32, {4, 6});
  ValueId a = b.op("Relu", {b.op("Sub", {x, b.constant("c", f32_scalar(0.3f))})});
  ValueId product = b.op("Mul", {a, y}, {}, "product");
  ValueId nz = b.op("NonZero", {a}, {}, "nonzero");
  ValueId picked = b.op("GatherND", {product, b.op("Transpose", {nz})});
  ValueId total = b.op("ReduceSum", {y}, int_attribute("keepdims", 0));
  b.output(product);
  b.output(nz);
  b.output(b.op("Add", {picked, total}, {}, "h"));
  return b.build();
}

// Two splits: NonZero, then Unique of the row indices it found; u = Unique rows * 2.
Graph two_splits() {
  GraphBuilder b(17);
  ValueId x = b.input("x", DType::kF32, {5, 3});
  ValueId nz = b.op("NonZero", {b.op("Relu", {x})});
  ValueId rows = b.op("Gather", {nz, b.constant("zero", i64_tensor({0}))}, int_attribute("axis", 0));
  std::vector<ValueId> unique = b.ops("Unique", {b.op("Flatten", {rows}, int_attribute("axis", 0))}, 4);
  ValueId two = b.constant("two", Tensor::from_values<int64_t>(DType::kI64, {}, std::vector<int64_t>{2}));
  b.output(b.op("Mul", {unique[0], two}, {}, "doubled"));
  b.output(unique[3]);
  return b.build();
}

std::map<std::string, Tensor> named(const Graph& g, const std::vector<Tensor>& values) {
  std::map<std::string, Tensor> m;
  for (size_t i = 0; i < values.size(); ++i) m[g.value(g.inputs()[i]).name] = values[i];
  return m;
}

void expect_matches_reference(const Graph& graph, Session& session, const std::vector<Tensor>& inputs) {
  auto ran = session.run(inputs);
  ASSERT_TRUE(ran.is_ok()) << ran.status().to_string();
  auto expected = evaluate_reference(graph, named(graph, inputs));
  ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
  ASSERT_EQ(ran->size(), expected->outputs.size());
  for (size_t i = 0; i < ran->size(); ++i) {
    const Tensor want = ref_to_tensor(expected->outputs[i], (*ran)[i].dtype());
    ASSERT_EQ((*ran)[i].shape(), want.shape()) << "output " << i;
    for (int64_t e = 0; e < want.num_elements(); ++e)
      EXPECT_NEAR((*ran)[i].element_as_double(e), want.element_as_double(e), 1e-5) << "output " << i << " element " << e;
  }
}

class StagedSession : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda" && !create_cuda_device(0, DeviceOptions{}).is_ok())
      GTEST_SKIP() << "no CUDA device: the cuda rows run on a GPU only";
  }
  std::unique_ptr<Session> open(const Graph& graph) {
    SessionOptions options;
    options.device = GetParam();
    options.queues = 2;
    auto session = create_session(graph, options);
    EXPECT_TRUE(session.is_ok()) << session.status().to_string();
    return session.is_ok() ? std::move(session).value() : nullptr;
  }
};

TEST_P(StagedSession, ValuesCrossTheSplitAndEveryRunPlansForItsCounts) {
  const Graph graph = one_split();
  auto session = open(graph);
  ASSERT_NE(session, nullptr);
  EXPECT_NE(plan_text(*session).find("split at node 'nonzero' (NonZero)"), std::string::npos) << plan_text(*session);
  EXPECT_EQ(session->outputs()[0].shape, (Shape{4, 6}));  // computed before the split: known
  for (int64_t d : session->outputs()[1].shape) EXPECT_EQ(d, -1);  // NonZero's count is the run's
  const Tensor y = testing::random_tensor(DType::kF32, {4, 6}, 7);
  std::vector<int64_t> counts;
  for (uint32_t seed : {1u, 2u, 1u, 3u}) {  // seed 1 twice: a cached plan after another one
    const std::vector<Tensor> inputs{testing::random_tensor(DType::kF32, {4, 6}, seed), y};
    expect_matches_reference(graph, *session, inputs);
    counts.push_back((*session->run(inputs))[1].shape()[1]);
  }
  EXPECT_NE(counts[0], counts[1]);  // the random inputs did make different counts
  EXPECT_EQ(counts[0], counts[2]);
}

TEST_P(StagedSession, TwoSplitsInARow) {
  const Graph graph = two_splits();
  auto session = open(graph);
  ASSERT_NE(session, nullptr);
  for (uint32_t seed : {11u, 12u}) expect_matches_reference(graph, *session, {testing::random_tensor(DType::kF32, {5, 3}, seed)});
}

// TopK whose k is a graph input not bound as a constant: its output size is the run's.
TEST_P(StagedSession, TopKWithARuntimeK) {
  GraphBuilder b(17);
  ValueId x = b.input("x", DType::kF32, {3, 9}), k = b.input("k", DType::kI64, {1});
  std::vector<ValueId> top = b.ops("TopK", {b.op("Relu", {x}), k}, 2, int_attribute("axis", 1), "topk");
  b.output(b.op("Neg", {top[0]}));
  b.output(top[1]);
  const Graph graph = b.build();
  auto session = open(graph);
  ASSERT_NE(session, nullptr);
  EXPECT_NE(plan_text(*session).find("split at node 'topk' (TopK)"), std::string::npos) << plan_text(*session);
  for (int64_t kept : {2, 7, 2}) {
    const std::vector<Tensor> inputs{testing::random_tensor(DType::kF32, {3, 9}, uint32_t(kept)),
                                     Tensor::from_values<int64_t>(DType::kI64, {1}, std::vector<int64_t>{kept})};
    expect_matches_reference(graph, *session, inputs);
    EXPECT_EQ((*session->run(inputs))[1].shape(), (Shape{3, kept}));
  }
}

TEST_P(StagedSession, CallerTensorsMustHaveTheShapesTheRunMade) {
  const Graph graph = one_split();
  auto session = open(graph);
  ASSERT_NE(session, nullptr);
  const std::vector<Tensor> inputs{testing::random_tensor(DType::kF32, {4, 6}, 1),
                                   testing::random_tensor(DType::kF32, {4, 6}, 7)};
  auto made = session->run(inputs);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  std::vector<Tensor> into{Tensor(DType::kF32, {4, 6}), Tensor(DType::kI64, {2, 1000}), Tensor(DType::kF32, {1000})};
  Status wrong = session->run(inputs, into);
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("output 'nonzero"), std::string::npos) << wrong.to_string();
  EXPECT_EQ(into[0].element_as_double(0), 0.0);  // nothing written half-way
  std::vector<Tensor> right;
  for (const Tensor& t : *made) right.emplace_back(t.dtype(), t.shape());
  ASSERT_TRUE(session->run(inputs, right).is_ok());
  for (size_t i = 0; i < right.size(); ++i) EXPECT_TRUE(testing::same_tensor(right[i], (*made)[i])) << i;
}

TEST_P(StagedSession, ToolsThatNeedOnePlanSaySo) {
  auto session = open(one_split());
  ASSERT_NE(session, nullptr);
  auto taps = run_with_taps(*session, {testing::random_tensor(DType::kF32, {4, 6}, 1),
                                       testing::random_tensor(DType::kF32, {4, 6}, 2)});
  EXPECT_EQ(taps.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(taps.status().message().find("NonZero"), std::string::npos) << taps.status().to_string();
  EXPECT_EQ(time_device_steps(*session).status().code(), StatusCode::kUnsupported);
}

TEST_P(StagedSession, ASplitNodeOnConstantsFoldsAndNothingSplits) {
  GraphBuilder b(17);
  ValueId x = b.input("x", DType::kI64, {3});
  ValueId nz = b.op("NonZero", {b.constant("mask", i64_tensor({0, 4, 0, 5, 6}))});
  b.output(b.op("Add", {b.op("Flatten", {nz}, int_attribute("axis", 0)), b.op("Unsqueeze", {x, b.constant("axes", i64_tensor({0}))})}));
  const Graph graph = b.build();
  auto session = open(graph);
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(plan_text(*session).find("split"), std::string::npos) << plan_text(*session);
  expect_matches_reference(graph, *session, {Tensor::from_values<int64_t>(DType::kI64, {3}, std::vector<int64_t>{10, 20, 30})});
}

// A device that declines a node's op: sim told to decline Softmax and Erf (a test setting).
// The nodes run on the host, everything else on the device, and the outputs match the
// reference; inspect names each split and its reason.
TEST(HostFallback, DeclinedNodesRunOnTheHostAndTheRestOnTheDevice) {
  GraphBuilder b(17);
  ValueId x = b.input("x", DType::kF32, {3, 8}), w = b.input("w", DType::kF32, {8, 8});
  ValueId h = b.op("MatMul", {x, w}, {}, "project");
  ValueId p = b.op("Softmax", {h}, int_attribute("axis", 1), "softmax");
  ValueId e = b.op("Erf", {b.op("Mul", {p, h})}, {}, "erf");
  b.output(b.op("Add", {e, h}, {}, "out"));
  b.output(p);
  const Graph graph = b.build();
  SessionOptions options;
  options.device = "sim";
  options.queues = 2;
  auto resources = std::make_shared<SessionResources>();
  resources->budget = std::make_shared<MemoryBudget>(default_host_memory_budget());
  DeviceOptions device_options;
  device_options.queues = 2;
  device_options.budget = resources->budget;
  device_options.sim_declined_ops = {"Softmax", "Erf"};
  auto device = create_device("sim", device_options);
  ASSERT_TRUE(device.is_ok()) << device.status().to_string();
  resources->device = std::move(device).value();
  resources->constants = std::make_shared<DeviceConstants>(resources->device);
  auto session = create_session(graph, options, PlanOptions{}, resources);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  const std::string text = plan_text(**session);
  EXPECT_NE(text.find("split at node 'softmax' (Softmax): sim declines Softmax"), std::string::npos) << text;
  for (uint32_t seed : {3u, 4u})
    expect_matches_reference(graph, **session, {testing::random_tensor(DType::kF32, {3, 8}, seed),
                                                testing::random_tensor(DType::kF32, {8, 8}, seed + 10)});
}

// On cuda: int16 has no CUDA kernel, so its three nodes run on the host (three splits in a
// row), the f32 ones before and after them on the GPU.
TEST(HostFallback, CudaRunsInt16NodesOnTheHost) {
  if (!create_cuda_device(0, DeviceOptions{}).is_ok()) GTEST_SKIP() << "no CUDA device: the cuda rows run on a GPU only";
  GraphBuilder b(17);
  ValueId x = b.input("x", DType::kF32, {4, 5});
  ValueId scaled = b.op("Mul", {x, b.constant("hundred", f32_scalar(100.0f))});
  AttributeMap to_i16 = int_attribute("to", 5), to_f32 = int_attribute("to", 1);  // ONNX INT16, FLOAT
  ValueId wide = b.op("Cast", {scaled}, to_i16, "to_i16");
  ValueId offset = b.op("Add", {wide, b.constant("seven", Tensor::from_values<int16_t>(DType::kI16, {}, std::vector<int16_t>{7}))});
  ValueId back = b.op("Cast", {offset}, to_f32, "to_f32");
  b.output(b.op("Sigmoid", {b.op("Mul", {back, x})}));
  const Graph graph = b.build();
  SessionOptions options;
  options.device = "cuda";
  auto session = create_session(graph, options);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  EXPECT_NE(plan_text(**session).find("split at node 'to_i16' (Cast): no cuda kernel takes i16"), std::string::npos)
      << plan_text(**session);
  expect_matches_reference(graph, **session, {testing::random_tensor(DType::kF32, {4, 5}, 21)});
}

INSTANTIATE_TEST_SUITE_P(Devices, StagedSession, ::testing::Values("cpu", "sim", "cuda"));

}  // namespace
}  // namespace strider
