// Subcommands that live in files of their own (cli/<name>.cc); each adds
// itself to the app and sets *rc when it runs.
#ifndef MEMPLAN_CLI_COMMANDS_H_
#define MEMPLAN_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace memplan {

// memplan doctor [--json FILE] [--no-device]
void AddDoctorCommand(CLI::App* app, int* rc);

// memplan snapshot GRAPH -o FILE and memplan compare GRAPH SNAPSHOT
void AddSnapshotCommands(CLI::App* app, int* rc);

}  // namespace memplan

#endif  // MEMPLAN_CLI_COMMANDS_H_
