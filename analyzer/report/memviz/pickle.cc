#include "analyzer/report/memviz/pickle.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>

#include "analyzer/base/enum_table.h"

namespace memplan::memviz {
namespace {

using Kind = PickleValue::Kind;

// Opcodes that would import, call or look up Python objects.
const char* RefusedOpcodeName(uint8_t op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    default:
      return nullptr;
  }
}

class Parser {
 public:
  Parser(std::string_view bytes, PickleDoc* doc) : in_(bytes), doc_(doc) {}

  bool Run(std::string* err) {
    while (true) {
      if (pos_ >= in_.size()) {
        op_pos_ = pos_;
        return Fail("truncated: no STOP opcode", err);
      }
      op_pos_ = pos_;
      const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
      if (op == '.') break;
      if (!Step(op, err)) return false;
    }
    if (stack_.size() != 1 || !marks_.empty())
      return Fail(fmt::format("STOP with {} values and {} marks on the stack (expected 1 and 0)",
                              stack_.size(), marks_.size()),
                  err);
    if (pos_ != in_.size())
      return Fail(fmt::format("{} trailing bytes after STOP", in_.size() - pos_), err);
    doc_->root = stack_.back();
    return true;
  }

 private:
  bool Fail(const std::string& what, std::string* err) {
    *err = fmt::format("byte {}: {}", op_pos_, what);
    return false;
  }

