#include "profiler/cpu_backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace memplan {
namespace {

// Sums a buffer 8 bytes at a time (the tail byte by byte).
uint64_t Sum(const void* ptr, int64_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(ptr);
  uint64_t sum = 0;
  int64_t words = bytes / 8;
  for (int64_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, p + i * 8, 8);
    sum += w;
  }
  for (int64_t i = words * 8; i < bytes; ++i) sum += p[i];
  return sum;
}

}  // namespace

bool CpuBackend::Allocate(int64_t bytes, void** ptr, std::string* err) {
  if (options_.capacity_bytes > 0 && counter_.live() + bytes > options_.capacity_bytes) {
    *err = fmt::format("out of memory: {} bytes requested with {} of {} bytes in use", bytes,
                       counter_.live(), options_.capacity_bytes);
    return false;
  }
  *ptr = std::malloc(static_cast<size_t>(bytes));
  if (*ptr == nullptr) {
    *err = fmt::format("out of host memory: malloc of {} bytes failed", bytes);
    return false;
  }
  ++outstanding_;
  return true;
}

bool CpuBackend::Free(void* ptr, int64_t bytes, std::string* err) {
  std::free(ptr);
  --outstanding_;
  return true;
}

bool CpuBackend::Fill(void* ptr, int64_t bytes, std::string* err) {
  std::memset(ptr, 1, static_cast<size_t>(bytes));
  return true;
}

bool CpuBackend::RunOp(const OpLaunch& launch, std::string* err) {
  int64_t t0 = NowNs();
  uint64_t sum = 0;
  if (options_.touch) {
    for (const Operand& in : launch.inputs) sum += Sum(in.ptr, in.bytes);
    // Outputs depend on the inputs; an in-place output is read above first.
    int value = static_cast<int>(sum % 251) + 1;
    for (const Operand& out : launch.outputs)
      std::memset(out.ptr, value, static_cast<size_t>(out.bytes));
    if (launch.workspace.ptr)
      std::memset(launch.workspace.ptr, value, static_cast<size_t>(launch.workspace.bytes));
  }
  checksum_ += sum;
  last_op_us_ = static_cast<double>(NowNs() - t0) / 1000.0;
  return true;
}

int64_t CpuBackend::NowNs() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

int64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

std::string CpuDeviceName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    size_t start = line.find_first_not_of(" \t", colon + 1);
    if (start == std::string::npos) break;
    return line.substr(start);
  }
  return "unknown CPU";
}

}  // namespace memplan
