#include "passes/fuse_elementwise.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_set>

#include "ops/elementwise_params.h"
#include "ops/fused_elementwise.h"
#include "ops/op_registry.h"

namespace strider {
namespace {

// One node seen as a fused instruction: its op, attributes and data operands.
struct Candidate {
  bool fusable = false;
  FusedOp op = FusedOp::kAdd;
  float alpha = 0, beta = 0;
  std::vector<ValueId> operands;
};

bool fusable_dtype(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16; }

// Clip's bound i (1 low, 2 high): a constant scalar input, an attribute before opset 11,
// else the widest float. False when the bound is computed at run time.
bool clip_bound(const Graph& g, const Node& n, size_t i, float* bound) {
  const float fallback = i == 1 ? std::numeric_limits<float>::lowest() : std::numeric_limits<float>::max();
  if (n.opset < 11) {
    auto attr = n.attributes.get_float(i == 1 ? "min" : "max", fallback);
    *bound = attr.is_ok() ? *attr : fallback;
    return attr.is_ok();
  }
  ValueId v = n.input(i);
  if (v == kNoValue) {
    *bound = fallback;
    return true;
  }
  const Value& value = g.value(v);
  if (!value.is_constant() || value.constant->num_elements() != 1) return false;
  *bound = float(value.constant->element_as_double(0));
  return true;
}

Candidate as_candidate(const Graph& g, const Node& n) {
  Candidate c;
  if (!n.in_default_domain() || n.outputs.size() != 1 || n.outputs[0] == kNoValue) return c;
  if (!fused_op_from_onnx(n.op_type, &c.op)) return c;
  const DType dtype = g.value(n.outputs[0]).dtype;
  if (!fusable_dtype(dtype)) return c;
  const size_t arity = size_t(fused_op_arity(c.op));
  if (c.op == FusedOp::kClip) {
    if (!clip_bound(g, n, 1, &c.alpha) || !clip_bound(g, n, 2, &c.beta)) return c;
  } else {
    if (n.inputs.size() != arity) return c;  // Min and Max are variadic: only their two-operand form is fused
    Result<ElementwiseParams> params = resolve_elementwise_params(c.op, n.attributes);
    if (!params.is_ok()) return c;  // the node's kernel reports the bad attribute
    c.alpha = params->alpha;
    c.beta = params->beta;
  }
  for (size_t i = 0; i < arity; ++i) {
    ValueId v = n.input(i);
    if (v == kNoValue || g.value(v).dtype != dtype) return c;
    c.operands.push_back(v);
  }
  c.fusable = true;
  return c;
}

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g), consumers_(g.consumers()) {
    for (NodeId id = 0; id < g.num_nodes(); ++id) candidates_.push_back(as_candidate(g, g.node(id)));
    for (ValueId v : g.outputs()) graph_output_.insert(v);
    grouped_.assign(size_t(g.num_nodes()), false);
  }

  Result<FusionStats> run() {
    FusionStats stats;
    std::unordered_set<const Node*> absorbed;
    for (NodeId sink = g_.num_nodes(); sink-- > 0;) {
      if (!candidates_[size_t(sink)].fusable || grouped_[size_t(sink)]) continue;
      std::vector<NodeId> members = grow(sink);
      if (members.size() < 2) continue;
      for (NodeId m : members) {
        grouped_[size_t(m)] = true;
        if (m != sink) absorbed.insert(&g_.node(m));
      }
      STRIDER_RETURN_IF_ERROR(replace_with_fused(members, sink));
      ++stats.groups;
      stats.nodes += int(members.size());
    }
    g_.remove_nodes_if([&](const Node& n) { return absorbed.count(&n) != 0; });
    return stats;
  }

 private:
  // The group's operands from outside it, in order of first use.
  std::vector<ValueId> external_operands(const std::vector<NodeId>& members) const {
    std::vector<ValueId> inside, outside;
    for (NodeId m : members) inside.push_back(g_.node(m).outputs[0]);
    for (NodeId m : members)
      for (ValueId v : candidates_[size_t(m)].operands)
        if (std::find(inside.begin(), inside.end(), v) == inside.end() &&
            std::find(outside.begin(), outside.end(), v) == outside.end())
          outside.push_back(v);
    return outside;
  }

