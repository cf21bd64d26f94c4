#include "analyzer/report/memviz/snapshot.h"

#include <fmt/format.h>

#include <algorithm>

#include "analyzer/report/memviz/pickle.h"

namespace memplan::memviz {
namespace {

using Kind = PickleValue::Kind;

// Frames copied while reading, at most (shared frame lists could otherwise
// multiply a small file into a huge one).
constexpr int64_t kMaxFramesRead = 20'000'000;

void WriteFrames(PickleWriter* w, const std::vector<Frame>& frames) {
  w->BeginList();
  for (const Frame& f : frames) {
    w->BeginDict();
    w->Key("filename");
    w->String(f.filename);
    w->Key("line");
    w->Int(f.line);
    w->Key("name");
    w->String(f.name);
    w->EndDict();
  }
  w->EndList();
}

void IntField(PickleWriter* w, std::string_view key, int64_t value) {
  w->Key(key);
  w->Int(value);
}

// The reader: walks the unpickled value along the snapshot's layout.
class Reader {
 public:
  bool Read(const PickleValue& root, Snapshot* out, std::string* err) {
    err_ = err;
    if (root.kind != Kind::kDict)
      return Fail("/", fmt::format("expected a dict with \"segments\" and \"device_traces\" "
                                   "(torch.cuda.memory._snapshot()), found a {}",
                                   PickleKindName(root.kind)));
    const PickleValue* segments = root.Find("segments");
    const PickleValue* traces = root.Find("device_traces");
    if (segments == nullptr)
      return Fail("/",
                  "expected a dict with \"segments\" (torch.cuda.memory._snapshot()), found "
                  "no such key");
    if (!IsList(*segments)) return Fail("/segments", Expected("a list", *segments));
    if (traces != nullptr && !IsList(*traces))
      return Fail("/device_traces", Expected("a list", *traces));
    // The device: the first with a non-empty trace, else the first segment's.
    int device = -1;
    if (traces != nullptr) {
      for (size_t d = 0; d < traces->items.size() && device < 0; ++d) {
        if (!IsList(*traces->items[d]))
          return Fail(fmt::format("/device_traces/{}", d), Expected("a list", *traces->items[d]));
        if (!traces->items[d]->items.empty()) device = static_cast<int>(d);
      }
    }
    if (device < 0 && !segments->items.empty()) {
      int64_t d = 0;
      if (!OptionalInt(*segments->items[0], "device", "/segments/0", &d)) return false;
      device = static_cast<int>(d);
    }
    out->device = std::max(device, 0);
    if (const PickleValue* settings = root.Find("allocator_settings");
        settings != nullptr && settings->kind == Kind::kDict) {
      const PickleValue* conf = settings->Find("PYTORCH_CUDA_ALLOC_CONF");
      if (conf != nullptr && conf->kind == Kind::kString) out->alloc_conf = conf->text;
    }
    for (size_t i = 0; i < segments->items.size(); ++i) {
      const std::string where = fmt::format("/segments/{}", i);
      int64_t seg_device = 0;
      if (!OptionalInt(*segments->items[i], "device", where, &seg_device)) return false;
      if (seg_device != out->device) continue;
      SnapshotSegment s;
      if (!ReadSegment(*segments->items[i], where, &s)) return false;
      out->segments.push_back(std::move(s));
    }
    device_ = out->device;
    if (traces != nullptr && out->device < static_cast<int>(traces->items.size())) {
      const PickleValue& trace = *traces->items[out->device];
      out->trace.reserve(trace.items.size());
      for (size_t i = 0; i < trace.items.size(); ++i) {
        TraceRecord r;
        if (!ReadRecord(*trace.items[i], i, &r)) return false;
        out->trace.push_back(std::move(r));
      }
    }
    return true;
  }

