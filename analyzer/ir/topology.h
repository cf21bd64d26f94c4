// Topology: compact copies of what the step builders and the simulator read
// for every op they run, so that a plan search's thousands of programs load
// a few flat int arrays instead of Op (~240 B) and Tensor (~128 B) records
// and the vectors they point to.
//
// Contract: Graph::Finalize builds it from the graph's ops and tensors; it
// is valid until they change (as every other field Finalize derives).
// Invariants: io_start.size() == ops + 1; op o's inputs are
// io[io_start[o], io_start[o] + num_inputs[o]), its outputs the rest of
// io[.., io_start[o + 1]), each in the op's own order; alias_of, bytes and
// resident, base and producer have one entry per tensor and equal
// Tensor::alias_of, Tensor::bytes, IsResident(Tensor::kind), Tensor::base and
// Tensor::producer; forward, accumulate and workspace_bytes have one entry
// per op and equal Op::phase == Phase::kForward, Op::accumulate and
// Op::workspace_bytes.
#ifndef MEMPLAN_ANALYZER_IR_TOPOLOGY_H_
#define MEMPLAN_ANALYZER_IR_TOPOLOGY_H_

#include <cstdint>
#include <span>
#include <vector>

namespace memplan {

struct Topology {
  std::vector<int> io_start;
  std::vector<int> num_inputs;
  std::vector<int> io;
  std::vector<uint8_t> forward, accumulate;
  std::vector<int64_t> workspace_bytes;
  std::vector<int> alias_of, base, producer;
  std::vector<int64_t> bytes;
  std::vector<uint8_t> resident;

  std::span<const int> Inputs(int o) const {
    return {io.data() + io_start[o], static_cast<size_t>(num_inputs[o])};
  }
  std::span<const int> Outputs(int o) const {
    const int first = io_start[o] + num_inputs[o];
    return {io.data() + first, static_cast<size_t>(io_start[o + 1] - first)};
  }
  bool IsView(int t) const { return alias_of[t] >= 0; }
};

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_IR_TOPOLOGY_H_
