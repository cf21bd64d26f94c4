// Small helpers shared by the JSON readers (graph_json, plan): how a value is
// named in an error message, and JSON pointer tokens.
#ifndef MEMPLAN_ANALYZER_BASE_JSON_UTIL_H_
#define MEMPLAN_ANALYZER_BASE_JSON_UTIL_H_

#include <nlohmann/json.hpp>
#include <string>

namespace memplan::json_util {

// "an object", "an array", "a string", "a boolean", "null", "a number".
const char* TypeName(const nlohmann::json& j);
// A value as "found ..." shows it: scalars as JSON (long strings cut at 60
// characters), containers by their type name.
std::string Found(const nlohmann::json& j);
// A string as a JSON string literal.
std::string Quote(const std::string& s);
// An object key as a JSON pointer token (RFC 6901: "~" -> "~0", "/" -> "~1").
std::string PointerToken(const std::string& key);
// An integer from 0 to 2^63-1.
bool IsNonNegativeInteger(const nlohmann::json& j);
// nlohmann's exception text without its "[json.exception...] " prefix.
std::string ExceptionText(const std::exception& e);

// Parses `text` (file `file`) after refusing nesting deeper than
// kMaxJsonDepth. Errors: "FILE: <the depth error>" or "FILE: not JSON (<why>);
// expected <expected>".
bool ParseJsonFile(const std::string& text, const std::string& file, const std::string& expected,
                   nlohmann::json* doc, std::string* err);

// j.dump(indent), with bytes that are not UTF-8 (a file path may hold any)
// written as U+FFFD, so that serializing never throws.
template <class Json>
std::string Dump(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace memplan::json_util

#endif  // MEMPLAN_ANALYZER_BASE_JSON_UTIL_H_
