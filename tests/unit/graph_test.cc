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

}  // namespace
}  // namespace strider
