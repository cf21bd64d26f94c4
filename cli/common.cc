#include "cli/common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <tuple>

#include "analyzer/base/file_io.h"
#include "analyzer/base/sha256.h"

namespace memplan {

int Error(const std::string& message) {
  std::fprintf(stderr, "memplan: error: %s\n", message.c_str());
  return kExitBadInput;
}

void ExitNow(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

bool WriteFile(const std::string& path, const std::string& contents, std::string* err) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << contents;
  if (!out) {
    *err = "cannot write " + path;
    return false;
  }
  return true;
}

bool ParseSets(const std::vector<std::string>& sets, GraphLoadOptions* options, std::string* err) {
  for (const std::string& s : sets) {
    size_t eq = s.find('=');
    std::string name = s.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : s.substr(eq + 1);
    bool ok = !name.empty() && !value.empty() && value.size() <= 18 &&
              value.find_first_not_of("0123456789") == std::string::npos;
    if (!ok) {
      *err = "--set " + s + ": expected NAME=VALUE with VALUE an integer from 0 to 10^18";
      return false;
    }
    options->symbol_overrides.emplace_back(name, std::stoll(value));
  }
  return true;
}

void PrintWarnings(const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) std::fprintf(stderr, "memplan: warning: %s\n", w.c_str());
}

void AddCommon(CLI::App* cmd, CommonFlags* flags) {
  cmd->add_option("GRAPH", flags->graph, "memplan.graph/1 file (forward-only or joint)")
      ->required();
  cmd->add_option("--set", flags->sets, "override a shape symbol, e.g. --set batch=64")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);
}

void AddStepFlags(CLI::App* cmd, StepFlags* flags) {
  cmd->add_option("--optimizer", flags->optimizer,
                  "add optimizer state and an optimizer phase: none, sgd, momentum (1x the "
                  "parameter bytes), adam, adamw (2x)")
      ->check(CLI::IsMember({"none", "sgd", "momentum", "adam", "adamw"}))
      ->capture_default_str();
  cmd->add_option("--master-weights", flags->master_weights,
                  "fp32: float32 master copies of narrower parameters, optimizer state in "
                  "float32")
      ->check(CLI::IsMember({"fp32"}));
  cmd->add_option("--parallel", flags->parallel,
                  "one rank's step: none, ddp (DistributedDataParallel), zero1 (ddp + "
                  "ZeroRedundancyOptimizer), fsdp (FSDP2 fully_shard per module), pipeline (one "
                  "stage of torch.distributed.pipelining; the graph is one micro-batch)")
      ->check(CLI::IsMember({"none", "ddp", "zero1", "fsdp", "pipeline"}))
      ->capture_default_str();
  cmd->add_option("--world-size", flags->world_size,
                  "ranks (with --parallel; pipeline: --pp-stages, one stage per rank)")
      ->capture_default_str();
  cmd->add_option("--rank", flags->rank,
                  "the rank to predict (zero1: its share of the optimizer state; default the "
                  "rank holding the most; pipeline: the stage, default the one with the highest "
                  "peak)");
  cmd->add_flag("--ddp-bucket-view", flags->ddp_bucket_view,
                "ddp, zero1: gradient_as_bucket_view=True (gradients are views of the buckets)");
  cmd->add_option("--bucket-cap-mb", flags->bucket_cap_mb, "ddp, zero1: DDP's bucket_cap_mb")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--fsdp-reshard-after-forward", flags->fsdp_reshard_after_forward,
                  "fsdp: free the unsharded parameters after each module's forward and gather "
                  "them again for its backward (true), or keep them (false: shard-grad-op)")
      ->check(CLI::IsMember({"true", "false"}))
      ->capture_default_str();
  cmd->add_option("--fsdp-depth", flags->fsdp_depth,
                  "fsdp: scope components that name a sharded module (2: h.0.attn belongs to "
                  "h.0); 0 (default): the depth of the first numbered modules (h.0, "
                  "model.layers.0)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_option("--fsdp-modules", flags->fsdp_modules,
                  "fsdp: the modules (scope prefixes) to shard, instead of every module at "
                  "--fsdp-depth")
      ->delimiter(',');
  cmd->add_option("--fsdp-param-dtype", flags->fsdp_param_dtype,
                  "fsdp: MixedPrecisionPolicy(param_dtype): gather and compute in this dtype "
                  "(bfloat16, float16, ...)");
  cmd->add_option("--fsdp-reduce-dtype", flags->fsdp_reduce_dtype,
                  "fsdp: MixedPrecisionPolicy(reduce_dtype): reduce-scatter in this dtype "
                  "(default: --fsdp-param-dtype)");
  cmd->add_option("--pp-stages", flags->pp_stages, "pipeline: stages, one per rank")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--micro-batches", flags->micro_batches,
                  "pipeline: micro-batches per step (the graph's batch is one micro-batch)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cmd->add_option("--pp-schedule", flags->pp_schedule, "pipeline: 1f1b (default) or gpipe")
      ->check(CLI::IsMember({"1f1b", "gpipe"}));
  cmd->add_option("--pp-split", flags->pp_split,
                  "pipeline: the modules where stages 1, 2, ... begin (default: balance "
                  "parameter bytes over module boundaries)")
      ->delimiter(',');
  cmd->add_option("--pp-return-outputs", flags->pp_return_outputs,
                  "pipeline: schedule.step(return_outputs=...): the last stage keeps every "
                  "micro-batch's output and concatenates them (true, torch's default)")
      ->check(CLI::IsMember({"true", "false"}));
}

