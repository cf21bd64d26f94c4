// MappedFile: a whole file's bytes, read-only, without copying them.
//
// A regular file is mapped (mmap, MAP_PRIVATE): its bytes come from the page
// cache as they are read, so a large graph costs no zeroed buffer, no copy
// and no anonymous memory; anything else (a pipe, /dev/stdin) is read into
// memory. The view is valid while the MappedFile lives.
#ifndef MEMPLAN_ANALYZER_BASE_MAPPED_FILE_H_
#define MEMPLAN_ANALYZER_BASE_MAPPED_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace memplan {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Opens `path`; false with ReadFile's error ("cannot read PATH: <why>", a
  // directory included). An empty file is an empty view.
  bool Open(const std::string& path, std::string* err);
  std::string_view view() const { return view_; }
  // Whether the bytes are mapped (a regular file) rather than read.
  bool mapped() const { return map_ != nullptr; }

 private:
  void Close();

  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::string read_;  // the bytes when not mapped
  std::string_view view_;
};

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_MAPPED_FILE_H_
