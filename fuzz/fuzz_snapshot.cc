// libFuzzer target: the memory snapshot reader (`memplan compare`'s pickle).
// Any bytes either parse or are refused with a message, never crash or hang;
// a parsed snapshot written again reads back to the same curves.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "analyzer/report/memviz/predicted.h"
#include "analyzer/report/memviz/snapshot.h"

using namespace memplan::memviz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Snapshot s;
  std::string err;
  if (!ParseSnapshot(bytes, &s, &err)) {
    if (err.empty()) std::abort();
    return 0;
  }
  const SnapshotCurve c = CurveOf(s);
  Snapshot again;
  if (!ParseSnapshot(SnapshotToPickle(s), &again, &err)) std::abort();
  const SnapshotCurve d = CurveOf(again);
  if (c.allocated_peak != d.allocated_peak || c.reserved_peak != d.reserved_peak ||
      c.allocs != d.allocs || c.segments_end != d.segments_end)
    std::abort();
  return 0;
}