bool ParseStepFlags(const StepFlags& f, StepOptions* out, std::string* err) {
  if (!ParseOptimizerKind(f.optimizer, &out->optimizer.kind)) {
    *err = "bad --optimizer";
    return false;
  }
  out->optimizer.master_fp32 = f.master_weights == "fp32";
  if (out->optimizer.master_fp32 && out->optimizer.kind == OptimizerKind::kNone) {
    *err = "--master-weights fp32: needs --optimizer (the master copies belong to it)";
    return false;
  }
  parallel::ParallelOptions& p = out->parallel;
  if (!parallel::ParseStrategy(f.parallel, &p.strategy)) {
    *err = "bad --parallel";
    return false;
  }
  p.world_size = f.world_size;
  p.rank = f.rank;
  p.gradient_as_bucket_view = f.ddp_bucket_view;
  p.bucket_cap_bytes = static_cast<int64_t>(f.bucket_cap_mb * 1024 * 1024);
  p.reshard_after_forward = f.fsdp_reshard_after_forward == "true";
  p.shard_depth = f.fsdp_depth;
  p.shard_modules = f.fsdp_modules;
  for (auto [flag, text, out] :
       {std::tuple{"--fsdp-param-dtype", &f.fsdp_param_dtype, &p.param_dtype},
        std::tuple{"--fsdp-reduce-dtype", &f.fsdp_reduce_dtype, &p.reduce_dtype}}) {
    if (text->empty()) continue;
    // Real floating dtypes only: MixedPrecisionPolicy takes no complex dtype.
    static constexpr const char* kRealFloating[] = {"float64",  "float32",       "float16",
                                                    "bfloat16", "float8_e4m3fn", "float8_e5m2"};
    DType dtype;
    if (std::find(std::begin(kRealFloating), std::end(kRealFloating), *text) ==
            std::end(kRealFloating) ||
        !ParseDType(*text, &dtype)) {
      std::string floating;
      for (const char* name : kRealFloating)
        floating += (floating.empty() ? "" : ", ") + std::string(name);
      *err = std::string(flag) + " " + *text + ": expected a floating dtype (" + floating + ")";
      return false;
    }
    if (p.strategy != parallel::Strategy::kFsdp) {
      *err = std::string(flag) + ": needs --parallel fsdp";
      return false;
    }
    *out = dtype;
  }
  const bool pipeline_flags = f.pp_stages > 0 || f.micro_batches > 0 || !f.pp_schedule.empty() ||
                              !f.pp_split.empty() || !f.pp_return_outputs.empty();
  if (p.strategy == parallel::Strategy::kPipeline) {
    if (f.pp_stages <= 0) {
      *err = "--parallel pipeline: needs --pp-stages";
      return false;
    }
    p.pipeline.stages = f.pp_stages;
    p.pipeline.micro_batches = f.micro_batches > 0 ? f.micro_batches : 1;
    if (!f.pp_schedule.empty() && !parallel::ParseSchedule(f.pp_schedule, &p.pipeline.schedule)) {
      *err = "bad --pp-schedule";
      return false;
    }
    p.pipeline.split = f.pp_split;
    p.pipeline.return_outputs = f.pp_return_outputs != "false";
    if (p.world_size == 1) p.world_size = f.pp_stages;
  } else if (pipeline_flags) {
    *err =
        "--pp-stages, --micro-batches, --pp-schedule, --pp-split and --pp-return-outputs need "
        "--parallel pipeline";
    return false;
  }
  // Past a world size below 1, the flags given without --parallel (the
  // library's check names --world-size alone), then the library's checks.
  if (p.world_size >= 1 && p.strategy == parallel::Strategy::kNone &&
      (p.world_size != 1 || p.rank >= 0 || f.ddp_bucket_view || !f.fsdp_modules.empty())) {
    *err = "--world-size, --rank, --ddp-bucket-view and --fsdp-modules need --parallel";
    return false;
  }
  return parallel::CheckOptions(p, err);
}

