#include "analyzer/base/json_util.h"

#include <fmt/format.h>

#include <cstdint>

#include "analyzer/base/file_io.h"

namespace memplan::json_util {

using json = nlohmann::json;

const char* TypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::null:
      return "null";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "a number";
    default:
      return "a value";
  }
}

std::string Found(const json& j) {
  if (j.is_number() || j.is_boolean() || j.is_null()) return json_util::Dump(j);
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return json_util::Dump(json(s));
  }
  return TypeName(j);
}

std::string Quote(const std::string& s) { return json_util::Dump(json(s)); }

std::string PointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

bool IsNonNegativeInteger(const json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>() <= uint64_t(INT64_MAX);
  if (j.is_number_integer()) return j.get<int64_t>() >= 0;
  return false;
}

std::string ExceptionText(const std::exception& e) {
  std::string what = e.what();
  size_t close = what.find("] ");
  return close == std::string::npos ? what : what.substr(close + 2);
}

bool ParseJsonFile(const std::string& text, const std::string& file, const std::string& expected,
                   json* doc, std::string* err) {
  if (!CheckJsonDepth(text, kMaxJsonDepth, err)) {
    *err = file + ": " + *err;
    return false;
  }
  try {
    *doc = json::parse(text);
  } catch (const std::exception& e) {
    *err = fmt::format("{}: not JSON ({}); expected {}", file, ExceptionText(e), expected);
    return false;
  }
  return true;
}

}  // namespace memplan::json_util
