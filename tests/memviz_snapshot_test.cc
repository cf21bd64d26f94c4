// Memory snapshots: written and read back unchanged, read from Python's own
// pickle of one, errors name the path; curves and comparisons by hand.
#include <doctest/doctest.h>

#include <string>

#include "analyzer/report/memviz/pickle.h"
#include "analyzer/report/memviz/predicted.h"
#include "analyzer/report/memviz/snapshot.h"

namespace memplan::memviz {
namespace {

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

constexpr int64_t kBase = int64_t{1} << 40;

// One 2 MiB small segment: a 512 B block (100 B requested) and the rest free;
// its trace: segment_alloc, alloc.
Snapshot SmallSnapshot() {
  Snapshot s;
  const std::vector<Frame> frames = {Frame{"a.py", 3, "f"}};
  SnapshotSegment seg{kBase, 2097152, true, false, {}};
  seg.blocks.push_back(SnapshotBlock{kBase, 512, 100, "active_allocated", frames});
  seg.blocks.push_back(SnapshotBlock{kBase + 512, 2097152 - 512, 0, "inactive", {}});
  s.segments.push_back(seg);
  s.trace.push_back(TraceRecord{"segment_alloc", kBase, 2097152, 5, 0, frames});
  s.trace.push_back(TraceRecord{"alloc", kBase, 100, 6, 0, frames});
  return s;
}

void CheckSmall(const Snapshot& s) {
  REQUIRE(s.segments.size() == 1);
  CHECK(s.segments[0].address == kBase);
  CHECK(s.segments[0].total_size == 2097152);
  CHECK(s.segments[0].is_small);
  REQUIRE(s.segments[0].blocks.size() == 2);
  CHECK(s.segments[0].blocks[0].requested_size == 100);
  CHECK(s.segments[0].blocks[0].state == "active_allocated");
  REQUIRE(s.segments[0].blocks[0].frames.size() == 1);
  CHECK(s.segments[0].blocks[0].frames[0].filename == "a.py");
  CHECK(s.segments[0].blocks[0].frames[0].line == 3);
  CHECK(s.segments[0].blocks[0].frames[0].name == "f");
  CHECK(s.segments[0].blocks[1].address == kBase + 512);
  CHECK(s.segments[0].blocks[1].requested_size == 0);
  REQUIRE(s.trace.size() == 2);
  CHECK(s.trace[0].action == "segment_alloc");
  CHECK(s.trace[1].action == "alloc");
  CHECK(s.trace[1].address == kBase);
  CHECK(s.trace[1].size == 100);
  CHECK(s.trace[1].time_us == 6);
}

TEST_CASE("snapshot: written and read back") {
  Snapshot read;
  std::string err;
  REQUIRE_MESSAGE(ParseSnapshot(SnapshotToPickle(SmallSnapshot()), &read, &err), err);
  CheckSmall(read);
}

TEST_CASE("snapshot: Python's protocol-4 pickle of the same snapshot") {
  // pickle.dumps(d, protocol=4) of the dict SmallSnapshot() describes, with
  // one frames list shared by reference (as Python memoizes it).
  const std::string bytes = FromHex(
      "80049597010000000000007d94288c087365676d656e7473945d947d94288c06646576696365944b008c0761"
      "646472657373948a060000000000018c0a746f74616c5f73697a65944a000020008c0c7365676d656e745f74"
      "797065948c05736d616c6c948c0d69735f657870616e6461626c6594898c06626c6f636b73945d94287d9428"
      "68058a060000000000018c0473697a65944d00028c0e7265717565737465645f73697a65944b648c05737461"
      "7465948c106163746976655f616c6c6f6361746564948c066672616d6573945d947d94288c0866696c656e61"
      "6d65948c04612e7079948c046c696e65944b038c046e616d65948c0166947561757d942868058a0600020000"
      "0001680d4a00fe1f00680f8c08696e61637469766594756575618c0d6465766963655f747261636573945d94"
      "5d94287d94288c06616374696f6e948c0d7365676d656e745f616c6c6f63948c0461646472948a0600000000"
      "0001680d4a000020008c0774696d655f7573944b0568116812757d9428681f8c05616c6c6f639468218a0600"
      "0000000001680d4b6468224b0668116812756561752e");
  Snapshot read;
  std::string err;
  REQUIRE_MESSAGE(ParseSnapshot(bytes, &read, &err), err);
  CheckSmall(read);
}

std::string SnapshotError(void (*build)(PickleWriter*)) {
  PickleWriter w;
  build(&w);
  Snapshot s;
  std::string err;
  CHECK_FALSE(ParseSnapshot(w.Finish(), &s, &err));
  return err;
}

TEST_CASE("snapshot: what is not a snapshot is named by its path") {
  CHECK(SnapshotError([](PickleWriter* w) {
          w->BeginList();
          w->EndList();
        }) ==
        "/: expected a dict with \"segments\" and \"device_traces\" "
        "(torch.cuda.memory._snapshot()), found a list");
  CHECK(SnapshotError([](PickleWriter* w) {
          w->BeginDict();
          w->EndDict();
        }) ==
        "/: expected a dict with \"segments\" (torch.cuda.memory._snapshot()), found no such key");
  CHECK(SnapshotError([](PickleWriter* w) {
          w->BeginDict();
          w->Key("segments");
          w->BeginList();
          w->BeginDict();
          w->Key("address");
          w->Int(0);
          w->Key("total_size");
          w->String("big");
          w->EndDict();
          w->EndList();
          w->EndDict();
        }) == "/segments/0/total_size: expected an int, found a str");
  CHECK(SnapshotError([](PickleWriter* w) {
          w->BeginDict();
          w->Key("segments");
          w->BeginList();
          w->EndList();
          w->Key("device_traces");
          w->BeginList();
          w->BeginList();
          w->BeginDict();
          w->Key("action");
          w->String("alloc");
          w->Key("addr");
          w->Int(0);
          w->Key("size");
          w->None();
          w->EndDict();
          w->EndList();
          w->EndList();
          w->EndDict();
        }) == "/device_traces/0/0/size: expected an int, found a None");
  Snapshot s;
  std::string err;
  CHECK_FALSE(ParseSnapshot("\x80\x02}", &s, &err));
  CHECK(err == "not a readable pickle: byte 3: truncated: no STOP opcode");
}

TEST_CASE("snapshot: curves are rebuilt backwards from the end state") {
  // End: one 2 MiB segment holding 100 requested bytes. Before it: a 20 MiB
  // segment was allocated and freed, and a 1000 B tensor came and went.
  Snapshot s = SmallSnapshot();
  s.trace.insert(s.trace.begin(), {TraceRecord{"segment_alloc", 1, 20 << 20, 0, 0, {}},
                                   TraceRecord{"alloc", 1, 1000, 0, 0, {}},
                                   TraceRecord{"free_requested", 1, 1000, 0, 0, {}},
                                   TraceRecord{"free_completed", 1, 1000, 0, 0, {}},
                                   TraceRecord{"segment_free", 1, 20 << 20, 0, 0, {}}});
  const SnapshotCurve c = CurveOf(s);
  CHECK(c.reserved_end == 2097152);
  CHECK(c.allocated_end == 100);
  CHECK(c.allocated_peak == 1000);
  CHECK(c.reserved_peak == 20 << 20);
  CHECK(c.segments_end == 1);
  CHECK(c.allocs == 2);
}

TEST_CASE("snapshot: comparison finds the first alloc that differs") {
  Snapshot predicted = SmallSnapshot();
  predicted.trace.push_back(TraceRecord{"alloc", kBase + 512, 200, 7, 0, {Frame{"op", 9, "t"}}});
  Snapshot measured = predicted;
  measured.trace[2].size = 300;
  measured.trace[2].frames = {Frame{"model.py", 42, "forward"}};
  SnapshotComparison c;
  std::string err;
  REQUIRE_MESSAGE(CompareSnapshots(measured, predicted, &c, &err), err);
  CHECK(c.matching_allocs == 1);
  CHECK(c.first_divergence == 1);
  CHECK(c.measured_size_at_divergence == 300);
  CHECK(c.predicted_size_at_divergence == 200);
  CHECK(c.measured_frame_at_divergence == "model.py:42:forward");
  CHECK(c.predicted_frame_at_divergence == "op:9:t");
  CHECK(c.size_overlap == doctest::Approx(0.5));

  REQUIRE(CompareSnapshots(predicted, predicted, &c, &err));
  CHECK(c.first_divergence == -1);
  CHECK(c.matching_allocs == 2);
  CHECK(c.measured.allocated_peak == c.predicted.allocated_peak);

  Snapshot other = predicted;
  for (TraceRecord& r : other.trace) r.size += 1;
  CHECK_FALSE(CompareSnapshots(other, predicted, &c, &err));
  CHECK(err ==
        "the snapshot does not record this graph's step: 0 of its 2 distinct allocation sizes "
        "(0%) occur in the predicted step; expected at least 50% (a snapshot recorded while "
        "running this graph's training step)");
  // A recording that starts after the prediction's first alloc is aligned.
  Snapshot late = predicted;
  late.trace.erase(late.trace.begin() + 1);  // the 100 B alloc
  REQUIRE(CompareSnapshots(late, predicted, &c, &err));
  CHECK(c.aligned_at_predicted_alloc == 1);
  CHECK(c.matching_allocs == 1);
  CHECK(c.first_divergence == -1);

  Snapshot empty;
  CHECK_FALSE(CompareSnapshots(empty, predicted, &c, &err));
  CHECK(err ==
        "the snapshot's trace has no alloc entry: record it with "
        "torch.cuda.memory._record_memory_history() running before the step");
}

}  // namespace
}  // namespace memplan::memviz
