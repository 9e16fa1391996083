// DynamicSession (include/strider/dynamic_session.h): one model, any input shapes its
// symbolic dims allow, each shape planned once and cached (bounded, least recently used
// out), errors that name the input and dim before anything is planned. The committed
// dynamic-batch CNN (models/dynamic) at batch 1, 4 and 32 against torch's outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <thread>

#include "onnx/tensor_proto.h"
#include "strider/dynamic_session.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

const fs::path kCnn = fs::path(STRIDER_SOURCE_DIR) / "models/dynamic/SmallCnn_dynamic_batch";

Tensor data(int set, const char* file) {
  auto t = read_tensor_pb((kCnn / ("test_data_set_" + std::to_string(set)) / file).string());
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return t.is_ok() ? *t : Tensor();
}

void expect_near(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.num_elements(); ++i)
    EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-6) << "element " << i;
}

// Thread t runs sessions[t] six times, batch 1 and 4 in turn (planning them on the way);
// per thread, the output elements that were not torch's (a failed run counts one).
std::vector<int> wrong_outputs_from_threads(const std::vector<DynamicSession*>& sessions) {
  const Tensor inputs[2] = {data(0, "input_0.pb"), data(1, "input_0.pb")};
  const Tensor wanted[2] = {data(0, "output_0.pb"), data(1, "output_0.pb")};
  std::vector<std::thread> threads;
  std::vector<int> wrong(sessions.size(), 0);
  for (size_t t = 0; t < sessions.size(); ++t)
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < 6; ++k) {
        const size_t set = (t + k) % 2;
        auto out = sessions[t]->run({{"x", inputs[set]}});
        if (!out.is_ok() || (*out)[0].shape() != wanted[set].shape()) {
          ++wrong[t];
          continue;
        }
        for (int64_t i = 0; i < wanted[set].num_elements(); ++i)
          if (std::fabs((*out)[0].data<float>()[i] - wanted[set].data<float>()[i]) > 1e-6f) ++wrong[t];
      }
    });
  for (std::thread& t : threads) t.join();
  return wrong;
}

TEST(DynamicSession, PlansEachShapeOnceAndMatchesTorch) {
  auto session = DynamicSession::load((kCnn / "model.onnx").string(), SessionOptions{});
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  DynamicSession& s = **session;
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].shape, (Shape{-1, 3, 16, 16}));
  EXPECT_EQ(s.inputs()[0].dim_params[0], "batch");
  EXPECT_EQ(s.outputs()[0].dim_params[0], "batch");
  EXPECT_EQ(s.plans_made(), 0);
  for (int set : {0, 1, 2, 1, 0}) {  // batch 1, 4, 32, 4, 1
    auto out = s.run({{"x", data(set, "input_0.pb")}});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    expect_near((*out)[0], data(set, "output_0.pb"));
  }
  EXPECT_EQ(s.plans_made(), 3);
  EXPECT_EQ(s.cached_shapes(), 3);
}

TEST(DynamicSession, BoundedCacheAndPins) {
  DynamicSessionOptions dynamic;
  dynamic.max_cached_shapes = 1;
  auto session = DynamicSession::load((kCnn / "model.onnx").string(), SessionOptions{}, dynamic);
  ASSERT_TRUE(session.is_ok());
  for (int set : {0, 1, 0}) ASSERT_TRUE((*session)->run({{"x", data(set, "input_0.pb")}}).is_ok());
  EXPECT_EQ((*session)->plans_made(), 3);  // batch 1 was evicted by batch 4
  EXPECT_EQ((*session)->cached_shapes(), 1);
  dynamic.pinned_dims = {{"batch", 4}};
  auto pinned = DynamicSession::load((kCnn / "model.onnx").string(), SessionOptions{}, dynamic);
  ASSERT_TRUE(pinned.is_ok());
  EXPECT_EQ((*pinned)->plans_made(), 1);  // every dim known: planned at load
  auto wrong = (*pinned)->run({{"x", data(0, "input_0.pb")}});
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.status().message(), "input 'x' dim 0 ('batch'): got 1, expected 4 (pinned)");
  dynamic.pinned_dims = {{"sequence", 4}};
  auto nowhere = DynamicSession::load((kCnn / "model.onnx").string(), SessionOptions{}, dynamic);
  ASSERT_FALSE(nowhere.is_ok());
  EXPECT_EQ(nowhere.status().code(), StatusCode::kInvalidArgument);
}

