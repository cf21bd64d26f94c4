// Reading the --json report of `memplan profile` (memplan.report/1, command
// "profile"): what a device run measured, for pages that draw it beside the
// prediction.
#ifndef MEMPLAN_ANALYZER_REPORT_PROFILE_DOCUMENT_H_
#define MEMPLAN_ANALYZER_REPORT_PROFILE_DOCUMENT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace memplan {

// What a memplan.report/1 of command "profile" measured.
struct MeasuredProfile {
  std::string file;
  int64_t peak_bytes = 0;
  int peak_step = -1;  // -1: the resident set
  int64_t steps = -1;  // /program/steps; -1: not given
  std::string backend, device_name, source;
  // Live bytes while each step runs (a "measured_during" array with one
  // entry per step); empty when the report has none, as reports of this
  // version do: the page then draws only the measured peak.
  std::vector<int64_t> during;
};

// Errors read "FILE: POINTER: found ...; expected ...".
bool ParseProfileReport(const std::string& text, const std::string& file, MeasuredProfile* out,
                        std::string* err);
bool LoadProfileReport(const std::string& path, MeasuredProfile* out, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_REPORT_PROFILE_DOCUMENT_H_
