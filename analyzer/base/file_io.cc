#include "analyzer/base/file_io.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace memplan {

bool CheckJsonDepth(const std::string& text, int max_depth, std::string* err) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        *err = fmt::format("nesting deeper than {} levels at byte {}", max_depth, i);
        return false;
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

bool ReadFile(const std::string& path, std::string* contents, std::string* err) {
  // A directory opens as a stream on Linux and reports a huge size; refuse it by name.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    *err = fmt::format("cannot read {}: {}", path, std::strerror(EISDIR));
    return false;
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    *err = fmt::format("cannot read {}: {}", path, std::strerror(errno));
    return false;
  }
  std::streamoff size = in.tellg();
  if (size >= 0) {  // a regular file: one read
    contents->resize(static_cast<size_t>(size));
    in.seekg(0);
    if (!in.read(contents->data(), size)) {
      *err = fmt::format("cannot read {}: {}", path, std::strerror(errno));
      return false;
    }
    return true;
  }
  in.clear();
  in.seekg(0);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    *err = fmt::format("cannot read {}: {}", path, std::strerror(errno));
    return false;
  }
  *contents = std::move(ss).str();
  return true;
}

}  // namespace memplan
