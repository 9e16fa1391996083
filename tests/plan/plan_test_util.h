// Helpers for the planner tests: plan a builder graph with no device (the plan is a pure
// function of graph, shapes and capabilities), or through a real session so the kernels'
// refusals take part, and look values and steps up by name.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "exec/session_internal.h"
#include "ir/builder.h"
#include "passes/infer_shapes.h"
#include "reference/reference.h"
#include "strider/compare.h"

namespace strider::testing {

struct PlannedGraph {
  std::unique_ptr<Session> session;              // planned through a session, or
  std::unique_ptr<::strider::PlannedGraph> pure;  // planned with no device
  const Graph* graph = nullptr;
  const Plan* plan = nullptr;

  const PlannedValue& value(const std::string& name) const {
    auto id = graph->find_value(name);
    EXPECT_TRUE(id.has_value()) << name;
    return *plan->values.at(size_t(*id));
  }
  const PlanStep& step(const std::string& node_name) const {
    for (const PlanStep& s : plan->steps)
      if (graph->node(s.node).name == node_name) return s;
    ADD_FAILURE() << "no step " << node_name;
    return plan->steps.front();
  }
  std::string alias_name(const std::string& name) const {
    ValueId alias = value(name).alias_of;
    return alias == kNoValue ? "" : graph->value(alias).name;
  }
};

inline PlanOptions verified(PlanOptions options = {}) {
  options.verify = true;
  return options;
}

// Intent tests plan the graph as built: fusion would fold their elementwise chains.
inline SessionOptions unfused() {
  SessionOptions options;
  options.fusion = false;
  return options;
}

// Shape inference and the planner alone, for a device with `capabilities`: no device exists.
inline PlannedGraph plan_graph(Graph graph, PlanOptions options = verified(),
                               const DeviceCapabilities& capabilities = {}) {
  PlannedGraph planned;
  Status inferred = infer_and_fold(graph);
  EXPECT_TRUE(inferred.is_ok()) << inferred.to_string();
  auto plan = make_plan(std::move(graph), capabilities, options);
  EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
  if (!plan.is_ok()) return planned;
  planned.pure = std::make_unique<::strider::PlannedGraph>(std::move(plan).value());
  planned.graph = &planned.pure->graph;
  planned.plan = &planned.pure->plan;
  return planned;
}

// Planned as a session plans: its passes, the device's kernels and their refusals.
inline PlannedGraph plan_in_session(Graph graph, PlanOptions options, const SessionOptions& session_options) {
  PlannedGraph planned;
  auto session = create_session(std::move(graph), session_options, options);
  EXPECT_TRUE(session.is_ok()) << session.status().to_string();
  if (!session.is_ok()) return planned;
  planned.session = std::move(session).value();
  SessionPlanView view = inspect_session(*planned.session);
  planned.graph = view.graph;
  planned.plan = view.plan;
  return planned;
}

// Each of `actual` against the same output of `reference` (the float64 reference's outputs,
// or another run's) within `tolerance`, values in order.
template <typename Reference>
void expect_outputs_near(const std::vector<Tensor>& actual, const std::vector<Reference>& reference,
                         const Tolerance& tolerance, const std::string& what = "") {
  ASSERT_EQ(actual.size(), reference.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    std::vector<double> a, e;
    for (int64_t k = 0; k < actual[i].num_elements(); ++k) a.push_back(actual[i].element_as_double(k));
    for (int64_t k = 0; k < reference[i].num_elements(); ++k) e.push_back(reference[i].element_as_double(k));
    Comparison c = compare_values(a, e, tolerance, false);
    EXPECT_TRUE(c.passed) << what << " output " << i << ": " << c.reason;
  }
}

// Runs the one-input graph `g` planned in a session on `input` and checks its first output
// against the float64 reference within `dtype`'s tolerance (shapes equal).
inline void expect_session_matches_reference(const Graph& g, const SessionOptions& options, const Tensor& input,
                                             DType dtype) {
  auto p = plan_in_session(g, verified(), options);
  ASSERT_NE(p.session, nullptr);
  auto actual = p.session->run({input});
  ASSERT_TRUE(actual.is_ok()) << actual.status().to_string();
  auto expected = evaluate_reference(g, {{g.value(g.inputs()[0]).name, input}});
  ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
  ASSERT_EQ((*actual)[0].shape(), expected->outputs[0].shape);
  expect_outputs_near(std::vector<Tensor>{(*actual)[0]}, std::vector<RefTensor>{expected->outputs[0]},
                      default_tolerance(dtype));
}

inline Tensor random_f32(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Tensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

inline AttributeMap int_attribute(const std::string& name, int64_t value) {
  AttributeMap a;
  a.set_int(name, value);
  return a;
}

}  // namespace strider::testing