  bool can_absorb(NodeId producer, ValueId value, const std::vector<NodeId>& members, NodeId sink) const {
    if (producer == kNoNode || !candidates_[size_t(producer)].fusable || grouped_[size_t(producer)]) return false;
    if (std::find(members.begin(), members.end(), producer) != members.end()) return false;
    if (graph_output_.count(value)) return false;
    const Value& sink_out = g_.value(g_.node(sink).outputs[0]);
    if (g_.value(value).shape != sink_out.shape || g_.value(value).dtype != sink_out.dtype) return false;
    for (NodeId reader : consumers_[size_t(value)])
      if (std::find(members.begin(), members.end(), reader) == members.end()) return false;
    return true;
  }

  // Members sorted by node id (a topological order); the sink is the last.
  std::vector<NodeId> grow(NodeId sink) const {
    std::vector<NodeId> members{sink};
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t k = 0; k < members.size() && !grew; ++k) {
        for (ValueId v : candidates_[size_t(members[k])].operands) {
          NodeId producer = g_.value(v).producer;
          if (!can_absorb(producer, v, members, sink)) continue;
          std::vector<NodeId> larger = members;
          larger.push_back(producer);
          if (int(larger.size()) > kMaxFusedInstructions || int(external_operands(larger).size()) > kMaxFusedInputs)
            continue;
          members = std::move(larger);
          grew = true;
          break;
        }
      }
    }
    std::sort(members.begin(), members.end());
    return members;
  }

  Status replace_with_fused(const std::vector<NodeId>& members, NodeId sink) {
    FusedProgram program;
    std::vector<ValueId> inputs = external_operands(members);
    program.inputs = int(inputs.size());
    std::map<ValueId, int> reg;
    for (size_t i = 0; i < inputs.size(); ++i) reg[inputs[i]] = int(i);
    std::string names;
    for (NodeId m : members) {
      const Candidate& c = candidates_[size_t(m)];
      FusedInstruction instruction{c.op, reg.at(c.operands[0]), c.operands.size() > 1 ? reg.at(c.operands[1]) : -1,
                                   c.alpha, c.beta};
      reg[g_.node(m).outputs[0]] = program.inputs + int(program.code.size());
      program.code.push_back(instruction);
      names += (names.empty() ? "" : ",") + g_.node(m).name;
    }
    Node fused;
    fused.name = g_.node(sink).name + ".fused";
    fused.op_type = std::string(kFusedElementwiseOp);
    fused.domain = std::string(kStriderDomain);
    fused.inputs = std::move(inputs);
    fused.outputs = g_.node(sink).outputs;
    fused.expanded_from = g_.node(sink).expanded_from;  // inspect still says where a body's nodes came from
    write_fused_program(program, &fused);
    fused.attributes.set_string("nodes", names);
    STRIDER_RETURN_IF_ERROR(read_fused_program(fused).status());  // the program we wrote is valid
    g_.node(sink) = std::move(fused);
    return Status::ok();
  }

  Graph& g_;
  std::vector<std::vector<NodeId>> consumers_;
  std::vector<Candidate> candidates_;
  std::unordered_set<ValueId> graph_output_;
  std::vector<bool> grouped_;
};

}  // namespace

Result<FusionStats> fuse_elementwise(Graph& graph) { return Fuser(graph).run(); }

