// Graph IR: tensors and ops of a memplan.graph/1 document, by index.
//
// Invariants after Finalize() succeeds:
//  - every op input is resident or produced by an earlier op (file order is a
//    valid execution order); every tensor has at most one producer;
//  - alias_of chains end at a non-view tensor (base), with no cycle;
//  - bytes = numel * dtype size, computed without overflow, and all tensors'
//    and workspaces' bytes add up to at most kMaxGraphBytes (2^61), so any
//    live-bytes sum, fresh copies of recomputed outputs included, is exact.
#ifndef MEMPLAN_ANALYZER_IR_GRAPH_H_
#define MEMPLAN_ANALYZER_IR_GRAPH_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analyzer/base/compact_string.h"
#include "analyzer/base/interned_string.h"
#include "analyzer/base/name_index.h"
#include "analyzer/base/small_vector.h"
#include "analyzer/ir/shape.h"
#include "analyzer/ir/topology.h"

namespace memplan {

enum class DType : uint8_t {
  kFloat64,
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat8E4M3Fn,
  kFloat8E5M2,
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool,
  kComplex64,
};
bool ParseDType(std::string_view name, DType* out);
const char* DTypeName(DType d);
int DTypeSize(DType d);
bool IsFloating(DType d);
// "float64, float32, ..." for error messages.
std::string DTypeList();

enum class TensorKind : uint8_t {
  kInput,
  kParameter,
  kBuffer,
  kActivation,
  kGradient,
  kOptimizerState,
  kTemporary,
};
constexpr int kNumTensorKinds = 7;
bool ParseTensorKind(std::string_view name, TensorKind* out);
const char* TensorKindName(TensorKind k);
// Resident tensors are alive from the start to the end of every program.
// Inline: the simulator and the program builders ask it for every tensor.
constexpr bool IsResident(TensorKind k) {
  return k == TensorKind::kInput || k == TensorKind::kParameter || k == TensorKind::kBuffer ||
         k == TensorKind::kOptimizerState;
}

enum class Phase : uint8_t { kForward, kBackward, kOptimizer };
bool ParsePhase(std::string_view name, Phase* out);
const char* PhaseName(Phase p);

// Fields are ordered for size (88 bytes): a graph holds millions.
struct Tensor {
  std::string id;
  Shape shape;
  DType dtype = DType::kFloat32;
  TensorKind kind = TensorKind::kActivation;
  int alias_of = -1;    // the tensor this one is a view of, or -1
  int grad_of = -1;     // the tensor this one is the gradient of, or -1
  CompactString extra;  // unknown keys as a serialized JSON object ("" if none)

