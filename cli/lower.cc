// memplan lower: writes the joint graph (forward and derived backward) of a
// forward-only memplan.graph/1; a joint graph is written unchanged.
#include <cstdio>
#include <fstream>
#include <string>

#include "analyzer/drivers/analysis.h"
#include "analyzer/import/graph_json.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace memplan {
namespace {

struct LowerFlags {
  CommonFlags common;
  std::string out;
  bool quiet = false;
};

int RunLower(const LowerFlags& f) {
  GraphLoadOptions options;
  std::string err;
  if (!ParseSets(f.common.sets, &options, &err)) return Error(err);
  JointGraph jg;
  if (!LoadJointGraph(f.common.graph, options, &jg, &err)) return Error(err);
  PrintWarnings(jg.warnings);
  {
    std::ofstream out(f.out, std::ios::binary | std::ios::trunc);
    if (out) WriteGraphJson(jg.graph, out);
    if (!out) return Error("cannot write " + f.out);
  }
  size_t backward = 0;
  for (const Op& op : jg.graph.ops) backward += op.phase == Phase::kBackward;
  if (f.quiet) ExitNow(kExitOk);
  if (jg.lowered)
    std::printf("lowered %s: %zu forward ops -> %zu ops (%zu backward); wrote %s\n",
                f.common.graph.c_str(), jg.input_ops, jg.graph.ops.size(), backward, f.out.c_str());
  else
    std::printf("%s is already joint (%zu ops, %zu backward); wrote it unchanged to %s\n",
                f.common.graph.c_str(), jg.graph.ops.size(), backward, f.out.c_str());
  ExitNow(kExitOk);
}

}  // namespace

void RegisterLower(CLI::App* app, int* rc) {
  static LowerFlags lower;
  CLI::App* l = app->add_subcommand("lower", "derive the backward of a forward-only graph");
  AddCommon(l, &lower.common);
  l->add_option("-o,--output", lower.out, "where to write the joint memplan.graph/1")->required();
  l->add_flag("-q,--quiet", lower.quiet, "nothing on stdout");
  l->footer("Example:\n  memplan lower examples/mlp.graph.json -o mlp.joint.graph.json");
  l->callback([rc] { *rc = RunLower(lower); });
}

}  // namespace memplan