 private:
  static bool IsList(const PickleValue& v) {
    return v.kind == Kind::kList || v.kind == Kind::kTuple;
  }
  static std::string Expected(const char* what, const PickleValue& v) {
    return fmt::format("expected {}, found a {}", what, PickleKindName(v.kind));
  }
  bool Fail(const std::string& where, const std::string& what) {
    *err_ = where + ": " + what;
    return false;
  }
  bool NeedDict(const PickleValue& v, const std::string& where) {
    return v.kind == Kind::kDict || Fail(where, Expected("a dict", v));
  }
  bool Int(const PickleValue& dict, const char* key, const std::string& where, int64_t* out) {
    const PickleValue* v = dict.Find(key);
    if (v == nullptr) return Fail(where, fmt::format("expected key \"{}\", found none", key));
    if (v->kind != Kind::kInt) return Fail(where + "/" + key, Expected("an int", *v));
    *out = v->integer;
    return true;
  }
  bool OptionalInt(const PickleValue& dict, const char* key, const std::string& where,
                   int64_t* out) {
    if (!NeedDict(dict, where)) return false;
    const PickleValue* v = dict.Find(key);
    if (v == nullptr || v->kind == Kind::kNone) return true;
    if (v->kind != Kind::kInt) return Fail(where + "/" + key, Expected("an int", *v));
    *out = v->integer;
    return true;
  }
  bool Str(const PickleValue& dict, const char* key, const std::string& where, std::string* out) {
    const PickleValue* v = dict.Find(key);
    if (v == nullptr) return Fail(where, fmt::format("expected key \"{}\", found none", key));
    if (v->kind != Kind::kString) return Fail(where + "/" + key, Expected("a str", *v));
    *out = v->text;
    return true;
  }
  bool ReadFrames(const PickleValue& dict, const std::string& where, std::vector<Frame>* out) {
    const PickleValue* frames = dict.Find("frames");
    if (frames == nullptr || frames->kind == Kind::kNone) return true;
    if (!IsList(*frames)) return Fail(where + "/frames", Expected("a list", *frames));
    frames_read_ += static_cast<int64_t>(frames->items.size());
    if (frames_read_ > kMaxFramesRead)
      return Fail(where + "/frames",
                  fmt::format("more than {} frames in all; refusing to expand the file further",
                              kMaxFramesRead));
    out->reserve(frames->items.size());
    for (size_t i = 0; i < frames->items.size(); ++i) {
      const PickleValue& f = *frames->items[i];
      const std::string fw = fmt::format("{}/frames/{}", where, i);
      if (!NeedDict(f, fw)) return false;
      Frame frame;
      if (const PickleValue* v = f.Find("filename"); v != nullptr && v->kind == Kind::kString)
        frame.filename = v->text;
      if (const PickleValue* v = f.Find("name"); v != nullptr && v->kind == Kind::kString)
        frame.name = v->text;
      if (const PickleValue* v = f.Find("line"); v != nullptr && v->kind == Kind::kInt)
        frame.line = v->integer;
      out->push_back(std::move(frame));
    }
    return true;
  }
  bool ReadSegment(const PickleValue& seg, const std::string& where, SnapshotSegment* out) {
    if (!NeedDict(seg, where) || !Int(seg, "address", where, &out->address) ||
        !Int(seg, "total_size", where, &out->total_size))
      return false;
    if (const PickleValue* t = seg.Find("segment_type"); t != nullptr && t->kind == Kind::kString)
      out->is_small = t->text == "small";
    if (const PickleValue* e = seg.Find("is_expandable"); e != nullptr && e->kind == Kind::kBool)
      out->is_expandable = e->boolean;
    const PickleValue* blocks = seg.Find("blocks");
    if (blocks == nullptr) return Fail(where, "expected key \"blocks\", found none");
    if (!IsList(*blocks)) return Fail(where + "/blocks", Expected("a list", *blocks));
    int64_t address = out->address;
    for (size_t i = 0; i < blocks->items.size(); ++i) {
      const PickleValue& b = *blocks->items[i];
      const std::string bw = fmt::format("{}/blocks/{}", where, i);
      SnapshotBlock block;
      block.address = address;
      if (!NeedDict(b, bw) || !Int(b, "size", bw, &block.size) ||
          !OptionalInt(b, "address", bw, &block.address) || !Str(b, "state", bw, &block.state))
        return false;
      block.requested_size = block.state == "inactive" ? 0 : block.size;
      if (!OptionalInt(b, "requested_size", bw, &block.requested_size) ||
          !ReadFrames(b, bw, &block.frames))
        return false;
      address = block.address + block.size;
      out->blocks.push_back(std::move(block));
    }
    return true;
  }
  bool ReadRecord(const PickleValue& e, size_t index, TraceRecord* out) {
    // Paths are built only on failure: traces hold millions of entries.
    auto where = [&] { return fmt::format("/device_traces/{}/{}", device_, index); };
    if (e.kind != Kind::kDict) return Fail(where(), Expected("a dict", e));
    const PickleValue* action = e.Find("action");
    const PickleValue* addr = e.Find("addr");
    const PickleValue* size = e.Find("size");
    if (action == nullptr || addr == nullptr || size == nullptr)
      return Fail(where(), "expected keys \"action\", \"addr\" and \"size\"");
    if (action->kind != Kind::kString) return Fail(where() + "/action", Expected("a str", *action));
    if (addr->kind != Kind::kInt) return Fail(where() + "/addr", Expected("an int", *addr));
    if (size->kind != Kind::kInt) return Fail(where() + "/size", Expected("an int", *size));
    out->action = action->text;
    out->address = addr->integer;
    out->size = size->integer;
    if (const PickleValue* t = e.Find("time_us"); t != nullptr && t->kind == Kind::kInt)
      out->time_us = t->integer;
    if (const PickleValue* f = e.Find("device_free"); f != nullptr && f->kind == Kind::kInt)
      out->device_free = f->integer;
    if (e.Find("frames") != nullptr) return ReadFrames(e, where(), &out->frames);
    return true;
  }

