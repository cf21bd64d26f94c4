// Flags, errors and exits shared by the subcommands (SPEC section 5).
#ifndef MEMPLAN_CLI_COMMON_H_
#define MEMPLAN_CLI_COMMON_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "analyzer/alloc/alloc_conf.h"
#include "analyzer/alloc/device_memory.h"
#include "analyzer/drivers/analysis.h"
#include "analyzer/import/graph_json.h"
#include "analyzer/lower/optimizer_state.h"
#include "analyzer/lower/parallel/rank_step.h"
#include "analyzer/plan/plan_document.h"
#include "analyzer/sim/program.h"

namespace memplan {

// Exit codes (SPEC section 5).
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitNoPlanFits = 3;
inline constexpr int kExitBackendUnavailable = 4;

// Prints "memplan: error: <message>" and returns kExitBadInput.
int Error(const std::string& message);

// Ends the process without freeing the graph: tearing down millions of
// small objects takes longer than the OS takes to reclaim the pages.
[[noreturn]] void ExitNow(int code);

bool WriteFile(const std::string& path, const std::string& contents, std::string* err);

// --set NAME=VALUE overrides of shape symbols.
bool ParseSets(const std::vector<std::string>& sets, GraphLoadOptions* options, std::string* err);

void PrintWarnings(const std::vector<std::string>& warnings);

struct CommonFlags {
  std::string graph;
  std::vector<std::string> sets;
};
void AddCommon(CLI::App* cmd, CommonFlags* flags);

// The training step beyond the graph: --optimizer / --master-weights add
// optimizer state and update ops (analyzer/lower/optimizer_state.h); --parallel
// and its options make the step one rank's (analyzer/lower/parallel/rank_step.h).
struct StepFlags {
  std::string optimizer = "none";
  std::string master_weights;  // "" or "fp32"
  std::string parallel = "none";
  int64_t world_size = 1;
  int64_t rank = -1;
  bool ddp_bucket_view = false;
  double bucket_cap_mb = 25;
  std::string fsdp_reshard_after_forward = "true";
  int fsdp_depth = 0;  // 0: auto
  std::vector<std::string> fsdp_modules;
  std::string fsdp_param_dtype, fsdp_reduce_dtype;  // "" unset
  int64_t pp_stages = 0;                            // 0: not given
  int64_t micro_batches = 0;
  std::string pp_schedule;
  std::vector<std::string> pp_split;
  std::string pp_return_outputs;  // "" (true), "true", "false"
};
struct StepOptions {
  OptimizerOptions optimizer;
  parallel::ParallelOptions parallel;
};
void AddStepFlags(CLI::App* cmd, StepFlags* flags);
bool ParseStepFlags(const StepFlags& f, StepOptions* out, std::string* err);

// The preamble of the commands that load a step: --set into *load, then the
// step flags into *step (ParseSets, ParseStepFlags; the first error wins).
bool ParseStepGraphFlags(const CommonFlags& common, const StepFlags& step_flags,
                         GraphLoadOptions* load, StepOptions* step, std::string* err);

// The preamble of the commands that predict the baseline step (analyze,
// report, snapshot, compare): ParseStepGraphFlags, then --accumulation ("bad
// --accumulation"), then --alloc-conf ("--alloc-conf: <why>"); the first
// error wins.
struct BaselineInputs {
  GraphLoadOptions load;
  StepOptions step;
  AccumulationMode mode = AccumulationMode::kInplace;
  alloc::Config alloc_config;
};
bool ParseBaselineFlags(const CommonFlags& common, const StepFlags& step_flags,
                        const std::string& accumulation, const std::string& alloc_conf,
                        BaselineInputs* out, std::string* err);

// --device NAME / --device-conf TEXT: the whole device's memory
// (alloc/device_memory.h). An empty name is no device (*has_device false).
// False with a message for an unknown name, bad overrides, or a conf
// without a device.
bool ResolveDeviceMemory(const std::string& name, const std::string& conf, bool* has_device,
                         alloc::DeviceMemory* out, std::string* err);

// Loads a graph (lowered if forward-only), adds the optimizer state and
// update of --optimizer (the whole training step), then makes it one rank's
// step under --parallel (jg->parallel says what it holds). jg->warnings
// gains the graph's source.warnings that --set moves away from the exported
// sizes (ExportWarningsInEffect).
bool LoadStepGraph(const std::string& file, const GraphLoadOptions& load, const StepOptions& step,
                   JointGraph* jg, std::string* err);

// Loads plan_file, a memplan.plan/1 for `g` (the step loaded from
// graph_file), and re-reads graph_file: when the plan's graph_sha256 is not
// that of its bytes, appends to *warnings the one warning that the plan was
// made for another version of the graph. False with *err when either file
// cannot be read or the plan does not fit `g`.
bool LoadPlanFor(const std::string& plan_file, const std::string& graph_file, const Graph& g,
                 Plan* plan, std::vector<std::string>* warnings, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_CLI_COMMON_H_