namespace {

// The program `reader` runs and the values its registers 0 .. inputs-1 read: a
// FusedElementwise's, or a single fusable op's as a one-instruction program.
struct ReaderProgram {
  FusedProgram program;
  std::vector<ValueId> operands;
};
std::optional<ReaderProgram> reader_program(const Graph& g, const Node& reader) {
  if (reader.domain == kStriderDomain && reader.op_type == kFusedElementwiseOp) {
    auto program = read_fused_program(reader);
    if (!program.is_ok()) return std::nullopt;
    return ReaderProgram{*program, reader.inputs};
  }
  Candidate c = as_candidate(g, reader);
  if (!c.fusable) return std::nullopt;
  FusedProgram program{int(c.operands.size()), {{c.op, 0, c.operands.size() > 1 ? 1 : -1, c.alpha, c.beta}}};
  return ReaderProgram{std::move(program), c.operands};
}

// `r` over `value` and the other operands, renumbered for FusedMatMul: register 0 is
// `value`, then the other operands in order (returned), then the instructions' results.
FusedProgram as_epilogue(const ReaderProgram& r, ValueId value, std::vector<ValueId>* others) {
  std::vector<int> reg(r.operands.size());
  for (size_t k = 0; k < r.operands.size(); ++k) {
    if (r.operands[k] == value) {
      reg[k] = 0;
    } else {
      others->push_back(r.operands[k]);
      reg[k] = int(others->size());
    }
  }
  FusedProgram program{1 + int(others->size()), r.program.code};
  auto renumber = [&](int x) { return x < 0 ? x : x < r.program.inputs ? reg[size_t(x)] : x - r.program.inputs + program.inputs; };
  for (FusedInstruction& i : program.code) {
    i.a = renumber(i.a);
    i.b = renumber(i.b);
  }
  return program;
}

bool feeds_concat(const Graph& graph, const std::vector<std::vector<NodeId>>& consumers, ValueId value) {
  for (NodeId reader : consumers[size_t(value)])
    if (graph.node(reader).op_type == "Concat") return true;
  return false;
}

// Folds each `op` node (domain ONNX, `fixed` inputs at most, one output) into the program
// that alone reads its output, when that program's output has its output's shape and dtype:
// the node becomes `fused_op` with its inputs padded to `fixed` (absent optional inputs),
// then the program's other operands; register 0 is the node's own result.
Result<int> fuse_into_producers(Graph& graph, std::string_view op, std::string_view fused_op, size_t fixed,
                                bool into_concat = true) {
  const std::vector<std::vector<NodeId>> consumers = graph.consumers();
  std::unordered_set<ValueId> outputs(graph.outputs().begin(), graph.outputs().end());
  std::unordered_set<const Node*> absorbed;
  int fused = 0;
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    Node& producer = graph.node(id);
    if (!producer.in_default_domain() || producer.op_type != op ||
        producer.inputs.size() > fixed || producer.outputs.size() != 1)
      continue;
    const ValueId y = producer.outputs[0];
    if (outputs.count(y) || consumers[size_t(y)].size() != 1 || !fusable_dtype(graph.value(y).dtype)) continue;
    const Node& reader = graph.node(consumers[size_t(y)][0]);
    if (reader.outputs.size() != 1 || absorbed.count(&reader)) continue;
    const Value& out = graph.value(reader.outputs[0]);
    if (out.shape != graph.value(y).shape || out.dtype != graph.value(y).dtype) continue;
    std::optional<ReaderProgram> r = reader_program(graph, reader);
    if (!r) continue;
    std::vector<ValueId> others;
    FusedProgram program = as_epilogue(*r, y, &others);
    if (program.inputs > kMaxFusedInputs) continue;
    // A conv with a residual operand that writes a concat's slice is left alone: the
    // planner places the program's output in the concat, and a 3x3 conv cannot write such
    // a slice fast where the elementwise pass can (C2f's bottlenecks: fused, each needed a
    // dense output and a copy into the concat).
    if (op == "Conv" && (!others.empty() || !into_concat) && feeds_concat(graph, consumers, reader.outputs[0])) continue;
    Node node = producer;
    node.op_type = std::string(fused_op);
    node.domain = std::string(kStriderDomain);
    if (!others.empty()) node.inputs.resize(fixed, kNoValue);
    node.inputs.insert(node.inputs.end(), others.begin(), others.end());
    node.outputs = reader.outputs;
    write_fused_program(program, &node);
    node.attributes.set_string("nodes", producer.name + "," + reader.name);
    STRIDER_RETURN_IF_ERROR(read_fused_program_of(node, program.inputs).status());
    // The fused node takes the reader's place: the program's other operands (the up
    // projection of a SwiGLU, a residual) may be computed after the producer.
    graph.node(consumers[size_t(y)][0]) = std::move(node);
    absorbed.insert(&producer);
    ++fused;
  }
  graph.remove_nodes_if([&](const Node& n) { return absorbed.count(&n) != 0; });
  return fused;
}

}  // namespace

Result<int> fuse_conv_activations(Graph& graph, bool into_concat) {
  return fuse_into_producers(graph, "Conv", kFusedConvOp, 3, into_concat);
}

Result<int> fuse_matmul_epilogues(Graph& graph) { return fuse_into_producers(graph, "MatMul", kFusedMatMulOp, 2); }

}  // namespace strider
