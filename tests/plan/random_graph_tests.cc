// Randomized property test of the planner: thousands of seeded random graphs (chains and
// branches of Split, Slice, Concat, Transpose, Reshape, elementwise ops, MatMul and Conv)
// run with the planner on (nchw and nhwc) and off, each compared with the float64
// reference. Memory is poisoned before each run, so an element no kernel writes fails.
// A failure prints the seed; STRIDER_RANDOM_SEED=N reruns just that graph, and
// STRIDER_DEBUG_PLAN=1 prints its plans (unverified, so a broken plan can be read).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "strider/compare.h"
#include "plan/dump.h"
#include "plan_test_util.h"
#include "reference/reference.h"

namespace strider {
namespace {


// Builds one random graph; every value is rank 4 so any op can follow any other.
class RandomGraph {
 public:
  explicit RandomGraph(uint32_t seed) : rng_(seed), builder_(17) {}

  Graph build(std::map<std::string, Tensor>* inputs) {
    Shape shape = {pick(1, 2), pick(2, 6), pick(2, 5), pick(2, 5)};
    ValueId x = builder_.input("x", DType::kF32, shape);
    (*inputs)["x"] = testing::random_f32(shape, rng_());
    pool_.push_back({x, shape});
    int ops = pick(3, 12);
    for (int i = 0; i < ops; ++i) add_random_op();
    // The last value, and each other value nothing reads with even odds (so branches
    // stay alive and some outputs are would-be views), are outputs.
    std::vector<bool> read(size_t(builder_.graph().num_values()), false);
    for (NodeId n = 0; n < builder_.graph().num_nodes(); ++n)
      for (ValueId in : builder_.graph().node(n).inputs) read[size_t(in)] = true;
    for (size_t i = 1; i + 1 < pool_.size(); ++i)
      if (!read[size_t(pool_[i].id)] && pick(0, 1)) builder_.output(pool_[i].id);
    builder_.output(pool_.back().id);
    return builder_.build();
  }

 private:
  struct Item {
    ValueId id;
    Shape shape;
  };

  int pick(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }
  const Item& any() { return pool_[size_t(pick(0, int(pool_.size()) - 1))]; }
  std::string name(const char* op) { return std::string(op) + "_" + std::to_string(counter_++); }
  void add(ValueId id, Shape shape) { pool_.push_back({id, std::move(shape)}); }
  ValueId weights(const Shape& shape) { return builder_.constant(name("w"), testing::random_f32(shape, rng_())); }

  void add_random_op() {
    switch (pick(0, 9)) {
      case 0: unary(); break;
      case 1: binary(); break;
      case 2: split(); break;
      case 3: slice(); break;
      case 4: concat(); break;
      case 5: transpose(); break;
      case 6: reshape(); break;
      case 7: matmul(); break;
      case 8: conv(); break;
      default: unary(); break;
    }
  }

  void unary() {
    static const char* kOps[] = {"Relu", "Sigmoid", "Tanh", "Neg"};
    Item in = any();
    add(builder_.op(kOps[pick(0, 3)], {in.id}, {}, name("unary")), in.shape);
  }

  void binary() {
    Item a = any();
    std::vector<Item> same;
    for (const Item& it : pool_)
      if (it.shape == a.shape) same.push_back(it);
    Item b = same[size_t(pick(0, int(same.size()) - 1))];
    if (pick(0, 2) == 0) {  // a per-channel constant, broadcast
      b = {weights({1, a.shape[1], 1, 1}), {1, a.shape[1], 1, 1}};
    }
    add(builder_.op(pick(0, 1) ? "Add" : "Mul", {a.id, b.id}, {}, name("binary")), a.shape);
  }

  void split() {
    Item in = any();
    int64_t axis = pick(1, 3);
    int64_t dim = in.shape[size_t(axis)];
    if (dim < 2) return unary();
    int64_t first = pick(1, int(dim) - 1);
    AttributeMap attrs = testing::int_attribute("axis", axis);
    auto parts = builder_.ops("Split", {in.id, builder_.constant(name("sizes"), i64_tensor({first, dim - first}))}, 2,
                              attrs, name("split"));
    Shape a = in.shape, b = in.shape;
    a[size_t(axis)] = first;
    b[size_t(axis)] = dim - first;
    add(parts[0], a);
    add(parts[1], b);
  }

