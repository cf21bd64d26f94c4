// The planner's cost model: what running an op once costs, in microseconds
// (objective time) or FLOPs (objective flops).
//
// Recipe, objective time:
//  0. the op's time from a measured costs file (CostModel::measured_us) when
//     it has one;
//  1. the op's measured time_us when given;
//  2. else 0 for a view-only op (every output is a view of an input);
//  3. else a roofline estimate max(flops / peak_flops, bytes_moved / bandwidth)
//     on the device preset, where flops is op.flops when given, else
//     EstimateFlops (analyzer/ir/op_table.h), and bytes_moved is BytesMoved.
// Recipe, objective flops: op.flops when given, else EstimateFlops; 0 for a
// view-only op; when that is 0 for an op that moves bytes (a copy, a cat, an
// op the table has no estimate for), bytes_moved / 4 as a size-based floor, so
// recomputing it is cheap but never free.
//
// Memory-bound ops (arithmetic intensity below the device's ridge point) cost
// their bandwidth term, typically far less than a matmul of the same size:
// the planner should recompute those first (IsMemoryBound).
//
// Limits: the roofline ignores launch overhead, achieved-versus-peak
// efficiency, caches, kernel fusion and workspace traffic, and uses one peak
// for every dtype. Absolute times are optimistic; relative costs, which are
// what the planner compares, are the point.
#ifndef MEMPLAN_ANALYZER_PLAN_COST_MODEL_H_
#define MEMPLAN_ANALYZER_PLAN_COST_MODEL_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzer/ir/graph.h"

namespace memplan {

enum class Objective { kTime, kFlops };

struct DevicePreset {
  const char* name;
  double peak_flops;  // FLOP/s: dense (no sparsity) BF16 tensor-core peak
  double bandwidth;   // bytes/s: main memory (HBM or DRAM)
  // Host time, in microseconds, that selective activation checkpointing
  // adds per forward op of a module it wraps with a policy, per pass (the
  // forward and the recomputation each run every op of the module through
  // a Python dispatch mode, saved ops included). 0 where the host's time
  // hides behind the device's kernels (not measured: GPUs).
  double sac_dispatch_us;
};

// Public datasheet numbers. The BF16 tensor-core peak is used whatever the
// graph's dtype, as for mixed-precision training; an fp32 graph without TF32
// runs far slower (H100 SXM: 67 TFLOP/s fp32), which scales every compute
// term alike.
inline constexpr DevicePreset kDevicePresets[] = {
    // NVIDIA H100 SXM5 datasheet: BF16 tensor 1,979 TFLOP/s with sparsity,
    // i.e. 989 dense; HBM3 3.35 TB/s.
    {"h100", 989e12, 3.35e12, 0},
    // NVIDIA H200 SXM datasheet: the H100's compute (BF16 1,979 TFLOP/s
    // sparse, 989 dense); HBM3e 4.8 TB/s.
    {"h200", 989e12, 4.8e12, 0},
    // NVIDIA A100 SXM 80GB datasheet: BF16 tensor 312 TFLOP/s dense (624
    // sparse); HBM2e 2,039 GB/s.
    {"a100", 312e12, 2.039e12, 0},
    // A rough desktop CPU (many-core AVX-512 or AVX2, dual-channel DDR5): an
    // order-of-magnitude figure, not a datasheet. SAC's dispatch: measured
    // with torch 2.14 on one core of a 2-core AMD EPYC VM, models:gpt_small
    // with every op of its 4 blocks saved, against eager
    // (bench/sac_dispatch.py; results/sac_dispatch.json).
    {"cpu", 1e12, 100e9, 105},
};

// Case-insensitive lookup of a preset by name (h100 h200 a100 cpu).
bool FindDevicePreset(std::string_view name, DevicePreset* out);
// "h100, h200, a100, cpu" for usage and error messages.
std::string DevicePresetNames();

struct CostModel {
  Objective objective = Objective::kTime;
  DevicePreset device = kDevicePresets[0];  // h100
  // Measured time of one run of each op, by op index (ApplyMeasuredCosts);
  // an entry >= 0 wins over time_us and flops under objective time. Empty or
  // < 0: not measured.
  std::vector<double> measured_us;
  // SAC's host time per op and pass (DevicePreset::sac_dispatch_us); < 0:
  // the device preset's.
  double sac_dispatch_us = -1;
};

// SAC's dispatch cost per forward op of a wrapped module and per pass, in
// CostUnit(model): sac_dispatch_us under objective time, 0 under flops.
double SacDispatchCost(const CostModel& model);

// "time_us" or "flops": the unit of OpCost under `model`.
const char* CostUnit(const CostModel& model);

// Whether every output of op is a view of one of its inputs (reshape,
// transpose, the gradient of a view): such an op allocates and moves nothing.
// An op without outputs is not view-only.
bool IsViewOnly(const Graph& g, const Op& op);

// Bytes the op reads and writes once: its distinct inputs and outputs grouped
// by buffer (a view and its base share one), each buffer counted at most at
// its own size. A view-only op moves 0.
double BytesMoved(const Graph& g, const Op& op);

// Cost of running op once, in CostUnit(model); finite and >= 0.
double OpCost(const Graph& g, const Op& op, const CostModel& model);
// OpCost of every op, by op index.
std::vector<double> OpCosts(const Graph& g, const CostModel& model);

// Whether op is memory-bound on device: its bandwidth term is at least its
// compute term (arithmetic intensity flops / bytes at or below the ridge point
// peak_flops / bandwidth) and it moves bytes. A view-only op counts as
// memory-bound too: recomputing it is free.
bool IsMemoryBound(const Graph& g, const Op& op, const DevicePreset& device);

// Measured op times, as `memplan profile --emit-costs` writes them:
//   {"format": "memplan.costs/1", "unit": "us",
//    "graph": "...", "backend": "...", "device": "...",   (optional, informative)
//    "ops": {"OP_ID": TIME_OF_ONE_RUN_US, ...}}
// Op ids are those of the joint graph ("fc1", "fc1.bw"). Times are finite
// numbers >= 0. Unknown top-level keys are ignored.
struct MeasuredCosts {
  std::string graph, backend, device;
  std::vector<std::pair<std::string, double>> ops;  // sorted by op id
};

// Errors: "FILE: POINTER: what was found; expected what".
bool ParseCostsJson(const std::string& text, const std::string& file, MeasuredCosts* out,
                    std::string* err);
bool LoadCostsFile(const std::string& path, MeasuredCosts* out, std::string* err);

// Sets model->measured_us for the ops of g named in `costs` (`file` names
// it in messages). Ops of `costs` missing from g, and ops of g without a
// time, are warnings; an error when no op of g has a time.
bool ApplyMeasuredCosts(const Graph& g, const MeasuredCosts& costs, const std::string& file,
                        CostModel* model, std::vector<std::string>* warnings, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_PLAN_COST_MODEL_H_
