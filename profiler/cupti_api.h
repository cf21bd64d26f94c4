// CUPTI loaded at run time (dlopen), so that one memplan binary runs with the
// machine's own libcupti.so.<major> wherever it lies: the CUDA toolkit's or
// the pip package nvidia-cuda-cupti's. What it sees: the environment
// (MEMPLAN_CUPTI_LIBRARY) and a few well-known paths. What it returns: the
// CUPTI entry points memplan calls, the path they came from and CUPTI's
// version, or one line saying every place it looked.
//
// Search order: $MEMPLAN_CUPTI_LIBRARY (a file; when set, nothing else is
// tried), the directory CMake found CUPTI in at build time, the toolkit under
// /usr/local/cuda (extras/CUPTI/lib64, lib64, targets/x86_64-linux/lib), then
// the dynamic loader's own search (LD_LIBRARY_PATH, ldconfig). A library
// whose major version differs from the headers memplan was built with is
// refused: its activity records may be laid out differently.
// Only built when MEMPLAN_CUDA_ENABLED.
#ifndef MEMPLAN_PROFILER_CUPTI_API_H_
#define MEMPLAN_PROFILER_CUPTI_API_H_

#include <cupti.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memplan {

struct CuptiApi {
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  decltype(&cuptiGetVersion) GetVersion = nullptr;
  decltype(&cuptiGetTimestamp) GetTimestamp = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&cuptiActivityDisable) ActivityDisable = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) ActivityPushExternalCorrelationId = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) ActivityPopExternalCorrelationId = nullptr;

  std::string library;                         // the path dlopen took it from
  uint32_t version = 0;                        // cuptiGetVersion, e.g. 130001
  uint32_t built_version = CUPTI_API_VERSION;  // the headers memplan was built with
};

// The candidate paths in search order (before the loader's own search).
std::vector<std::string> CuptiCandidates();

// Loads CUPTI once per process; later calls return the same result. On
// failure returns null and *err says where it looked and why each failed
// ("CUPTI unavailable: ...").
const CuptiApi* LoadCupti(std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_PROFILER_CUPTI_API_H_