  void slice() {
    Item in = any();
    int64_t axis = pick(0, 3);
    int64_t dim = in.shape[size_t(axis)];
    int64_t step = pick(0, 2) == 0 ? -1 : pick(1, 2);
    int64_t start = pick(0, int(dim) - 1), end = step > 0 ? pick(int(start) + 1, int(dim)) : pick(-1, int(start) - 1);
    int64_t count = step > 0 ? (end - start + step - 1) / step : (start - end + (-step) - 1) / (-step);
    if (step < 0 && end == -1) end = -int64_t(dim) - 1;  // ONNX: before the first element
    ValueId out = builder_.op("Slice", {in.id, builder_.constant(name("s"), i64_tensor({start})),
                                        builder_.constant(name("e"), i64_tensor({end})),
                                        builder_.constant(name("a"), i64_tensor({axis})),
                                        builder_.constant(name("st"), i64_tensor({step}))},
                              {}, name("slice"));
    Shape shape = in.shape;
    shape[size_t(axis)] = count;
    add(out, shape);
  }

  void concat() {
    Item a = any();
    std::vector<Item> parts = {a};
    for (const Item& it : pool_)
      if (it.id != a.id && it.shape[0] == a.shape[0] && it.shape[2] == a.shape[2] && it.shape[3] == a.shape[3] &&
          pick(0, 1))
        parts.push_back(it);
    if (pick(0, 3) == 0) parts.push_back(a);  // the same value twice
    std::vector<ValueId> ids;
    Shape shape = a.shape;
    shape[1] = 0;
    for (const Item& p : parts) {
      ids.push_back(p.id);
      shape[1] += p.shape[1];
    }
    add(builder_.op("Concat", ids, testing::int_attribute("axis", 1), name("concat")), shape);
  }

  void transpose() {
    Item in = any();
    std::vector<int64_t> perm = {0, 1, 2, 3};
    std::shuffle(perm.begin(), perm.end(), rng_);
    AttributeMap attrs;
    attrs.set_ints("perm", perm);
    Shape shape(4);
    for (size_t i = 0; i < 4; ++i) shape[i] = in.shape[size_t(perm[i])];
    add(builder_.op("Transpose", {in.id}, attrs, name("transpose")), shape);
  }

  void reshape() {
    Item in = any();
    const Shape& s = in.shape;
    Shape shape = pick(0, 1) ? Shape{s[0], s[1], s[3], s[2]} : Shape{s[0], s[1] * s[2], s[3], 1};
    add(builder_.op("Reshape", {in.id, builder_.constant(name("shape"), i64_tensor(shape))}, {}, name("reshape")), shape);
  }

  void matmul() {
    Item in = any();
    int64_t k = pick(1, 5);
    ValueId w = weights({in.shape[3], k});
    Shape shape = in.shape;
    shape[3] = k;
    add(builder_.op("MatMul", {in.id, w}, {}, name("matmul")), shape);
  }

  void conv() {
    Item in = any();
    int64_t out_channels = pick(1, 6);
    bool pointwise = pick(0, 1);
    int64_t k = pointwise ? 1 : 3;
    AttributeMap attrs;
    if (!pointwise) attrs.set_ints("pads", {1, 1, 1, 1});
    ValueId w = weights({out_channels, in.shape[1], k, k});
    ValueId bias = weights({out_channels});
    Shape shape = in.shape;
    shape[1] = out_channels;
    add(builder_.op("Conv", {in.id, w, bias}, attrs, name("conv")), shape);
  }

  std::mt19937 rng_;
  GraphBuilder builder_;
  std::vector<Item> pool_;
  int counter_ = 0;
};

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_double(i));
  return v;
}

// What the random graphs exercised, summed over a shard (printed, to show the test is
// not vacuous).
struct Coverage {
  int graphs = 0, nodes = 0, views = 0, concat_in_place = 0, in_place = 0, materializations = 0, copies = 0;
  int fused = 0;       // FusedElementwise nodes
  int fused_conv = 0;  // FusedConv nodes
};