bool ParseStepGraphFlags(const CommonFlags& common, const StepFlags& step_flags,
                         GraphLoadOptions* load, StepOptions* step, std::string* err) {
  return ParseSets(common.sets, load, err) && ParseStepFlags(step_flags, step, err);
}

bool ParseBaselineFlags(const CommonFlags& common, const StepFlags& step_flags,
                        const std::string& accumulation, const std::string& alloc_conf,
                        BaselineInputs* out, std::string* err) {
  if (!ParseStepGraphFlags(common, step_flags, &out->load, &out->step, err)) return false;
  if (!ParseAccumulationMode(accumulation, &out->mode)) {
    *err = "bad --accumulation";
    return false;
  }
  if (!alloc::ParseAllocConf(alloc_conf, &out->alloc_config, err)) {
    *err = "--alloc-conf: " + *err;
    return false;
  }
  return true;
}

bool ResolveDeviceMemory(const std::string& name, const std::string& conf, bool* has_device,
                         alloc::DeviceMemory* out, std::string* err) {
  *has_device = !name.empty();
  if (!*has_device) {
    if (conf.empty()) return true;
    *err = "--device-conf: needs --device (" + alloc::DeviceMemoryNames() + ")";
    return false;
  }
  if (!alloc::FindDeviceMemory(name, out)) {
    *err = "--device " + name + ": no memory preset for it; expected one of " +
           alloc::DeviceMemoryNames();
    return false;
  }
  std::string why;
  if (!alloc::ParseDeviceConf(conf, out, &why)) {
    *err = "--device-conf: " + why;
    return false;
  }
  return true;
}

bool LoadStepGraph(const std::string& file, const GraphLoadOptions& load, const StepOptions& step,
                   JointGraph* jg, std::string* err) {
  if (!LoadJointGraph(file, load, jg, err)) return false;
  for (std::string& w : ExportWarningsInEffect(jg->graph)) jg->warnings.push_back(std::move(w));
  OptimizerStats stats;
  if (!AddOptimizerState(step.optimizer, &jg->graph, &stats, err)) {
    *err = jg->file + ": " + *err;
    return false;
  }
  if (step.parallel.strategy == parallel::Strategy::kNone) return true;
  if (parallel::MakeRankStep(step.parallel, &jg->graph, &jg->parallel, err)) return true;
  *err = jg->file + ": --parallel " + parallel::StrategyName(step.parallel.strategy) + ": " + *err;
  return false;
}

bool LoadPlanFor(const std::string& plan_file, const std::string& graph_file, const Graph& g,
                 Plan* plan, std::vector<std::string>* warnings, std::string* err) {
  if (!LoadPlanFile(plan_file, g, plan, err)) return false;
  std::string graph_sha256;
  if (!FileSha256Hex(graph_file, &graph_sha256, err)) return false;
  if (plan->graph_sha256 != graph_sha256)
    warnings->push_back(fmt::format(
        "{}: graph_sha256 does not match the bytes of {}: the plan was made for another "
        "version of the graph",
        plan_file, graph_file));
  return true;
}

}  // namespace memplan