TEST(DynamicSession, PreparedShapesArePlannedAtLoad) {
  DynamicSessionOptions dynamic;
  dynamic.prepared_shapes = {{{"x", {4, 3, 16, 16}}}, {{"x", {32, 3, 16, 16}}}};
  auto session = DynamicSession::load((kCnn / "model.onnx").string(), SessionOptions{}, dynamic);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  EXPECT_EQ((*session)->plans_made(), 2);
  auto out = (*session)->run({{"x", data(2, "input_0.pb")}});  // batch 32: already planned
  ASSERT_TRUE(out.is_ok());
  expect_near((*out)[0], data(2, "output_0.pb"));
  EXPECT_EQ((*session)->plans_made(), 2);
  dynamic.prepared_shapes = {{{"x", {4, 3, 15, 16}}}};
  auto bad = DynamicSession::load((kCnn / "model.onnx").string(), SessionOptions{}, dynamic);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), "input 'x' dim 2: got 15, expected 16");
}

TEST(DynamicSession, BadInputsPlanNothing) {
  auto session = DynamicSession::load((kCnn / "model.onnx").string(), SessionOptions{});
  ASSERT_TRUE(session.is_ok());
  DynamicSession& s = **session;
  EXPECT_EQ(s.run({{"x", Tensor(DType::kF64, {1, 3, 16, 16})}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.run({{"x", Tensor(DType::kF32, {1, 3, 16})}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.run({{"x", Tensor(DType::kF32, {1, 3, 15, 16})}}).status().message(),
            "input 'x' dim 2: got 15, expected 16");
  EXPECT_EQ(s.run(std::map<std::string, Tensor>{}).status().message(), "missing input 'x'");
  EXPECT_EQ(s.run({{"x", data(0, "input_0.pb")}, {"y", Tensor(DType::kF32, {1})}}).status().message(),
            "'y' is not an input of the model");
  EXPECT_EQ(s.plans_made(), 0);
}

// Every cached shape runs on one device with one copy of each weight: a new batch size
// uploads only what folds per shape, never the weights again.
// In f32 and in bf16 (whose plans share one bf16 copy of each weight).
TEST(DynamicSession, WeightsAreUploadedOnce) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    SessionOptions options;
    options.dtype = dtype;
    auto session = DynamicSession::load((kCnn / "model.onnx").string(), options);
    ASSERT_TRUE(session.is_ok());
    DynamicSession& s = **session;
    ASSERT_TRUE(s.run({{"x", data(0, "input_0.pb")}}).is_ok());
    const int64_t first = s.constant_uploads();
    EXPECT_GE(first, 4);  // the convolutions' and the classifier's weights and biases
    ASSERT_TRUE(s.run({{"x", data(1, "input_0.pb")}}).is_ok());
    ASSERT_TRUE(s.run({{"x", data(2, "input_0.pb")}}).is_ok());
    EXPECT_EQ(s.plans_made(), 3);
    EXPECT_EQ(s.constant_uploads(), first) << "batch 4 and 32 uploaded constants batch 1 had uploaded";
  }
}

// max_memory_bytes bounds the cache as a whole: a budget that holds one batch-32 plan but
// not it and batch 4 together makes the older plan go, and every run still succeeds. (On
// the CPU, `strider inspect --shape x:32x3x16x16` shows 263168 arena + 98304 input + 640
// output bytes for batch 32, 32896 + 12288 + 128 for batch 4, 1216 of weights.)
TEST(DynamicSession, MemoryCapEvictsLeastRecentlyUsed) {
  SessionOptions options;
  options.max_memory_bytes = 390 << 10;
  auto session = DynamicSession::load((kCnn / "model.onnx").string(), options);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  DynamicSession& s = **session;
  for (int set : {1, 2, 1, 2}) {  // batch 4, 32, 4, 32
    auto out = s.run({{"x", data(set, "input_0.pb")}});
    ASSERT_TRUE(out.is_ok()) << "batch set " << set << ": " << out.status().to_string();
    expect_near((*out)[0], data(set, "output_0.pb"));
  }
  EXPECT_EQ(s.plans_made(), 4) << "each shape should have pushed the other out";
  EXPECT_EQ(s.cached_shapes(), 1);
  options.max_memory_bytes = 256;  // not even the weights
  auto tiny = DynamicSession::load((kCnn / "model.onnx").string(), options);
  ASSERT_FALSE(tiny.is_ok());
  EXPECT_EQ(tiny.status().code(), StatusCode::kResourceExhausted);
}

// Runs are serialized: four threads running batch 1 and 4 (planning them on the way) get
// exactly what one thread gets (under TSan in CI, the exec tests' build).
TEST(DynamicSession, ThreadsShareOneSession) {
  auto session = DynamicSession::load((kCnn / "model.onnx").string(), SessionOptions{});
  ASSERT_TRUE(session.is_ok());
  std::vector<int> wrong = wrong_outputs_from_threads({session->get(), session->get(), session->get(), session->get()});
  for (int t = 0; t < 4; ++t) EXPECT_EQ(wrong[size_t(t)], 0) << "thread " << t;
  EXPECT_EQ((*session)->plans_made(), 2);
}

// load_instances: three instances of the model on one device hold its weights once (the
// store the first uploads into is every instance's: a lone session's uploads, no more, and
// the others' device memory lacks them), and run side by side from three threads, each
// instance its own queues, arena and lock, each run giving torch's outputs.
TEST(DynamicSession, InstancesShareTheWeightsAndRunSideBySide) {
  const std::string path = (kCnn / "model.onnx").string();
  auto lone = DynamicSession::load(path, SessionOptions{});
  auto instances = DynamicSession::load_instances(path, SessionOptions{}, 3);
  ASSERT_TRUE(lone.is_ok() && instances.is_ok()) << instances.status().to_string();
  ASSERT_EQ(instances->size(), 3u);
  const Tensor input = data(0, "input_0.pb");
  ASSERT_TRUE((*lone)->run({{"x", input}}).is_ok());
  ASSERT_TRUE((*instances)[0]->run({{"x", input}}).is_ok());
  // The first instance's run uploaded the weights; the others, not yet run, see them.
  for (auto& instance : *instances) EXPECT_EQ(instance->constant_uploads(), (*lone)->constant_uploads());
  for (auto& instance : *instances) ASSERT_TRUE(instance->run({{"x", input}}).is_ok());
  for (auto& instance : *instances) EXPECT_EQ(instance->constant_uploads(), (*lone)->constant_uploads());
  EXPECT_EQ((*instances)[0]->device_memory_bytes(), (*lone)->device_memory_bytes());
  EXPECT_LT((*instances)[1]->device_memory_bytes(), (*instances)[0]->device_memory_bytes());
  std::vector<int> wrong = wrong_outputs_from_threads({(*instances)[0].get(), (*instances)[1].get(), (*instances)[2].get()});
  for (int t = 0; t < 3; ++t) EXPECT_EQ(wrong[size_t(t)], 0) << "instance " << t;
  for (auto& instance : *instances) EXPECT_EQ(instance->constant_uploads(), (*lone)->constant_uploads());
  EXPECT_EQ(DynamicSession::load_instances(path, SessionOptions{}, 0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strider