  // Derived by Graph::Finalize.
  int64_t numel = 0;
  int64_t bytes = 0;  // numel * dtype size (a view owns none: see Graph::OwnedBytes)
  int base = -1;      // the non-view tensor whose buffer this one uses (self if not a view)
  int producer = -1;  // index of the producing op, or -1
};

// An op's tensors by index: most ops read and write at most four, held in
// the Op itself (the same 24 bytes as a std::vector, and no heap block).
using TensorIds = SmallVector<int, 4>;

// type and scope are interned: a graph has few distinct values of each, and
// the lowering copies both into every backward op. Fields are ordered for
// size (160 bytes).
struct Op {
  std::string id;
  InternedString type;
  TensorIds inputs;
  TensorIds outputs;
  TensorIds saves;
  double flops = -1;    // < 0: not given
  double time_us = -1;  // < 0: not given
  int64_t workspace_bytes = 0;
  InternedString scope;
  CompactString extra;  // unknown keys as a serialized JSON object ("" if none)
  Phase phase = Phase::kForward;
  bool saves_given = false;
  bool accumulate = false;
};

// A source.warnings entry: an op's number that the symbolic export
// (python/memplan/symbolic.py) could not write as an expression in the
// symbols. It holds at the sizes the graph was exported at; elsewhere a
// frozen value may be too small.
struct ExportWarning {
  enum class Kind : uint8_t {
    kFrozen,   // "frozen": `field` holds `value`, the largest seen, at every size
    kDropped,  // "dropped": `field` was left out; memplan estimates it
  };
  Kind kind = Kind::kFrozen;
  std::string op;                    // the op's id
  std::string field;                 // e.g. "workspace_bytes", "flops"
  double value = -1;                 // kFrozen: the value written; else -1
  std::vector<std::string> symbols;  // what the number varied with at export
  // The symbols' values the graph was exported at, by name.
  std::vector<std::pair<std::string, int64_t>> exported_at;
};

struct Graph {
  std::string name;
  std::string source;  // the "source" object, serialized ("" if absent)
  // source.target_device: "cpu" or "cuda", the device the step was exported
  // for (a GPU step runs out of what PyTorch's caching allocator reserves);
  // "" when the graph does not say.
  std::string target_device;
  // source.outputs_held: whether the training loop keeps the model's output
  // alive through the backward (true: the graph's outputs list it) or frees
  // it once the loss is computed (false); nullopt when the graph does not say.
  std::optional<bool> outputs_held;
  // source.compile: the torch.compile backend the step runs under
  // ("aot_eager" or "inductor"); "" for an eager step.
  std::string compile;
  // source.warnings, in the file's order (see ExportWarningsInEffect).
  std::vector<ExportWarning> export_warnings;
  std::vector<std::pair<std::string, int64_t>> symbols;  // in declaration order
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
  std::vector<int> outputs;

  // Derived by Finalize.
  NameIndex tensor_index;
  NameIndex op_index;
  bool joint = false;  // some op has phase backward
  // Resident tensors, graph outputs and parameter gradients: never freed.
  std::vector<bool> kept_to_end;
  // The ops' inputs and outputs and the tensors' views, bytes and residence,
  // flat (topology.h).
  Topology topology;

  // Computes the derived fields above. Checks only what a builder of the IR
  // could get wrong beyond the importer's checks (overflow, order, aliases).
  // The indexes are rebuilt unless they hold one entry per tensor and op
  // already (a builder that renames or reorders must clear them).
  bool Finalize(std::string* err);
  // Rebuilds `topology` alone (Finalize calls it).
  void BuildTopology();

  int FindTensor(std::string_view id) const;
  int FindOp(std::string_view id) const;
  // Index tensor t / op o by its id: -1 when added, else the position that
  // already has that id.
  int IndexTensor(int t);
  int IndexOp(int o);
  bool IsView(int t) const { return tensors[t].alias_of >= 0; }
  int64_t OwnedBytes(int t) const { return IsView(t) ? 0 : tensors[t].bytes; }
  bool IsResidentTensor(int t) const { return IsResident(tensors[t].kind); }
  // A gradient of a parameter: kept alive to the end (the optimizer reads it).
  bool IsParameterGradient(int t) const;
  // By parameter index: the gradient the optimizer updates it with (the
  // last parameter gradient made), or -1. Needs Finalize's producers.
  std::vector<int> FinalParameterGradients() const;
  int64_t ResidentBytes() const;
};

// One message per source.warnings entry that the graph's symbols (after
// --set) move away from its exported_at values in one of the entry's
// symbols, naming the op, the field, what was frozen or dropped and the
// symbols that moved; at most `limit` of them, then one line counting the
// rest. Empty when every entry still holds.
std::vector<std::string> ExportWarningsInEffect(const Graph& g, size_t limit = 5);

// The most bytes all tensors and workspaces of one graph may add up to.
constexpr int64_t kMaxGraphBytes = int64_t{1} << 61;

// "aten.convolution.default" / "aten::convolution" -> "convolution".
std::string CanonicalOpType(std::string_view type);

// Checked int64 arithmetic: false on overflow.
bool CheckedMul(int64_t a, int64_t b, int64_t* out);
bool CheckedAdd(int64_t a, int64_t b, int64_t* out);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_IR_GRAPH_H_
