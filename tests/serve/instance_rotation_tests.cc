// A model's instances over a device list (tools/serve/model_repository.h), and a device that
// fails (fault_for_testing: its runs end in DEVICE_ERROR, as on a GPU whose context died):
// its instance leaves rotation and is reported, the requests it held run on the others,
// every answer is still right, and the model stays ready until no instance is left; then
// requests get the last failure. Unbatched and through the batcher.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "model_repository.h"

namespace strider::serve {
namespace {

const std::string kCnn = std::string(STRIDER_SOURCE_DIR) + "/models/dynamic/SmallCnn_dynamic_batch/model.onnx";

std::unique_ptr<ServedModel> cnn_on_cpu_and_sim(int max_batch) {
  auto model = std::make_unique<ServedModel>();
  model->name = "cnn";
  model->path = kCnn;
  ModelDefaults options;
  options.device = "cpu,sim";  // one instance on each
  options.threads = 1;
  options.max_batch = max_batch;
  options.measure_batch = false;
  model->load(options);
  EXPECT_TRUE(model->ready()) << model->error;
  return model;
}

std::map<std::string, Tensor> image(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Tensor x(DType::kF32, {1, 3, 16, 16});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = normal(rng);
  return {{"x", x}};
}

// 24 requests from 6 threads at once; each must be answered with what a plain cpu session gives.
void expect_every_answer_right(ServedModel& model) {
  SessionOptions options;
  options.threads = 1;
  auto plain = DynamicSession::load(kCnn, options);
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  std::vector<std::thread> threads;
  std::vector<std::string> wrong(24);
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int k = t; k < 24; k += 6) {
        Result<std::vector<Tensor>> got = model.infer(image(uint32_t(k)));
        if (!got.is_ok()) wrong[size_t(k)] = got.status().to_string();
      }
    });
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < 24; ++k) {
    EXPECT_EQ(wrong[size_t(k)], "") << "request " << k;
    if (!wrong[size_t(k)].empty()) continue;
    auto expected = (*plain)->run(image(uint32_t(k)));
    auto again = model.infer(image(uint32_t(k)));
    ASSERT_TRUE(expected.is_ok() && again.is_ok());
    const Tensor &a = (*expected)[0], &b = (*again)[0];
    ASSERT_EQ(a.num_elements(), b.num_elements());
    for (int64_t i = 0; i < a.num_elements(); ++i) ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5f) << k;
  }
}

std::map<std::string, bool> in_rotation(const ServedModel& model) {
  std::map<std::string, bool> by_device;
  for (const ServedModel::InstanceState& s : model.instance_states()) by_device[s.device] = s.in_rotation;
  return by_device;
}

void check_failover(int max_batch, const std::string& failing) {
  auto model = cnn_on_cpu_and_sim(max_batch);
  std::atomic<bool> all_fail{false};
  model->fault_for_testing = [&](const std::string& device, const std::map<std::string, Tensor>&) {
    if (all_fail || device == failing) return device_error(device + ": the context failed (injected)");
    return Status::ok();
  };
  expect_every_answer_right(*model);
  const std::string other = failing == "cpu" ? "sim" : "cpu";
  EXPECT_EQ(in_rotation(*model), (std::map<std::string, bool>{{failing, false}, {other, true}}));
  EXPECT_TRUE(model->ready());

  all_fail = true;
  Result<std::vector<Tensor>> refused = model->infer(image(99));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("out of rotation"), std::string::npos) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find(other + ": the context failed"), std::string::npos) << refused.status().to_string();
  EXPECT_FALSE(model->ready());
  EXPECT_NE(model->why_not_ready().find("the context failed"), std::string::npos) << model->why_not_ready();
}

// A request that makes a kernel fail with DEVICE_ERROR on healthy devices (here: an image
// whose first value is 1e30, through the fault hook) gets its error; the probe on the
// warm-up inputs passes, so no instance leaves rotation, and the next requests are served.
void check_poisoned_request(int max_batch) {
  auto model = cnn_on_cpu_and_sim(max_batch);
  model->fault_for_testing = [](const std::string& device, const std::map<std::string, Tensor>& inputs) {
    const Tensor& x = inputs.at("x");
    if (x.num_elements() > 0 && x.data<float>()[0] == 1e30f) return device_error(device + ": a kernel failed on this input");
    return Status::ok();
  };
  std::map<std::string, Tensor> poison = image(5);
  poison["x"].data<float>()[0] = 1e30f;
  Result<std::vector<Tensor>> failed = model->infer(poison);
  ASSERT_FALSE(failed.is_ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kDeviceError) << failed.status().to_string();
  EXPECT_EQ(in_rotation(*model), (std::map<std::string, bool>{{"cpu", true}, {"sim", true}}));
  EXPECT_TRUE(model->ready());
  expect_every_answer_right(*model);
}

TEST(InstanceRotation, APoisonedRequestTakesNoDeviceDown) {
  check_poisoned_request(0);
  check_poisoned_request(4);
}

// Unbatched, a request takes the first free instance: cpu's, which fails, so the first
// request is the one that moves to sim.
TEST(InstanceRotation, UnbatchedRequestsMoveOffAFailedDevice) { check_failover(0, "cpu"); }

// The batcher's first batch goes to the last instance (sim's), which fails: its requests
// go back to the head of the queue and run on cpu's.
TEST(InstanceRotation, BatchesMoveOffAFailedDevice) { check_failover(4, "sim"); }

}  // namespace
}  // namespace strider::serve
