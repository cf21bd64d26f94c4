// memplan doctor: what this binary can measure here (build, CUPTI, GPU).
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/commands.h"
#include "profiler/environment.h"

namespace memplan {
namespace {

struct DoctorFlags {
  std::string json;
  bool no_device = false;
};

int RunDoctor(const DoctorFlags& f) {
  EnvironmentReport env = ProbeEnvironment(!f.no_device);
  std::fputs(EnvironmentText(env).c_str(), stdout);
  if (!f.json.empty()) {
    std::ofstream out(f.json, std::ios::binary);
    out << EnvironmentJson(env);
    if (!out) {
      std::fprintf(stderr, "memplan: error: %s: cannot write\n", f.json.c_str());
      return 2;
    }
  }
  return 0;
}

}  // namespace

void RegisterDoctor(CLI::App* app, int* rc) {
  static DoctorFlags flags;
  CLI::App* d = app->add_subcommand(
      "doctor", "say how this memplan was built and which CUPTI and GPU it would use");
  d->add_option("--json", flags.json, "also write it as JSON (memplan.doctor/1)");
  d->add_flag("--no-device", flags.no_device, "do not open the GPU (no CUDA context)");
  d->footer(
      "Exit code 0 whatever is missing: the text says what. CUPTI is loaded at run time: "
      "$MEMPLAN_CUPTI_LIBRARY, else the candidates listed in the JSON, in order.");
  d->callback([rc] { *rc = RunDoctor(flags); });
}

}  // namespace memplan