  PickleValue* New(Kind kind) {
    PickleValue& v = doc_->arena.emplace_back();
    v.kind = kind;
    return &v;
  }
  bool Push(PickleValue* v) {
    stack_.push_back(v);
    return true;
  }
  bool Read(size_t n, std::string_view* out, std::string* err) {
    if (in_.size() - pos_ < n)
      return Fail(fmt::format("truncated: needs {} more bytes, {} left", n, in_.size() - pos_),
                  err);
    *out = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool ReadUnsigned(size_t n, uint64_t* out, std::string* err) {
    std::string_view b;
    if (!Read(n, &b, err)) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
    *out = v;
    return true;
  }
  bool ReadLine(std::string_view* out, std::string* err) {
    size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) return Fail("truncated: text argument has no newline", err);
    *out = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }
  // No value above the topmost mark.
  bool Empty() const {
    return stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back());
  }
  bool Pop(PickleValue** out, std::string* err) {
    if (Empty()) return Fail("stack underflow", err);
    *out = stack_.back();
    stack_.pop_back();
    return true;
  }
  PickleValue* Top() { return stack_.back(); }
  // The values above the topmost mark, which is removed.
  bool PopMark(std::vector<PickleValue*>* out, std::string* err) {
    if (marks_.empty()) return Fail("no MARK on the stack", err);
    const size_t at = marks_.back();
    marks_.pop_back();
    out->assign(stack_.begin() + static_cast<std::ptrdiff_t>(at), stack_.end());
    stack_.resize(at);
    return true;
  }
  bool NeedTop(Kind kind, const char* opname, std::string* err) {
    if (Empty()) return Fail(fmt::format("{} on an empty stack", opname), err);
    if (Top()->kind != kind)
      return Fail(fmt::format("{} on a {} (expected a {})", opname, PickleKindName(Top()->kind),
                              PickleKindName(kind)),
                  err);
    return true;
  }
  bool SetItems(PickleValue* dict, const std::vector<PickleValue*>& kv, std::string* err) {
    if (kv.size() % 2 != 0) return Fail("SETITEMS with an odd number of values", err);
    for (size_t i = 0; i < kv.size(); i += 2) SetItem(dict, kv[i], kv[i + 1]);
    return true;
  }
  static bool SameKey(const PickleValue* a, const PickleValue* b) {
    if (a == b) return true;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
      case Kind::kString:
      case Kind::kBytes:
        return a->text == b->text;
      case Kind::kInt:
        return a->integer == b->integer;
      case Kind::kBool:
        return a->boolean == b->boolean;
      case Kind::kNone:
        return true;
      default:
        return false;
    }
  }
  static void SetItem(PickleValue* dict, PickleValue* key, PickleValue* value) {
    // Snapshot dicts have a handful of keys; a linear scan keeps Python's
    // replace-on-repeat rule without hashing.
    if (dict->entries.size() <= 64) {
      for (auto& [k, v] : dict->entries)
        if (SameKey(k, key)) {
          v = value;
          return;
        }
    }
    dict->entries.emplace_back(key, value);
  }
  bool Memo(uint64_t index, std::string* err) {
    if (Empty()) return Fail("PUT on an empty stack", err);
    memo_[index] = Top();
    return true;
  }
  bool Get(uint64_t index, std::string* err) {
    auto it = memo_.find(index);
    if (it == memo_.end())
      return Fail(fmt::format("GET of memo {} that was never PUT", index), err);
    return Push(it->second);
  }
  bool Int(int64_t v) {
    PickleValue* p = New(Kind::kInt);
    p->integer = v;
    return Push(p);
  }
  bool Str(std::string_view s, Kind kind) {
    PickleValue* p = New(kind);
    p->text.assign(s);
    return Push(p);
  }
  // LONG1/LONG4: little-endian two's complement, at most 64 bits of value.
  bool Long(std::string_view b, std::string* err) {
    auto byte = [&](size_t i) { return static_cast<uint64_t>(static_cast<uint8_t>(b[i])); };
    if (b.empty()) return Int(0);
    const bool negative = (byte(b.size() - 1) & 0x80) != 0;
    if (b.size() > 8) {
      for (size_t i = 8; i < b.size(); ++i)
        if (byte(i) != (negative ? 0xffu : 0x00u)) return Fail("integer wider than 64 bits", err);
      if (((byte(7) & 0x80) != 0) != negative) return Fail("integer wider than 64 bits", err);
    }
    uint64_t v = 0;
    const size_t n = std::min<size_t>(b.size(), 8);
    for (size_t i = 0; i < n; ++i) v |= byte(i) << (8 * i);
    if (negative && n < 8) v |= ~uint64_t{0} << (8 * n);
    return Int(static_cast<int64_t>(v));
  }
  bool TextInt(std::string_view line, std::string* err) {
    if (!line.empty() && line.back() == 'L') line.remove_suffix(1);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || end != line.data() + line.size())
      return Fail(fmt::format("bad integer text \"{}\"", line), err);
    return Int(v);
  }
  bool TextIndex(std::string_view line, uint64_t* out, std::string* err) {
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), *out);
    if (ec != std::errc() || end != line.data() + line.size())
      return Fail(fmt::format("bad memo index \"{}\"", line), err);
    return true;
  }

  bool Step(uint8_t op, std::string* err) {
    if (const char* refused = RefusedOpcodeName(op))
      return Fail(fmt::format("opcode {} (0x{:02x}) would construct a Python object; a memory "
                              "snapshot holds only dicts, lists, strings and numbers, so this "
                              "pickle is not loaded",
                              refused, op),
                  err);
    std::string_view b;
    uint64_t n = 0;
    std::vector<PickleValue*> items;
    PickleValue* v = nullptr;
    switch (op) {
      case 0x80:  // PROTO
        if (!ReadUnsigned(1, &n, err)) return false;
        if (n > 5) return Fail(fmt::format("pickle protocol {} (this reader knows 0-5)", n), err);
        return true;
      case 0x95:  // FRAME: a length hint only
        return ReadUnsigned(8, &n, err);
      case '(':
        marks_.push_back(stack_.size());
        return true;
      case '0':
        return Pop(&v, err);
      case '1':
        return PopMark(&items, err);
      case '2':
        if (Empty()) return Fail("DUP on an empty stack", err);
        return Push(Top());
      case 'N':
        return Push(New(Kind::kNone));
      case 0x88:
      case 0x89:
        v = New(Kind::kBool);
        v->boolean = op == 0x88;
        return Push(v);
      case 'J':
        if (!ReadUnsigned(4, &n, err)) return false;
        return Int(static_cast<int32_t>(static_cast<uint32_t>(n)));
      case 'K':
        if (!ReadUnsigned(1, &n, err)) return false;
        return Int(static_cast<int64_t>(n));
      case 'M':
        if (!ReadUnsigned(2, &n, err)) return false;
        return Int(static_cast<int64_t>(n));
      case 0x8a:  // LONG1
        if (!ReadUnsigned(1, &n, err) || !Read(n, &b, err)) return false;
        return Long(b, err);
      case 0x8b:  // LONG4
        if (!ReadUnsigned(4, &n, err) || !Read(n, &b, err)) return false;
        return Long(b, err);
      case 'I':
        if (!ReadLine(&b, err)) return false;
        if (b == "00" || b == "01") {
          v = New(Kind::kBool);
          v->boolean = b == "01";
          return Push(v);
        }
        return TextInt(b, err);
      case 'L':
        if (!ReadLine(&b, err)) return false;
        return TextInt(b, err);
      case 'G': {
        if (!Read(8, &b, err)) return false;
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(b[i]);
        v = New(Kind::kFloat);
        v->real = std::bit_cast<double>(bits);
        return Push(v);
      }
      case 'F': {
        if (!ReadLine(&b, err)) return false;
        v = New(Kind::kFloat);
        auto [end, ec] = std::from_chars(b.data(), b.data() + b.size(), v->real);
        if (ec != std::errc() || end != b.data() + b.size())
          return Fail(fmt::format("bad float text \"{}\"", b), err);
        return Push(v);
      }
      case 'X':  // BINUNICODE
      case 'T':  // BINSTRING
      case 'B':  // BINBYTES
        if (!ReadUnsigned(4, &n, err) || !Read(n, &b, err)) return false;
        return Str(b, op == 'B' ? Kind::kBytes : Kind::kString);
      case 0x8c:  // SHORT_BINUNICODE
      case 'U':   // SHORT_BINSTRING
      case 'C':   // SHORT_BINBYTES
        if (!ReadUnsigned(1, &n, err) || !Read(n, &b, err)) return false;
        return Str(b, op == 'C' ? Kind::kBytes : Kind::kString);
      case 0x8d:  // BINUNICODE8
      case 0x8e:  // BINBYTES8
      case 0x96:  // BYTEARRAY8
        if (!ReadUnsigned(8, &n, err) || !Read(n, &b, err)) return false;
        return Str(b, op == 0x8d ? Kind::kString : Kind::kBytes);
      case 'S':
      case 'V':
        return Fail(fmt::format("protocol-0 {} opcode (escaped text) is not supported; save "
                                "the snapshot with pickle protocol 2 or later",
                                op == 'S' ? "STRING" : "UNICODE"),
                    err);
      case '}':
        return Push(New(Kind::kDict));
      case ']':
        return Push(New(Kind::kList));
      case ')':
        return Push(New(Kind::kTuple));
      case 0x8f:
        return Push(New(Kind::kSet));
      case 'd':
        if (!PopMark(&items, err)) return false;
        v = New(Kind::kDict);
        if (!SetItems(v, items, err)) return false;
        return Push(v);
      case 'l':
      case 't':
      case 0x91:  // FROZENSET
        if (!PopMark(&items, err)) return false;
        v = New(op == 'l' ? Kind::kList : op == 't' ? Kind::kTuple : Kind::kSet);
        v->items = std::move(items);
        return Push(v);
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t count = op - 0x84;
        if (stack_.size() < count + (marks_.empty() ? 0 : marks_.back()))
          return Fail("stack underflow", err);
        v = New(Kind::kTuple);
        v->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(count), stack_.end());
        stack_.resize(stack_.size() - count);
        return Push(v);
      }
      case 'a':
        if (!Pop(&v, err) || !NeedTop(Kind::kList, "APPEND", err)) return false;
        Top()->items.push_back(v);
        return true;
      case 'e':
        if (!PopMark(&items, err) || !NeedTop(Kind::kList, "APPENDS", err)) return false;
        Top()->items.insert(Top()->items.end(), items.begin(), items.end());
        return true;
      case 0x90:  // ADDITEMS
        if (!PopMark(&items, err) || !NeedTop(Kind::kSet, "ADDITEMS", err)) return false;
        Top()->items.insert(Top()->items.end(), items.begin(), items.end());
        return true;
      case 's': {
        PickleValue* key = nullptr;
        if (!Pop(&v, err) || !Pop(&key, err) || !NeedTop(Kind::kDict, "SETITEM", err)) return false;
        SetItem(Top(), key, v);
        return true;
      }
      case 'u':
        if (!PopMark(&items, err) || !NeedTop(Kind::kDict, "SETITEMS", err)) return false;
        return SetItems(Top(), items, err);
      case 'q':
        if (!ReadUnsigned(1, &n, err)) return false;
        return Memo(n, err);
      case 'r':
        if (!ReadUnsigned(4, &n, err)) return false;
        return Memo(n, err);
      case 'p':
        if (!ReadLine(&b, err) || !TextIndex(b, &n, err)) return false;
        return Memo(n, err);
      case 0x94:
        return Memo(memo_.size(), err);
      case 'h':
        if (!ReadUnsigned(1, &n, err)) return false;
        return Get(n, err);
      case 'j':
        if (!ReadUnsigned(4, &n, err)) return false;
        return Get(n, err);
      case 'g':
        if (!ReadLine(&b, err) || !TextIndex(b, &n, err)) return false;
        return Get(n, err);
      default:
        return Fail(fmt::format("unknown opcode 0x{:02x}", op), err);
    }
  }

  std::string_view in_;
  PickleDoc* doc_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  std::vector<PickleValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleValue*> memo_;
};

}  // namespace

