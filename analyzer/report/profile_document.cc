#include "analyzer/report/profile_document.h"

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>

#include "analyzer/base/file_io.h"
#include "analyzer/base/json_util.h"

namespace memplan {

using json_util::Found;

bool ParseProfileReport(const std::string& text, const std::string& file, MeasuredProfile* out,
                        std::string* err) {
  nlohmann::json doc;
  if (!json_util::ParseJsonFile(text, file, "a memplan.report/1 report of memplan profile", &doc,
                                err))
    return false;
  auto fail = [&](const std::string& pointer, const nlohmann::json* found,
                  const std::string& expected) {
    *err = fmt::format("{}: {}: found {}; expected {}", file, pointer,
                       found ? Found(*found) : std::string("nothing"), expected);
    return false;
  };
  auto member = [&](const char* key) -> const nlohmann::json* {
    auto it = doc.find(key);
    return it == doc.end() ? nullptr : &*it;
  };
  if (!doc.is_object()) return fail("(root)", &doc, "a memplan.report/1 object");
  const nlohmann::json* v = member("format");
  if (!v || *v != "memplan.report/1") return fail("/format", v, "\"memplan.report/1\"");
  v = member("command");
  if (!v || *v != "profile")
    return fail("/command", v, "\"profile\" (the --json report of memplan profile)");
  v = member("measured_peak_bytes");
  if (!v || !json_util::IsNonNegativeInteger(*v))
    return fail("/measured_peak_bytes", v, "the measured peak as an integer number of bytes");
  out->peak_bytes = v->get<int64_t>();
  v = member("measured_peak_step");
  if (!v || !v->is_number_integer() || v->get<int64_t>() < -1 || v->get<int64_t>() > INT32_MAX)
    return fail("/measured_peak_step", v, "a step index, or -1 for the resident set");
  out->peak_step = static_cast<int>(v->get<int64_t>());
  out->steps = -1;
  if ((v = member("program")) != nullptr) {
    if (!v->is_object()) return fail("/program", v, "an object");
    auto it = v->find("steps");
    if (it != v->end()) {
      if (!json_util::IsNonNegativeInteger(*it))
        return fail("/program/steps", &*it, "a count of steps");
      out->steps = it->get<int64_t>();
    }
  }
  auto text_of = [&](const char* key, std::string* s) {
    const nlohmann::json* m = member(key);
    if (m && !m->is_string()) return fail(std::string("/") + key, m, "a string");
    *s = m ? m->get<std::string>() : "";
    return true;
  };
  if (!text_of("backend", &out->backend) || !text_of("device_name", &out->device_name) ||
      !text_of("measured_source", &out->source))
    return false;
  out->during.clear();
  if ((v = member("measured_during")) != nullptr) {
    if (!v->is_array()) return fail("/measured_during", v, "an array of live bytes per step");
    for (size_t i = 0; i < v->size(); ++i) {
      if (!json_util::IsNonNegativeInteger((*v)[i]))
        return fail(fmt::format("/measured_during/{}", i), &(*v)[i], "an integer number of bytes");
      out->during.push_back((*v)[i].get<int64_t>());
    }
  }
  out->file = file;
  return true;
}

bool LoadProfileReport(const std::string& path, MeasuredProfile* out, std::string* err) {
  std::string text;
  if (!ReadFile(path, &text, err)) return false;
  return ParseProfileReport(text, path, out, err);
}

}  // namespace memplan
