// Python pickles of plain data: the format of PyTorch's memory snapshots
// (torch.cuda.memory._dump_snapshot writes one with pickle.dump).
//
// What it sees: bytes. What it returns: PickleWriter builds a protocol-2
// pickle of None, bools, 64-bit ints, floats, strings, lists, tuples and dicts;
// ParsePickle reads protocols 0-5 of the same kinds of values (plus bytes and
// sets) into an arena of PickleValues.
//
// Safety: ParsePickle never constructs Python objects. Every opcode that would
// import or call something (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
// NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID, EXT1/2/4, out-of-band buffers) is
// refused with its name and offset. Values live in one arena and refer to
// each other by pointer, so shared and even cyclic references (which the memo
// allows) cost nothing to hold or free; a walk over them must bound its depth.
//
// Complexity: writing and parsing are O(bytes); the arena holds at most one
// value per opcode.
#ifndef MEMPLAN_ANALYZER_REPORT_MEMVIZ_PICKLE_H_
#define MEMPLAN_ANALYZER_REPORT_MEMVIZ_PICKLE_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memplan::memviz {

// One unpickled value. `items` holds list, tuple and set elements; `entries`
// a dict's (key, value) pairs in insertion order (a repeated key replaces the
// value in place, as in Python). Pointers refer into the owning PickleDoc.
struct PickleValue {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kBytes, kList, kTuple, kDict, kSet };
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;  // kString (UTF-8) and kBytes
  std::vector<PickleValue*> items;
  std::vector<std::pair<PickleValue*, PickleValue*>> entries;

  // The value of string key `key` in a dict; nullptr when absent or not a dict.
  const PickleValue* Find(std::string_view key) const;
};

// The name of a kind as a Python user knows it ("dict", "int", ...).
const char* PickleKindName(PickleValue::Kind kind);

struct PickleDoc {
  std::deque<PickleValue> arena;
  const PickleValue* root = nullptr;
};

// Parses `bytes`. False with "byte <offset>: <reason>" in *err for truncated
// or malformed input, a refused opcode, an integer wider than 64 bits, or
// trailing bytes after STOP.
bool ParsePickle(std::string_view bytes, PickleDoc* doc, std::string* err);

// Writes a protocol-2 pickle. Containers are opened and closed in pairs; a
// dict takes alternating keys and values. Repeated strings are memoized.
class PickleWriter {
 public:
  PickleWriter();
  void None();
  void Bool(bool value);
  void Int(int64_t value);
  void Float(double value);
  void String(std::string_view value);
  void BeginDict();
  void EndDict();
  void BeginList();
  void EndList();
  void BeginTuple();
  void EndTuple();
  // Convenience: a string key followed by its value.
  void Key(std::string_view key) { String(key); }
  // Appends STOP and returns the pickle; the writer must not be used after.
  std::string Finish();

 private:
  std::string out_;
  std::unordered_map<std::string, uint32_t> memo_;
};

}  // namespace memplan::memviz

#endif  // MEMPLAN_ANALYZER_REPORT_MEMVIZ_PICKLE_H_
