#include "ir/graph.h"

#include <gtest/gtest.h>

#include "ir/builder.h"

namespace strider {
namespace {

TEST(Graph, BuilderMakesATopologicalGraphWithProducersAndConsumers) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2, 8});
  auto halves = b.ops("Split", {x}, 2);
  ValueId y = b.op("Add", {halves[0], halves[1]});
  b.output(y);
  Graph g = b.build();
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_EQ(g.value(y).producer, 1);
  auto consumers = g.consumers();
  EXPECT_EQ(consumers[size_t(x)], (std::vector<NodeId>{0}));
  EXPECT_EQ(consumers[size_t(halves[1])], (std::vector<NodeId>{1}));
  g.remove_nodes_if([](const Node& n) { return n.op_type == "Split"; });
  EXPECT_EQ(g.num_nodes(), 1);
  EXPECT_EQ(g.value(y).producer, 0);
  EXPECT_EQ(g.value(halves[0]).producer, kNoNode);
}

TEST(Graph, DuplicateNamesAndDoubleProducersAreModelErrors) {
  Graph g;
  ASSERT_TRUE(g.add_value("a").is_ok());
  auto again = g.add_value("a");
  ASSERT_FALSE(again.is_ok());
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidModel);
  ValueId out = *g.add_value("b");
  Node n1;
  n1.name = "first";
  n1.outputs = {out};
  ASSERT_TRUE(g.add_node(n1).is_ok());
  Node n2 = n1;
  n2.name = "second";
  auto twice = g.add_node(n2);
  ASSERT_FALSE(twice.is_ok());
  EXPECT_NE(twice.status().message().find("second"), std::string::npos);
}

// Appends a one-output node `name` reading `inputs`; returns its output.
ValueId append(Graph& g, const std::string& name, std::vector<ValueId> inputs) {
  ValueId out = *g.add_value(name + "_out");
  Node n;
  n.name = name;
  n.op_type = "Relu";
  n.inputs = std::move(inputs);
  n.outputs = {out};
  EXPECT_TRUE(g.add_node(std::move(n)).is_ok());
  return out;
}

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (NodeId id = 0; id < g.num_nodes(); ++id) names.push_back(g.node(id).name);
  return names;
}

// What expand_functions does: bodies appended at the end replace their nodes in one pass.
TEST(Graph, AppendedBodiesTakeThePlacesOfTheNodesTheyReplace) {
  Graph g;
  ValueId x = *g.add_value("x");
  g.inputs() = {x};
  ValueId a = append(g, "a", {x});
  ValueId b = append(g, "b", {a});
  ValueId c = append(g, "c", {b});
  append(g, "d", {c});
  // b becomes b1 -> b2 writing b's output; d becomes d1; a and c stay.
  g.release_outputs(1);
  ValueId b1 = append(g, "b1", {a});
  Node b2;
  b2.name = "b2";
  b2.op_type = "Relu";
  b2.inputs = {b1};
  b2.outputs = {b};
  ASSERT_TRUE(g.add_node(b2).is_ok());
  g.release_outputs(3);
  append(g, "d1", {c});
  ASSERT_TRUE(g.replace_with_appended_bodies({{1, 4, 6}, {3, 6, 7}}).is_ok());
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"a", "b1", "b2", "c", "d1"}));
  EXPECT_EQ(g.value(b).producer, 2);
  EXPECT_EQ(g.value(c).producer, 3);
  EXPECT_EQ(g.value(b1).producer, 1);
}

TEST(Graph, AppendedBodiesThatDoNotTileTheAppendedNodesAreRefused) {
  Graph g;
  ValueId x = *g.add_value("x");
  ValueId a = append(g, "a", {x});
  append(g, "b", {a});
  append(g, "a1", {x});
  append(g, "b1", {a});
  const std::vector<std::string> before = node_names(g);
  for (const std::vector<AppendedBody>& bad : std::vector<std::vector<AppendedBody>>{
           {{0, 2, 3}},                 // node 3 replaces nothing
           {{1, 2, 3}, {0, 3, 4}},      // out of order
           {{0, 2, 3}, {1, 2, 4}},      // overlapping
           {{2, 2, 4}},                 // an appended node replaced
           {{0, 2, 3}, {1, 3, 5}}}) {  // past the end
    EXPECT_EQ(g.replace_with_appended_bodies(bad).code(), StatusCode::kInternal);
    EXPECT_EQ(node_names(g), before) << "a refused replacement changed the graph";
  }
}

}  // namespace
}  // namespace strider
