#include "cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace memplan {

Progress::Progress(bool quiet)
    : enabled_(!quiet && isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()) {}

void Progress::Phase(const std::string& name) {
  phase_ = name;
  stage_.clear();
  programs_ = 0;
  Draw(true);
}

void Progress::Attach(PlannerOptions* options) {
  if (!enabled_) return;
  options->progress = [this](int64_t programs) {
    bool first = programs_ == 0;
    programs_ = programs;
    Draw(first);
  };
  options->stage = [this](const char* stage, int64_t done, int64_t total) {
    programs_ = 0;
    stage_ = total > 0 ? fmt::format("{} {}/{}", stage, done + 1, total)
                       : fmt::format("{} {}", stage, done);
    Draw(true);
  };
}

void Progress::Draw(bool now) {
  if (!enabled_) return;
  auto t = std::chrono::steady_clock::now();
  if (!now && drawn_ && t - last_ < std::chrono::milliseconds(250)) return;
  last_ = t;
  drawn_ = true;
  std::string line = "memplan: " + phase_;
  if (!stage_.empty()) line += ": " + stage_;
  if (programs_ > 0) line += fmt::format(", {} programs simulated", programs_);
  line += fmt::format(", {:.0f} s", std::chrono::duration<double>(t - start_).count());
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
}

void Progress::Clear() {
  if (drawn_) std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace memplan
