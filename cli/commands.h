// The subcommands, one file each (cli/<name>.cc). Each Register* adds its
// subcommand, flags and help to the app; when that subcommand is parsed, its
// callback runs it and sets *rc to the exit code (or ends the process).
// main.cc registers them in this order, which is the order of memplan --help.
#ifndef MEMPLAN_CLI_COMMANDS_H_
#define MEMPLAN_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace memplan {

// memplan analyze GRAPH: the baseline step's peak and what is alive at it.
void RegisterAnalyze(CLI::App* app, int* rc);

// memplan plan GRAPH --budget SIZE: what to recompute so the step fits;
// with --global-batch the micro-batch search, with --sweep the budget curve.
void RegisterPlan(CLI::App* app, int* rc);

// memplan lower GRAPH -o FILE: the joint graph of a forward-only one.
void RegisterLower(CLI::App* app, int* rc);

// memplan verify GRAPH PLAN: replays a plan's step program.
void RegisterVerify(CLI::App* app, int* rc);

// memplan profile GRAPH: runs the baseline or a plan on a device and measures it.
void RegisterProfile(CLI::App* app, int* rc);

// memplan check GRAPH: the CI gate on budget and regression.
void RegisterCheck(CLI::App* app, int* rc);

// memplan report GRAPH --html FILE: the page of memory over time.
void RegisterReport(CLI::App* app, int* rc);

// memplan doctor [--json FILE] [--no-device]
void RegisterDoctor(CLI::App* app, int* rc);

// memplan snapshot GRAPH -o FILE and memplan compare GRAPH SNAPSHOT (one
// file: both replay the predicted step through the caching allocator).
void RegisterSnapshotCommands(CLI::App* app, int* rc);

}  // namespace memplan

#endif  // MEMPLAN_CLI_COMMANDS_H_
