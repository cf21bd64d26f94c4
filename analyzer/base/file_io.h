// Reading whole files and the JSON depth guard every document reader shares.
#ifndef MEMPLAN_ANALYZER_BASE_FILE_IO_H_
#define MEMPLAN_ANALYZER_BASE_FILE_IO_H_

#include <string>
#include <string_view>

namespace memplan {

// Documents nested deeper than this are refused before parsing.
constexpr int kMaxJsonDepth = 64;

// Reads a whole file; false with "cannot read PATH: <why>" on failure (a
// directory included).
bool ReadFile(const std::string& path, std::string* contents, std::string* err);

// Rejects nesting deeper than max_depth without recursion; the error names the
// byte offset: "nesting deeper than N levels at byte B".
bool CheckJsonDepth(std::string_view text, int max_depth, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_FILE_IO_H_
