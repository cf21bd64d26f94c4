// The op-type table used to lower forward-only graphs: for each ATen-style op,
// what its backward saves, what it costs relative to the forward, and which
// input gradients are views of the output gradient versus new buffers.
//
// The rules follow PyTorch's derivatives.yaml for eager autograd (what the
// backward of each op keeps alive), not a compiler's partitioned graph.
#ifndef MEMPLAN_ANALYZER_IR_OP_TABLE_H_
#define MEMPLAN_ANALYZER_IR_OP_TABLE_H_

#include <string>
#include <vector>

#include "analyzer/ir/graph.h"

namespace memplan {

enum class GradFlow : uint8_t {
  kNone,  // this input gets no gradient (indices, targets, shapes)
  kView,  // its gradient is a view of the output gradient (no new memory)
  kNew,   // its gradient is a new buffer of the input's size
};

// A tensor the forward op produces only for its backward (statistics, masks,
// indices): added as an extra forward output named "<op id>.<suffix>".
struct SavedExtra {
  std::string suffix;
  Shape shape;
  DType dtype = DType::kFloat32;
};

struct BackwardRule {
  bool known = true;                 // false: the conservative default was used
  std::vector<int> saved_inputs;     // positions in op.inputs
  std::vector<int> saved_outputs;    // positions in op.outputs
  std::vector<SavedExtra> extras;    // new forward outputs saved for the backward
  std::vector<GradFlow> input_grad;  // one per input
  double cost_factor = 2.0;          // backward cost / forward cost
};

// requires_grad[t] says whether tensor t needs a gradient; the rule may depend
// on it (mul saves the other operand only if this one needs a gradient).
BackwardRule RuleFor(const Graph& g, const Op& op, const std::vector<bool>& requires_grad);

// Forward cost estimate in FLOPs from the op type and shapes (given flops win).
double EstimateFlops(const Graph& g, const Op& op);

// The op types the table knows, canonical names, sorted.
std::vector<std::string> KnownOpTypes();

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_IR_OP_TABLE_H_
