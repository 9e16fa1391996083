// A traced run (`strider bench --trace`, trace_run): every command once, on its queue,
// stamped where it ran, so the trace shows what the waits did. On cpu with two worker
// queues and on sim (which runs queues in a seeded random interleaving), a command never
// starts before a command it waited for ended, and one queue runs one command at a time.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "exec/session_internal.h"
#include "hal/cuda_device_factory.h"
#include "onnx/importer.h"
#include "strider/tools.h"
#include "support/test_util.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

class TraceRun : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda" && !create_cuda_device(0, DeviceOptions{}).is_ok())
      GTEST_SKIP() << "no CUDA device: the cuda rows run on a GPU only";
  }
};

TEST_P(TraceRun, EveryCommandOnceInWaitOrder) {
  const std::string device = GetParam();
  auto graph = import_model_file((fs::path(STRIDER_SOURCE_DIR) / "models/seed/C2f_split_op17/model.onnx").string());
  ASSERT_TRUE(graph.is_ok());
  SessionOptions options;
  options.device = device;
  options.queues = 2;
  options.sim_seed = 11;
  auto session = create_session(*graph, options);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  Tensor x = testing::random_tensor(DType::kF32, (*session)->inputs()[0].shape, 5);
  auto expected = (*session)->run({x});
  ASSERT_TRUE(expected.is_ok());
  auto steps = time_each_step(**session);
  ASSERT_TRUE(steps.is_ok());

  auto events = trace_run(**session, {x});
  ASSERT_TRUE(events.is_ok()) << events.status().to_string();
  // One upload, every kernel step, one download (and on sim, which poisons memory, a
  // poison command before each buffer's first writer); each step's label names its node.
  size_t poisons = 0;
  for (const TraceEvent& e : *events) poisons += e.label.rfind("poison '", 0) == 0;
  EXPECT_EQ(poisons > 0, device == "sim");
  ASSERT_EQ(events->size(), steps->size() + 2 + poisons);
  EXPECT_EQ(events->front().label, "upload '" + (*session)->inputs()[0].name + "'");
  EXPECT_EQ(events->back().label, "download '" + (*session)->outputs()[0].name + "'");
  std::multiset<std::string> step_nodes, traced_nodes;
  for (const StepTime& s : *steps) step_nodes.insert("'" + s.node + "'");
  std::set<int> queues;
  std::map<int, const TraceEvent*> last_on_queue;
  size_t flows = 0;
  for (size_t i = 0; i < events->size(); ++i) {
    const TraceEvent& e = (*events)[i];
    SCOPED_TRACE(e.label);
    ASSERT_TRUE(std::isfinite(e.start_ms) && std::isfinite(e.end_ms));
    EXPECT_GE(e.start_ms, 0.0);
    EXPECT_GE(e.end_ms, e.start_ms);
    if (i > 0 && i + 1 < events->size() && e.label.rfind("poison '", 0) != 0)
      traced_nodes.insert(e.label.substr(e.label.find('\'')));
    queues.insert(e.queue);
    // A queue runs its commands in order, one at a time.
    if (auto before = last_on_queue.find(e.queue); before != last_on_queue.end()) {
      EXPECT_GE(e.start_ms, before->second->end_ms);
    }
    last_on_queue[e.queue] = &e;
    for (size_t from : e.waited_for) {  // a wait across queues: the awaited command had ended
      ASSERT_LT(from, i);
      EXPECT_NE((*events)[from].queue, e.queue);
      EXPECT_GE(e.start_ms, (*events)[from].end_ms) << "after " << (*events)[from].label;
      ++flows;
    }
  }
  EXPECT_EQ(traced_nodes, step_nodes);
  // The stamps bracket the work: the steps' traced time is of the order of their time
  // alone, the fastest of three passes (a busy machine only slows a pass; stamps taken
  // after the work give ~0, far under a fifth of it).
  std::vector<double> fastest(steps->size());
  for (size_t k = 0; k < steps->size(); ++k) fastest[k] = (*steps)[k].ms;
  for (int pass = 0; pass < 2; ++pass) {
    auto again = time_each_step(**session);
    ASSERT_TRUE(again.is_ok());
    for (size_t k = 0; k < fastest.size() && k < again->size(); ++k) fastest[k] = std::min(fastest[k], (*again)[k].ms);
  }
  double traced = 0, alone = 0;
  for (const TraceEvent& e : *events)
    if (e.queue != 0 && e.label.rfind("poison '", 0) != 0) traced += e.end_ms - e.start_ms;
  for (double ms : fastest) alone += ms;
  EXPECT_GT(traced, 0.2 * alone) << "steps alone " << alone << " ms";
  EXPECT_EQ(queues, (std::set<int>{0, 1, 2}));  // C2f's branches on both queues
  EXPECT_GE(flows, 3u);  // the upload, the branch join, the download

  // The traced run computed the same outputs as run() (they are dropped; rerun to compare).
  auto again = (*session)->run({x});
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(testing::same_tensor((*again)[0], (*expected)[0]));

  // As a Chrome trace: a slice per command on its queue's track, a flow pair per wait.
  nlohmann::json trace = nlohmann::json::parse(chrome_trace_json(*events, "test"));
  size_t slices = 0, starts = 0, finishes = 0;
  for (const auto& e : trace["traceEvents"]) {
    slices += e["ph"] == "X";
    starts += e["ph"] == "s";
    finishes += e["ph"] == "f";
  }
  EXPECT_EQ(slices, events->size());
  EXPECT_EQ(starts, flows);
  EXPECT_EQ(finishes, flows);
}

// On cuda the stamps are events on the streams (the GPU's clock), the uploads' and
// downloads' events on the default stream.
std::vector<std::string> trace_devices() {
  if (STRIDER_TEST_CUDA_ROWS) return {"cpu", "sim", "cuda"};
  return {"cpu", "sim"};
}
INSTANTIATE_TEST_SUITE_P(Devices, TraceRun, ::testing::ValuesIn(trace_devices()));

}  // namespace
}  // namespace strider
