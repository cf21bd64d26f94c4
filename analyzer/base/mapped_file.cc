#include "analyzer/base/mapped_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "analyzer/base/file_io.h"

namespace memplan {

MappedFile::~MappedFile() { Close(); }

void MappedFile::Close() {
  if (map_ != nullptr) munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = 0;
  read_.clear();
  view_ = {};
}

bool MappedFile::Open(const std::string& path, std::string* err) {
  Close();
  // Not a regular file (a pipe must not be opened twice), empty or
  // unreadable: ReadFile reads it, or says why it cannot in its words.
  struct stat st;
  const int fd = stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0
                     ? open(path.c_str(), O_RDONLY | O_CLOEXEC)
                     : -1;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    if (fd >= 0) close(fd);
    if (!ReadFile(path, &read_, err)) return false;
    view_ = read_;
    return true;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  close(fd);
  if (map == MAP_FAILED) {
    *err = fmt::format("cannot read {}: {}", path, std::strerror(map_errno));
    return false;
  }
  madvise(map, size, MADV_SEQUENTIAL);  // read front to back once: read ahead
  map_ = map;
  map_size_ = size;
  view_ = std::string_view(static_cast<const char*>(map), size);
  return true;
}

}  // namespace memplan
