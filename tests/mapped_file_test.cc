// MappedFile: mapped regular files, read pipes, and ReadFile's errors word for word.
#include "analyzer/base/mapped_file.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace memplan {
namespace {

std::string TempPath(const char* name) {
  return std::string(P_tmpdir) + "/memplan_mapped_" + std::to_string(getpid()) + "_" + name;
}

TEST_CASE("MappedFile: a regular file is mapped, byte for byte") {
  const std::string path = TempPath("regular");
  std::string bytes = "{\"format\": \"memplan.graph/1\"}\n";
  bytes.push_back('\0');  // any byte, NUL included
  bytes += std::string(100000, 'x');
  std::ofstream(path, std::ios::binary) << bytes;
  MappedFile file;
  std::string err;
  REQUIRE_MESSAGE(file.Open(path, &err), err);
  CHECK(file.mapped());
  CHECK(file.view() == bytes);
  // Opening again replaces the view.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "short";
  REQUIRE_MESSAGE(file.Open(path, &err), err);
  CHECK(file.view() == "short");
  std::remove(path.c_str());
}

TEST_CASE("MappedFile: an empty file is an empty view") {
  const std::string path = TempPath("empty");
  std::ofstream(path, std::ios::binary).flush();
  MappedFile file;
  std::string err;
  REQUIRE_MESSAGE(file.Open(path, &err), err);
  CHECK(file.view().empty());
  std::remove(path.c_str());
}

TEST_CASE("MappedFile: a pipe is read whole") {
  const std::string path = TempPath("fifo");
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  const std::string bytes(200000, 'p');  // more than a pipe's buffer
  std::thread writer([&] { std::ofstream(path, std::ios::binary) << bytes; });
  MappedFile file;
  std::string err;
  const bool opened = file.Open(path, &err);
  writer.join();
  std::remove(path.c_str());
  REQUIRE_MESSAGE(opened, err);
  CHECK_FALSE(file.mapped());
  CHECK(file.view() == bytes);
}

TEST_CASE("MappedFile: a missing file and a directory, in ReadFile's words") {
  MappedFile file;
  std::string err;
  CHECK_FALSE(file.Open("/nonexistent/dir/g.json", &err));
  CHECK(err == "cannot read /nonexistent/dir/g.json: No such file or directory");
  CHECK_FALSE(file.Open("/tmp", &err));
  CHECK(err == "cannot read /tmp: Is a directory");
}

}  // namespace
}  // namespace memplan
