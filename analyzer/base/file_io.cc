#include "analyzer/base/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace memplan {

bool CheckJsonDepth(std::string_view text, int max_depth, std::string* err) {
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
  auto fail = [&](int error) {
    *err = fmt::format("cannot read {}: {}", path, std::strerror(error));
    return false;
  };
  // A directory opens on Linux and reports a huge size; refuse it by name.
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return fail(EISDIR);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno);
  // A regular file is read straight into place; a pipe or a device until
  // its end, in growing steps.
  contents->clear();
  const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (regular) contents->resize(st.st_size);
  size_t have = 0;
  for (;;) {
    if (have == contents->size()) {
      if (regular) break;  // its size when opened
      contents->resize(std::max<size_t>(2 * have, 1 << 16));
    }
    const ssize_t n = read(fd, contents->data() + have, contents->size() - have);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      close(fd);
      return fail(error);
    }
    have += static_cast<size_t>(n);
  }
  contents->resize(have);
  close(fd);
  return true;
}

}  // namespace memplan