const PickleValue* PickleValue::Find(std::string_view key) const {
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : entries)
    if (k->kind == Kind::kString && k->text == key) return v;
  return nullptr;
}

namespace {

constexpr EnumName<Kind> kKindNames[] = {
    {Kind::kNone, "None"},  {Kind::kBool, "bool"},   {Kind::kInt, "int"},   {Kind::kFloat, "float"},
    {Kind::kString, "str"}, {Kind::kBytes, "bytes"}, {Kind::kList, "list"}, {Kind::kTuple, "tuple"},
    {Kind::kDict, "dict"},  {Kind::kSet, "set"},
};

}  // namespace

const char* PickleKindName(PickleValue::Kind kind) { return NameOf(kKindNames, kind, "?"); }

bool ParsePickle(std::string_view bytes, PickleDoc* doc, std::string* err) {
  doc->arena.clear();
  doc->root = nullptr;
  return Parser(bytes, doc).Run(err);
}

// ---- writer ----------------------------------------------------------------

PickleWriter::PickleWriter() { out_ = "\x80\x02"; }

void PickleWriter::None() { out_ += 'N'; }

void PickleWriter::Bool(bool value) { out_ += value ? '\x88' : '\x89'; }

void PickleWriter::Int(int64_t value) {
  if (value >= 0 && value < 256) {
    out_ += 'K';
    out_ += static_cast<char>(value);
    return;
  }
  if (value >= INT32_MIN && value <= INT32_MAX) {
    out_ += 'J';
    const uint32_t u = static_cast<uint32_t>(static_cast<int32_t>(value));
    for (int i = 0; i < 4; ++i) out_ += static_cast<char>((u >> (8 * i)) & 0xff);
    return;
  }
  // LONG1: the fewest little-endian two's-complement bytes that keep the sign.
  const uint64_t u = static_cast<uint64_t>(value);
  int n = 8;
  while (n > 1) {
    const int64_t shifted = value >> (8 * (n - 1) - 1);
    if (shifted != 0 && shifted != -1) break;
    --n;
  }
  out_ += '\x8a';
  out_ += static_cast<char>(n);
  for (int i = 0; i < n; ++i) out_ += static_cast<char>((u >> (8 * i)) & 0xff);
}

