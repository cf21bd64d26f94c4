// memplan: a thin table of subcommands over the analyzer library. Each
// subcommand lives in a file of its own (cli/commands.h); this file builds
// the app, registers them in --help order, parses and returns the exit code.
#include <CLI/CLI.hpp>
#include <string>

#include "analyzer/base/version.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace memplan {
namespace {

// Whether `arg` names one of app's subcommands; else *names lists them all.
bool IsSubcommand(const CLI::App& app, const std::string& arg, std::string* names) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == arg) return true;
    *names += (names->empty() ? "" : ", ") + sub->get_name();
  }
  return false;
}

int Main(int argc, char** argv) {
  CLI::App app{"memplan: predict, plan and prove the memory of backward passes"};
  app.set_version_flag("--version", std::string("memplan ") + MemplanVersion());
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 ok, 1 a check failed, 2 bad usage or input, 3 no plan fits, 4 backend "
      "unavailable.");

  int rc = kExitOk;
  RegisterAnalyze(&app, &rc);
  RegisterPlan(&app, &rc);
  RegisterLower(&app, &rc);
  RegisterVerify(&app, &rc);
  RegisterProfile(&app, &rc);
  RegisterCheck(&app, &rc);
  RegisterReport(&app, &rc);
  RegisterDoctor(&app, &rc);
  RegisterSnapshotCommands(&app, &rc);

  // CLI11 would take an unknown name for an extra positional: say what it is.
  std::string names;
  if (argc >= 2 && argv[1][0] != '-' && !IsSubcommand(app, argv[1], &names))
    return Error("unknown subcommand \"" + std::string(argv[1]) + "\"; expected one of: " + names +
                 " (see memplan --help)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return Error(std::string(e.what()) + " (see memplan " +
                 (argc >= 2 && argv[1][0] != '-' ? std::string(argv[1]) + " " : "") + "--help)");
  }
  return rc;
}

}  // namespace
}  // namespace memplan

int main(int argc, char** argv) { return memplan::Main(argc, argv); }
