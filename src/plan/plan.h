// Plan: what the executor runs, made once per set of input shapes. Data only: no device.
//
// Every value used at run time has a TensorView on one of the plan's four placeholder
// allocations (an arena for intermediates, and one each for constants, inputs and outputs). Values are
// grouped into buffers: a buffer is one root value's bytes plus every value that aliases
// them (its views, the producers that write straight into a slice of a concat, an
// elementwise output written over its dying input). Each step is one node of the planned
// graph with the views of its operands; a step whose outputs are all views of its inputs
// runs no kernel.
//
// How the planner decides where values live is in planner.h; verify_plan (verify.h) checks
// the result; dump.h prints it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/device.h"
#include "ir/graph.h"

namespace strider {

// Where a buffer lives.
enum class StorageKind : uint8_t { kArena, kConstant, kInput, kOutput };
std::string_view storage_kind_name(StorageKind kind);

// How a value got its bytes.
enum class ValueRole : uint8_t {
  kOwn,         // a root: the first value of its buffer
  kView,        // a view of its input (Split, Slice, Reshape, Transpose, Expand, ...)
  kConcatPart,  // written by its producer straight into its slice of a Concat output
  kInPlace,     // written over a dying input of the same sizes and strides
  kPlacedThrough,  // written by its producer straight into the bytes of a Reshape two views
                   // on (Transpose -> Reshape: attention merging its heads), which then copies nothing
};
std::string_view value_role_name(ValueRole role);

struct PlannedValue {
  TensorView view;
  ValueRole role = ValueRole::kOwn;
  ValueId alias_of = kNoValue;  // the value whose bytes it uses (kView, kConcatPart, kInPlace, kPlacedThrough)
  int buffer = -1;
};

struct PlanBuffer {
  StorageKind kind = StorageKind::kArena;
  ValueId root = kNoValue;
  int64_t size = 0;      // bytes
  int64_t offset = 0;    // in its allocation
  int first_step = 0;    // first step that writes it (inputs and constants: -1)
  int last_step = 0;     // last step that reads it (outputs: the number of steps)
};

enum class StepKind : uint8_t {
  kKernel,       // runs the node's kernel
  kView,         // every output is a view of an input, or already in place: nothing runs
  kMaterialize,  // a copy the planner could not avoid (a view a kernel cannot read)
};
std::string_view step_kind_name(StepKind kind);

struct PlanStep {
  NodeId node = kNoNode;
  StepKind kind = StepKind::kKernel;
  std::vector<TensorView> inputs;   // allocation == nullptr for an omitted input
  std::vector<TensorView> outputs;  // allocation == nullptr for an omitted output
};

struct PlanStats {
  int64_t arena_bytes = 0;
  int64_t lower_bound_bytes = 0;  // the largest total of arena bytes live at one step
  int steps = 0;
  int kernels = 0;          // steps that run a kernel
  int views = 0;            // values that are views of another value
  int concat_in_place = 0;  // Concat parts written in place by their producers
  int in_place = 0;         // elementwise outputs written over their input
  int materializations = 0;
  int copies = 0;           // copy kernels still run by data-movement ops
};

struct Plan {
  std::string layout;  // "nchw" or "nhwc"
  // One per StorageKind, in its order: sizes only, no address (binding gives them memory).
  std::vector<std::unique_ptr<Allocation>> placeholders;
  std::vector<std::optional<PlannedValue>> values;  // per ValueId; empty when unused
  std::vector<PlanBuffer> buffers;
  std::vector<PlanStep> steps;
  PlanStats stats;

  const TensorView& view(ValueId id) const { return values.at(size_t(id))->view; }
};

}  // namespace strider
