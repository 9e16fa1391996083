// The kernel suite's fixture: one device of kernel_harness.h's list and one view layout of
// its catalog per test instance, instantiated once (kernel_suite_tests.cc) for every
// TEST_P of the suite in any file of the binary.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>

#include "ir/builder.h"
#include "kernel_harness.h"

namespace strider::kernel_test {

// Sets an environment variable for its lifetime, restoring what was there.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (previous_) setenv(name_.c_str(), previous_->c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  std::string name_;
  std::optional<std::string> previous_;
};

class KernelSuite : public ::testing::TestWithParam<std::tuple<const char*, ViewLayout>> {
 protected:
  void SetUp() override {
    auto device = kernel_test::open_device(std::get<0>(GetParam()));
    if (!device.is_ok()) GTEST_SKIP() << std::get<0>(GetParam()) << " is not here: " << device.status().message();
    device_ = std::move(*device);
  }
  ViewLayout layout() const { return std::get<1>(GetParam()); }
  void check(GraphBuilder& b, const std::map<std::string, Tensor>& inputs) {
    kernel_test::check_node(*device_, b.build(), inputs, layout());
  }

 public:
  bool on_cuda() const { return std::string_view(std::get<0>(GetParam())) == "cuda"; }
  // A one-node graph made by a pass, checked against the graph it came from.
  void check_graph(Graph graph, const std::map<std::string, Tensor>& inputs, const Graph* reference) {
    kernel_test::check_node(*device_, std::move(graph), inputs, layout(), reference);
  }

 protected:
  Tensor x(const Shape& shape, uint32_t seed = 1) { return kernel_test::random_tensor(DType::kF32, shape, seed); }
  Tensor random_tensor(DType dtype, const Shape& shape, uint32_t seed) {
    return kernel_test::random_tensor(dtype, shape, seed);
  }
  std::unique_ptr<Device> device_;
};

}  // namespace strider::kernel_test
