// The plan/bind split (plan/planner.h, plan/bind.h): planning is a pure function (same
// graph, same capabilities, same text; no device), a session runs exactly the plan the
// pure planner makes, and binding rebases every view onto real memory, sharing one device
// copy of each constant among the plans bound through one store.
#include <gtest/gtest.h>

#include <cstring>

#include "exec/session_internal.h"
#include "plan/bind.h"
#include "plan/dump.h"
#include "plan_test_util.h"

namespace strider {
namespace {
using testing::random_f32;

// A small convolutional graph with weights, a concat in place, a view and a reshape.
Graph conv_graph(int64_t batch) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {batch, 4, 6, 6});
  AttributeMap conv;
  conv.set_ints("kernel_shape", {3, 3});
  conv.set_ints("pads", {1, 1, 1, 1});
  ValueId c1 = b.op("Conv", {x, b.constant("w1", random_f32({4, 4, 3, 3}, 1)), b.constant("b1", random_f32({4}, 2))},
                    conv, "conv1");
  ValueId r = b.op("Relu", {c1}, {}, "relu");
  ValueId s = b.op("Sigmoid", {x}, {}, "sig");
  AttributeMap axis;
  axis.set_int("axis", 1);
  ValueId cat = b.op("Concat", {r, s}, axis, "cat");
  AttributeMap flat_axis;
  flat_axis.set_int("axis", 1);
  ValueId flat = b.op("Flatten", {cat}, flat_axis, "flat");
  b.output(b.op("MatMul", {flat, b.constant("w2", random_f32({8 * 36, 5}, 3))}, {}, "fc"));
  return b.build();
}

TEST(PurePlan, SameGraphSameCapabilitiesSameText) {
  auto a = testing::plan_graph(conv_graph(2));
  auto b = testing::plan_graph(conv_graph(2));
  ASSERT_NE(a.plan, nullptr);
  ASSERT_NE(b.plan, nullptr);
  EXPECT_EQ(plan_to_text(*a.graph, *a.plan), plan_to_text(*b.graph, *b.plan));
  // The views lie on the plan's placeholders, which have sizes and no address.
  for (const auto& v : a.plan->values) {
    if (!v || !v->view.allocation) continue;
    EXPECT_EQ(v->view.allocation->address(), nullptr);
    EXPECT_EQ(v->view.allocation->device_name(), "planned");
  }
}

TEST(PurePlan, CapabilitiesDecideTheLayout) {
  PlanOptions options = testing::verified();
  options.layout = LayoutChoice::kAuto;
  DeviceCapabilities channels_last, row_major;
  row_major.channels_last_f32 = false;
  EXPECT_EQ(testing::plan_graph(conv_graph(1), options, channels_last).plan->layout, "nhwc");
  EXPECT_EQ(testing::plan_graph(conv_graph(1), options, row_major).plan->layout, "nchw");
}

TEST(PurePlan, ASessionRunsThePlanThePlannerMakes) {
  PlanOptions options = testing::verified();
  options.layout = LayoutChoice::kNchw;
  auto session = testing::plan_in_session(conv_graph(2), options, testing::unfused());
  ASSERT_NE(session.plan, nullptr);
  auto device = create_device("cpu");
  ASSERT_TRUE(device.is_ok());
  auto pure = testing::plan_graph(conv_graph(2), options, capabilities_of(**device));
  ASSERT_NE(pure.plan, nullptr);
  EXPECT_EQ(plan_to_text(*session.graph, *session.plan), plan_to_text(*pure.graph, *pure.plan));
}

TEST(Bind, RebasesEveryViewAndSharesConstants) {
  auto planned = testing::plan_graph(conv_graph(2));
  ASSERT_NE(planned.plan, nullptr);
  auto made = create_device("cpu");
  ASSERT_TRUE(made.is_ok());
  std::shared_ptr<Device> device = std::move(made).value();
  DeviceConstants constants(device);
  auto first = bind_plan(*planned.plan, *planned.graph, *device, constants);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  const int64_t uploads = constants.uploads();
  EXPECT_GE(uploads, 3);  // w1, b1, w2 (and any folded constant)
  auto second = bind_plan(*planned.plan, *planned.graph, *device, constants);
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_EQ(constants.uploads(), uploads) << "a second binding uploaded constants again";
  const Graph& g = *planned.graph;
  for (ValueId id = 0; id < g.num_values(); ++id) {
    if (!first->plan.values[size_t(id)]) continue;
    const TensorView& a = first->plan.view(id);
    const TensorView& b = second->plan.view(id);
    ASSERT_NE(a.allocation, nullptr);
    EXPECT_NE(a.allocation->address(), nullptr) << g.value(id).name << " still on a placeholder";
    EXPECT_NE(a.allocation->device_name(), "planned");
    const bool constant = first->plan.buffers[size_t(first->plan.values[size_t(id)]->buffer)].kind == StorageKind::kConstant;
    if (constant) {
      EXPECT_EQ(a.allocation, b.allocation) << g.value(id).name << ": one device copy for both bindings";
      const Tensor& host = *g.value(id).constant;
      EXPECT_EQ(std::memcmp(a.host_data(), host.bytes(), host.byte_size()), 0) << g.value(id).name;
    } else {
      EXPECT_NE(a.allocation, b.allocation) << g.value(id).name << ": each binding has its own arena";
      EXPECT_EQ(a.byte_offset, planned.plan->view(id).byte_offset) << "offsets inside a block are the plan's";
    }
  }
  // Step operands are the values' bound views.
  for (const PlanStep& step : first->plan.steps)
    for (size_t i = 0; i < step.inputs.size(); ++i)
      if (step.inputs[i].allocation) {
        EXPECT_EQ(step.inputs[i].allocation, first->plan.view(g.node(step.node).inputs[i]).allocation);
      }
  const int64_t live = constants.live_bytes();
  EXPECT_GT(live, 0);
  *first = BoundPlan();
  EXPECT_EQ(constants.live_bytes(), live) << "the second binding still holds the constants";
  *second = BoundPlan();
  EXPECT_EQ(constants.live_bytes(), 0) << "the constants go with the last plan that used them";
}

// A copy whose last plan is gone is uploaded again, also by a get() that no sweep preceded
// (another session's plan can die between a bind's sweep and its get()).
TEST(Bind, AConstantWhoseCopiesAreGoneIsUploadedAgain) {
  auto made = create_device("cpu");
  ASSERT_TRUE(made.is_ok());
  std::shared_ptr<Device> device = std::move(made).value();
  DeviceConstants constants(device);
  auto host = std::make_shared<const Tensor>(random_f32({3, 5}, 4));
  TensorView view;
  view.dtype = DType::kF32;
  view.sizes = {3, 5};
  view.strides = {5, 1};
  auto first = constants.get(host, view, host->byte_size(), "const:w");
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  ASSERT_NE(*first, nullptr);
  EXPECT_EQ(constants.uploads(), 1);
  *first = nullptr;  // the last holder goes; no sweep follows
  auto again = constants.get(host, view, host->byte_size(), "const:w");
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  ASSERT_NE(*again, nullptr) << "the expired entry was handed out";
  EXPECT_EQ(constants.uploads(), 2);
  EXPECT_EQ(std::memcmp((*again)->address(), host->bytes(), host->byte_size()), 0);
  EXPECT_EQ(constants.live_bytes(), host->byte_size());
}

}  // namespace
}  // namespace strider