void PickleWriter::Float(double value) {
  out_ += 'G';
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
}

void PickleWriter::String(std::string_view value) {
  auto put_u32 = [this](uint32_t v) {
    for (int i = 0; i < 4; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  // Short strings are cheaper to repeat than to memoize.
  const bool memoize = value.size() > 4;
  if (memoize) {
    auto it = memo_.find(std::string(value));
    if (it != memo_.end()) {
      out_ += 'j';  // LONG_BINGET
      put_u32(it->second);
      return;
    }
  }
  out_ += 'X';  // BINUNICODE
  put_u32(static_cast<uint32_t>(value.size()));
  out_.append(value);
  if (memoize) {
    const uint32_t index = static_cast<uint32_t>(memo_.size());
    memo_.emplace(std::string(value), index);
    out_ += 'r';  // LONG_BINPUT
    put_u32(index);
  }
}

void PickleWriter::BeginDict() { out_ += "}("; }
void PickleWriter::EndDict() { out_ += 'u'; }
void PickleWriter::BeginList() { out_ += "]("; }
void PickleWriter::EndList() { out_ += 'e'; }
void PickleWriter::BeginTuple() { out_ += '('; }
void PickleWriter::EndTuple() { out_ += 't'; }

std::string PickleWriter::Finish() {
  out_ += '.';
  return std::move(out_);
}

}  // namespace memplan::memviz
