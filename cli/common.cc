#include "cli/common.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

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

void AddOptimizerFlags(CLI::App* cmd, OptimizerFlags* flags) {
  cmd->add_option("--optimizer", flags->optimizer,
                  "add optimizer state and an optimizer phase: none, sgd, momentum (1x the "
                  "parameter bytes), adam, adamw (2x)")
      ->check(CLI::IsMember({"none", "sgd", "momentum", "adam", "adamw"}))
      ->capture_default_str();
  cmd->add_option("--master-weights", flags->master_weights,
                  "fp32: float32 master copies of narrower parameters, optimizer state in "
                  "float32")
      ->check(CLI::IsMember({"fp32"}));
}

bool ParseOptimizerFlags(const OptimizerFlags& f, OptimizerOptions* out, std::string* err) {
  if (!ParseOptimizerKind(f.optimizer, &out->kind)) {
    *err = "bad --optimizer";
    return false;
  }
  out->master_fp32 = f.master_weights == "fp32";
  if (out->master_fp32 && out->kind == OptimizerKind::kNone) {
    *err = "--master-weights fp32: needs --optimizer (the master copies belong to it)";
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

bool LoadStepGraph(const std::string& file, const GraphLoadOptions& load,
                   const OptimizerOptions& optimizer, JointGraph* jg, std::string* err) {
  if (!LoadJointGraph(file, load, jg, err)) return false;
  OptimizerStats stats;
  if (AddOptimizerState(optimizer, &jg->graph, &stats, err)) return true;
  *err = jg->file + ": " + *err;
  return false;
}

}  // namespace memplan
