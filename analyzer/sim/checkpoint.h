// Checkpoint programs (SPEC section 2): keep a chosen set of forward tensors
// for the backward; every other forward tensor the backward needs is freed
// after its last forward use and recomputed, with whatever it needs, just
// before its first backward use, then freed after its last use.
//
// Recipe: run the ops in schedule order (forward ops where they stand: a
// pipeline stage interleaves micro-batches; a backward op reads only forward
// tensors made before it), and before each backward op make its inputs alive: a dead forward tensor
// is recomputed by rerunning its producer once its own inputs are alive (an explicit stack, no
// recursion). What is alive when the backward starts is what is resident, kept to the end, or in
// the checkpoint set; a recomputed tensor stays alive until its last use, so each op is recomputed
// at most once. BuildProgram then places the frees and the in-place accumulations. O(ops x arity +
// tensors) per program (x the reruns with each_use below).
//
// Beyond checkpoint sets: a dropped tensor may be recomputed at each use
// (each_use): freed right after every op that reads it (or a view of it),
// backward op or recomputation, and recomputed again before the next one,
// instead of held from its recomputation to its last use. That trades
// recompute time for memory when a tensor's uses lie far apart in the
// backward. The order of recomputation: an op's dead inputs in input order,
// or last first where reverse_order (by op) says so, each chain
// depth-first (recomputing the input whose chain needs the most memory
// first can lower the peak, as in Sethi-Ullman's register allocation).
// A program reruns at most
// kMaxRerunFactor x ops forward ops: past that, each_use tensors are held
// (nested each_use chains can double their reruns per level).
#ifndef MEMPLAN_ANALYZER_SIM_CHECKPOINT_H_
#define MEMPLAN_ANALYZER_SIM_CHECKPOINT_H_

#include <vector>

#include "analyzer/ir/graph.h"
#include "analyzer/sim/program.h"

namespace memplan {

// Forward tensors a checkpoint set may choose among: produced by a forward op,
// not views (a view is recomputed for free from its base), not kept to the
// end anyway, and needed by the backward directly or through recomputation.
std::vector<int> CheckpointCandidates(const Graph& g);

constexpr int64_t kMaxRerunFactor = 8;

// By tensor: true where recomputing at each use can differ from holding: a
// candidate read by more than one op, or by a forward op (which may itself
// be rerun more than once).
std::vector<bool> EachUseMatters(const Graph& g);

struct CheckpointProgram {
  Program program;
  std::vector<int> recomputed_ops;      // forward ops rerun, in program order, once per rerun
  std::vector<int> recomputed_tensors;  // their outputs, sorted, distinct
};

// How BuildCheckpointProgram turns a checkpoint set into a program. Every
// member has a default, so {} is the plain on-demand program under inplace
// accumulation; name what differs: {.mode = m, .each_use = &each_use}. The
// vectors are borrowed, not copied; null or empty: none.
struct CheckpointProgramOptions {
  AccumulationMode mode = AccumulationMode::kInplace;
  // Recompute groups (by tensor index; -1 or past the end: none; a view goes
  // with its base's group): the first time the backward needs a dead tensor
  // of group G, every tensor of G that a backward op reads (directly or
  // through a view) is recomputed then, in forward order, and each stays
  // alive until its last use. This is torch.utils.checkpoint on a module:
  // the backward's first unpack of any of the module's saved tensors reruns
  // the whole module and holds all its saved tensors until their nodes have
  // run, where the on-demand program would remake each one just before its
  // first use. A backward op whose outputs are in group G (its module's own
  // backward) triggers G when it reads any tensor of G, dead or alive, as the
  // first unpack of a module's saved tensor does; other backward ops only
  // when they need a dead one. Without groups both programs are the same.
  const std::vector<int>* recompute_group = nullptr;
  // By tensor index: dropped tensors recomputed at each use (see the top of
  // this file).
  const std::vector<bool>* each_use = nullptr;
  // By op index: ops that recompute their dead inputs last first.
  const std::vector<bool>* reverse_order = nullptr;
};

// keep[t]: tensor t is kept from the forward to its last backward use. Views
// of kept, resident and kept-to-end tensors are kept with their base.
CheckpointProgram BuildCheckpointProgram(const Graph& g, const std::vector<bool>& keep,
                                         const CheckpointProgramOptions& options = {});

// BuildCheckpointProgram with the program left empty and its layout in
// *layout instead (program.h: MaterializeProgram(*layout) is the program),
// whose storage is reused.
CheckpointProgram LayOutCheckpointProgram(const Graph& g, const std::vector<bool>& keep,
                                          const CheckpointProgramOptions& options,
                                          ProgramLayout* layout);

// By op: true where reverse_order can differ from input order: an op that
// reads two or more candidates (or views of them).
std::vector<bool> OrderMatters(const Graph& g);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_SIM_CHECKPOINT_H_