  std::string* err_ = nullptr;
  int device_ = 0;
  int64_t frames_read_ = 0;
};

}  // namespace

std::string SnapshotToPickle(const Snapshot& snapshot) {
  PickleWriter w;
  w.BeginDict();
  w.Key("segments");
  w.BeginList();
  for (const SnapshotSegment& s : snapshot.segments) {
    int64_t allocated = 0, requested = 0;
    for (const SnapshotBlock& b : s.blocks) {
      if (b.state == "inactive") continue;
      allocated += b.size;
      requested += b.requested_size;
    }
    w.BeginDict();
    IntField(&w, "device", snapshot.device);
    IntField(&w, "address", s.address);
    IntField(&w, "total_size", s.total_size);
    IntField(&w, "allocated_size", allocated);
    IntField(&w, "active_size", allocated);
    IntField(&w, "requested_size", requested);
    IntField(&w, "stream", 0);
    w.Key("segment_type");
    w.String(s.is_small ? "small" : "large");
    w.Key("segment_pool_id");
    w.BeginTuple();
    w.Int(0);
    w.Int(0);
    w.EndTuple();
    w.Key("is_expandable");
    w.Bool(s.is_expandable);
    w.Key("frames");
    WriteFrames(&w, {});
    w.Key("blocks");
    w.BeginList();
    for (const SnapshotBlock& b : s.blocks) {
      w.BeginDict();
      IntField(&w, "address", b.address);
      IntField(&w, "size", b.size);
      IntField(&w, "requested_size", b.requested_size);
      w.Key("state");
      w.String(b.state);
      w.Key("frames");
      WriteFrames(&w, b.frames);
      w.EndDict();
    }
    w.EndList();
    w.EndDict();
  }
  w.EndList();
  w.Key("device_traces");
  w.BeginList();
  for (int d = 0; d <= snapshot.device; ++d) {
    w.BeginList();
    if (d == snapshot.device) {
      for (const TraceRecord& r : snapshot.trace) {
        w.BeginDict();
        w.Key("action");
        w.String(r.action);
        IntField(&w, "addr", r.address);
        IntField(&w, "size", r.size);
        IntField(&w, "stream", 0);
        IntField(&w, "time_us", r.time_us);
        if (r.action == "oom") IntField(&w, "device_free", r.device_free);
        w.Key("frames");
        WriteFrames(&w, r.frames);
        w.EndDict();
      }
    }
    w.EndList();
  }
  w.EndList();
  w.Key("allocator_settings");
  w.BeginDict();
  w.Key("PYTORCH_CUDA_ALLOC_CONF");
  w.String(snapshot.alloc_conf);
  w.EndDict();
  w.EndDict();
  return w.Finish();
}

bool ParseSnapshot(std::string_view bytes, Snapshot* snapshot, std::string* err) {
  PickleDoc doc;
  std::string perr;
  if (!ParsePickle(bytes, &doc, &perr)) {
    *err = "not a readable pickle: " + perr;
    return false;
  }
  *snapshot = Snapshot{};
  return Reader().Read(*doc.root, snapshot, err);
}

}  // namespace memplan::memviz
