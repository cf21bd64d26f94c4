#include "profiler/cupti_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>

#ifndef MEMPLAN_CUPTI_BUILD_DIR
#define MEMPLAN_CUPTI_BUILD_DIR ""
#endif

namespace memplan {
namespace {

constexpr uint32_t kMajor = CUPTI_API_VERSION / 10000;

std::string SoName() { return fmt::format("libcupti.so.{}", kMajor); }

template <typename F>
bool Resolve(void* handle, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!*fn) *missing = name;
  return *fn != nullptr;
}

// Opens `path` and resolves every entry point; *why says what failed.
bool TryLoad(const std::string& path, CuptiApi* api, std::string* why) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *why = e ? e : "dlopen failed";
    return false;
  }
  std::string missing;
  bool ok =
      Resolve(h, "cuptiGetResultString", &api->GetResultString, &missing) &&
      Resolve(h, "cuptiGetVersion", &api->GetVersion, &missing) &&
      Resolve(h, "cuptiGetTimestamp", &api->GetTimestamp, &missing) &&
      Resolve(h, "cuptiActivityRegisterCallbacks", &api->ActivityRegisterCallbacks, &missing) &&
      Resolve(h, "cuptiActivityEnable", &api->ActivityEnable, &missing) &&
      Resolve(h, "cuptiActivityDisable", &api->ActivityDisable, &missing) &&
      Resolve(h, "cuptiActivityGetNextRecord", &api->ActivityGetNextRecord, &missing) &&
      Resolve(h, "cuptiActivityGetNumDroppedRecords", &api->ActivityGetNumDroppedRecords,
              &missing) &&
      Resolve(h, "cuptiActivityFlushAll", &api->ActivityFlushAll, &missing) &&
      Resolve(h, "cuptiActivityPushExternalCorrelationId", &api->ActivityPushExternalCorrelationId,
              &missing) &&
      Resolve(h, "cuptiActivityPopExternalCorrelationId", &api->ActivityPopExternalCorrelationId,
              &missing);
  if (!ok) {
    *why = "no symbol " + missing;
    dlclose(h);
    return false;
  }
  uint32_t version = 0;
  if (api->GetVersion(&version) != CUPTI_SUCCESS) {
    *why = "cuptiGetVersion failed";
    dlclose(h);
    return false;
  }
  if (version / 10000 != kMajor) {
    *why = fmt::format("CUPTI version {} (memplan was built with {}; major {} needed)", version,
                       CUPTI_API_VERSION, kMajor);
    dlclose(h);
    return false;
  }
  Dl_info info{};
  api->library = dladdr(reinterpret_cast<void*>(api->GetVersion), &info) && info.dli_fname
                     ? info.dli_fname
                     : path;
  api->version = version;
  return true;  // the handle stays open for the process
}

}  // namespace

std::vector<std::string> CuptiCandidates() {
  std::vector<std::string> out;
  const char* env = std::getenv("MEMPLAN_CUPTI_LIBRARY");
  if (env && *env) return {env};
  std::string so = SoName();
  std::string built = MEMPLAN_CUPTI_BUILD_DIR;
  if (!built.empty()) out.push_back(built + "/" + so);
  for (const char* dir : {"/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64",
                          "/usr/local/cuda/targets/x86_64-linux/lib"}) {
    std::string p = std::string(dir) + "/" + so;
    if (built.empty() || p != built + "/" + so) out.push_back(p);
  }
  out.push_back(so);  // the dynamic loader's own search
  return out;
}

const CuptiApi* LoadCupti(std::string* err) {
  static std::once_flag once;
  static CuptiApi* api = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& path : CuptiCandidates()) {
      CuptiApi candidate;
      std::string why;
      if (TryLoad(path, &candidate, &why)) {
        api = new CuptiApi(candidate);
        return;
      }
      tried += fmt::format("{}{}: {}", tried.empty() ? "" : "; ", path, why);
    }
    failure = "CUPTI unavailable: no usable " + SoName() + " (" + tried +
              "); set MEMPLAN_CUPTI_LIBRARY to its path";
  });
  if (!api) *err = failure;
  return api;
}

}  // namespace memplan