// Runs one seed's graph under each planner configuration; returns a failure description.
std::string check_seed(uint32_t seed, Coverage& coverage) {
  std::map<std::string, Tensor> inputs;
  Graph graph = RandomGraph(seed).build(&inputs);
  auto expected = evaluate_reference(graph, inputs);
  if (!expected.is_ok()) return "reference: " + expected.status().to_string();
  struct Config {
    const char* name;
    PlanOptions options;
  };
  PlanOptions nchw = testing::verified(), nhwc = testing::verified(), off = testing::verified(unoptimized_plan_options());
  nchw.layout = LayoutChoice::kNchw;
  nhwc.layout = LayoutChoice::kNhwc;
  for (const Config& config : {Config{"planner nchw", nchw}, Config{"planner nhwc", nhwc}, Config{"planner off", off}}) {
    SessionOptions options;
    options.poison_memory = true;
    options.fusion = config.options.views;  // "planner off" runs every node as built
    PlanOptions debug = config.options;
    if (std::getenv("STRIDER_DEBUG_PLAN")) debug.verify = false;
    auto session = create_session(graph, options, debug);
    if (std::getenv("STRIDER_DEBUG_PLAN") && session.is_ok()) {
      SessionPlanView v = inspect_session(**session);
      fprintf(stderr, "%s\n%s", config.name, plan_to_text(*v.graph, *v.plan).c_str());
      for (const std::string& k : v.kernel_names) fprintf(stderr, "kernel %s\n", k.c_str());
    }
    if (!session.is_ok()) return std::string(config.name) + ": " + session.status().to_string();
    if (config.options.views) {
      const PlanStats& stats = inspect_session(**session).plan->stats;
      coverage.nodes += stats.steps;
      coverage.views += stats.views;
      coverage.concat_in_place += stats.concat_in_place;
      coverage.in_place += stats.in_place;
      coverage.materializations += stats.materializations;
      coverage.copies += stats.copies;
      const Graph& planned = *inspect_session(**session).graph;
      for (NodeId id = 0; id < planned.num_nodes(); ++id)
        coverage.fused += planned.node(id).domain == "strider" && planned.node(id).op_type == "FusedElementwise";
      for (NodeId id = 0; id < planned.num_nodes(); ++id) coverage.fused_conv += planned.node(id).op_type == "FusedConv";
    }
    auto outputs = (*session)->run({inputs.at("x")});
    if (!outputs.is_ok()) return std::string(config.name) + ": " + outputs.status().to_string();
    for (size_t i = 0; i < outputs->size(); ++i) {
      std::vector<double> reference;
      for (int64_t k = 0; k < expected->outputs[i].num_elements(); ++k)
        reference.push_back(expected->outputs[i].element_as_double(k));
      Comparison c = compare_values(values_of((*outputs)[i]), reference, {1e-4, 1e-5, 0.9999}, false);
      if (!c.passed) return std::string(config.name) + " output " + std::to_string(i) + ": " + c.reason;
    }
  }
  return "";
}

class RandomGraphs : public ::testing::TestWithParam<int> {};

// Four shards of 500 graphs each: 2000 graphs, 6000 sessions.
TEST_P(RandomGraphs, PlannerOnAndOffMatchTheReference) {
  constexpr int kGraphsPerShard = 500;
  uint32_t first = uint32_t(GetParam()) * kGraphsPerShard, count = kGraphsPerShard;
  if (const char* only = std::getenv("STRIDER_RANDOM_SEED")) {
    first = uint32_t(std::atoi(only));
    count = GetParam() == 0 ? 1 : 0;
  }
  int failures = 0;
  Coverage coverage;
  for (uint32_t seed = first; seed < first + count && failures < 5; ++seed, ++coverage.graphs) {
    std::string failure = check_seed(seed, coverage);
    if (!failure.empty()) {
      ++failures;
      ADD_FAILURE() << "seed " << seed << ": " << failure;
    }
  }
  std::printf("%d graphs; planned (nchw + nhwc): %d steps, %d views, %d concat parts in place, %d in place, "
              "%d materializations, %d copies, %d fused elementwise groups, %d fused convolutions\n",
              coverage.graphs, coverage.nodes, coverage.views, coverage.concat_in_place, coverage.in_place,
              coverage.materializations, coverage.copies, coverage.fused, coverage.fused_conv);
  EXPECT_GT(coverage.views, 0);
  EXPECT_GT(coverage.fused, 0);
  EXPECT_GT(coverage.fused_conv, 0);
  EXPECT_GT(coverage.concat_in_place, 0);
}

INSTANTIATE_TEST_SUITE_P(Shard, RandomGraphs, ::testing::Values(0, 1, 2, 3));

}  // namespace
}  // namespace strider
