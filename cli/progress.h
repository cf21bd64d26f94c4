// One progress line on stderr, redrawn in place, for work that takes
// seconds or minutes: "memplan: planning: sweep 3/8, 1200 programs
// simulated, 12 s". Only when stderr is a terminal and not --quiet, so CI
// logs and golden tests never see it. Redrawn at most 4 times a second (a
// new stage at once); Clear() erases it before anything else is printed.
#ifndef MEMPLAN_CLI_PROGRESS_H_
#define MEMPLAN_CLI_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "analyzer/plan/planner.h"

namespace memplan {

class Progress {
 public:
  explicit Progress(bool quiet);
  // What is being done now ("loading", "planning"); resets the stage.
  void Phase(const std::string& name);
  // Hooks the planner's callbacks (programs simulated, sweep and micro-batch
  // stages) to this line; nothing when disabled.
  void Attach(PlannerOptions* options);
  void Clear();
  bool enabled() const { return enabled_; }

 private:
  void Draw(bool now);
  bool enabled_;
  bool drawn_ = false;
  std::string phase_, stage_;
  int64_t programs_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace memplan

#endif  // MEMPLAN_CLI_PROGRESS_H_
