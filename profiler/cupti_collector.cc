#include "profiler/cupti_collector.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "profiler/cupti_api.h"

namespace memplan {
namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kAlign = 8;
constexpr CUpti_ExternalCorrelationKind kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
// RUNTIME and DRIVER: CUPTI writes an external-correlation record only ahead
// of an API record, so without them no record would carry a step tag.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
};

const CuptiApi* g_api = nullptr;  // set by Start before any callback

// External ids: (repeat + 1) << 32 | (step + 2), so 0 is never used.
uint64_t EncodeTag(int repeat, int step) {
  return (static_cast<uint64_t>(repeat + 1) << 32) | static_cast<uint32_t>(step + 2);
}
StepTag DecodeTag(uint64_t id) {
  return {static_cast<int>(id >> 32) - 1, static_cast<int>(id & 0xffffffffu) - 2};
}

struct RawMemory {
  uint64_t ts;
  int64_t delta;  // +bytes (allocation) or -bytes (release, as the record says)
  uint64_t address;
  uint32_t correlation;
  bool async;
};
struct RawKernel {
  std::string name;
  uint64_t start, end;
  uint32_t correlation;
};

// What the completion callback collects (CUPTI calls it from its own thread).
struct Sink {
  std::mutex mu;
  std::vector<RawMemory> memory;
  std::vector<RawKernel> kernels;
  std::unordered_map<uint32_t, uint64_t> external;  // correlation id -> external id
  int64_t dropped = 0;
  int64_t api_records = 0;
};
Sink& TheSink() {
  static Sink* sink = new Sink;
  return *sink;
}

std::string CuptiText(CUptiResult r) {
  const char* s = nullptr;
  if (g_api) g_api->GetResultString(r, &s);
  return fmt::format("{} ({})", s ? s : "unknown CUPTI error", static_cast<int>(r));
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size,
                              size_t valid) {
  Sink& sink = TheSink();
  std::lock_guard<std::mutex> lock(sink.mu);
  CUpti_Activity* record = nullptr;
  while (valid > 0 && g_api->ActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_MEMORY2: {
        auto* m = reinterpret_cast<CUpti_ActivityMemory4*>(record);
        if (m->memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) break;
        int64_t bytes = static_cast<int64_t>(m->bytes);
        bool async = m->isAsync != 0;
        if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
          sink.memory.push_back({m->timestamp, bytes, m->address, m->correlationId, async});
        else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
          sink.memory.push_back({m->timestamp, -bytes, m->address, m->correlationId, async});
        break;
      }
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(record);
        sink.kernels.push_back({k->name ? k->name : "kernel", k->start, k->end, k->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* c = reinterpret_cast<CUpti_ActivityMemcpy6*>(record);
        sink.kernels.push_back({"[memcpy]", c->start, c->end, c->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* s = reinterpret_cast<CUpti_ActivityMemset4*>(record);
        sink.kernels.push_back({"[memset]", s->start, s->end, s->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        auto* x = reinterpret_cast<CUpti_ActivityExternalCorrelation*>(record);
        if (x->externalKind == kExternalKind) sink.external[x->correlationId] = x->externalId;
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER:
        ++sink.api_records;
        break;
      default:
        break;
    }
  }
  size_t dropped = 0;
  if (g_api->ActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
    sink.dropped += static_cast<int64_t>(dropped);
  std::free(buffer);
}

}  // namespace

bool CuptiCollector::Start(std::string* err) {
  const CuptiApi* api = LoadCupti(err);
  if (!api) return false;
  g_api = api;
  info_ = {api->library, api->version, api->built_version};
  Sink& sink = TheSink();
  {
    std::lock_guard<std::mutex> lock(sink.mu);
    sink.memory.clear();
    sink.kernels.clear();
    sink.external.clear();
    sink.dropped = sink.api_records = 0;
  }
  CUptiResult r = api->ActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  if (r != CUPTI_SUCCESS) {
    *err = "CUPTI unavailable: cuptiActivityRegisterCallbacks: " + CuptiText(r);
    return false;
  }
  for (CUpti_ActivityKind kind : kKinds) {
    r = api->ActivityEnable(kind);
    if (r != CUPTI_SUCCESS) {
      *err = fmt::format("CUPTI unavailable: cuptiActivityEnable(kind {}): {}",
                         static_cast<int>(kind), CuptiText(r));
      for (CUpti_ActivityKind k : kKinds) api->ActivityDisable(k);
      return false;
    }
  }
  started_ = true;
  return true;
}

void CuptiCollector::BeginStep(int step) {
  if (started_) g_api->ActivityPushExternalCorrelationId(kExternalKind, EncodeTag(repeat_, step));
}

void CuptiCollector::EndStep(int step) {
  uint64_t last = 0;
  if (started_) g_api->ActivityPopExternalCorrelationId(kExternalKind, &last);
}

bool CuptiCollector::Stop(CuptiRecords* out, std::string* err) {
  *out = CuptiRecords();
  if (!started_) return true;
  started_ = false;
  cudaError_t e = cudaDeviceSynchronize();
  CUptiResult r = g_api->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind k : kKinds) g_api->ActivityDisable(k);
  if (e != cudaSuccess) {
    *err = fmt::format("cudaDeviceSynchronize: {}", cudaGetErrorString(e));
    return false;
  }
  if (r != CUPTI_SUCCESS) {
    *err = "cuptiActivityFlushAll: " + CuptiText(r);
    return false;
  }
  Sink& sink = TheSink();
  std::lock_guard<std::mutex> lock(sink.mu);
  auto tag = [&](uint32_t correlation) {
    auto it = sink.external.find(correlation);
    return it == sink.external.end() ? StepTag() : DecodeTag(it->second);
  };
  // A release frees what was allocated at its address (its own byte count
  // may be absent).
  std::stable_sort(sink.memory.begin(), sink.memory.end(),
                   [](const RawMemory& a, const RawMemory& b) { return a.ts < b.ts; });
  std::unordered_map<uint64_t, int64_t> allocated;
  for (const RawMemory& m : sink.memory) {
    int64_t delta = m.delta;
    if (delta > 0) {
      allocated[m.address] = delta;
    } else {
      auto it = allocated.find(m.address);
      if (it != allocated.end()) {
        delta = -it->second;
        allocated.erase(it);
      }
    }
    out->memory.push_back({m.ts, delta, m.address, m.async, tag(m.correlation)});
    if (out->memory.back().tag.repeat < 0) ++out->untagged_memory;
  }
  for (const RawKernel& k : sink.kernels)
    out->kernels.push_back({k.name, k.start, k.end, tag(k.correlation)});
  std::stable_sort(
      out->kernels.begin(), out->kernels.end(),
      [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  out->dropped = sink.dropped;
  out->api_records = sink.api_records;
  out->external_records = static_cast<int64_t>(sink.external.size());
  sink.memory.clear();
  sink.kernels.clear();
  sink.external.clear();
  return true;
}

int64_t CuptiCollector::NowNs() {
  uint64_t ts = 0;
  if (g_api) g_api->GetTimestamp(&ts);
  return static_cast<int64_t>(ts);
}

}  // namespace memplan
