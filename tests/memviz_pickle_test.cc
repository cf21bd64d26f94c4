// Pickles: what Python's pickler writes is read, what PickleWriter writes
// Python reads (bytes checked against pickle.dumps), and unsafe or broken
// input is refused with the exact message.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "analyzer/report/memviz/pickle.h"

namespace memplan::memviz {
namespace {

using Kind = PickleValue::Kind;

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

std::string Refusal(const std::string& bytes) {
  PickleDoc doc;
  std::string err;
  CHECK_FALSE(ParsePickle(bytes, &doc, &err));
  return err;
}

TEST_CASE("pickle: Python's protocol-4 pickle of scalars (pickle.dumps([...], protocol=4))") {
  // [1, -1, 255, 256, 65535, 65536, -2**31, 2**31, 2**63-1, -2**63, 1.5,
  //  True, None, 'é', b'x', (1, 2), frozenset()]
  const std::string bytes = FromHex(
      "80049556000000000000005d94284b014affffffff4bff4d00014dffff4a000001004a000000808a05000000"
      "80008a08ffffffffffffff7f8a080000000000000080473ff8000000000000884e8c02c3a994430178944b01"
      "4b028694289194652e");
  PickleDoc doc;
  std::string err;
  REQUIRE_MESSAGE(ParsePickle(bytes, &doc, &err), err);
  const PickleValue& list = *doc.root;
  REQUIRE(list.kind == Kind::kList);
  REQUIRE(list.items.size() == 17);
  const int64_t ints[] = {1,         -1,        255,      256, 65535, 65536, -2147483648LL,
                          1LL << 31, INT64_MAX, INT64_MIN};
  for (int i = 0; i < 10; ++i) {
    CHECK(list.items[i]->kind == Kind::kInt);
    CHECK(list.items[i]->integer == ints[i]);
  }
  CHECK(list.items[10]->real == 1.5);
  CHECK(list.items[11]->kind == Kind::kBool);
  CHECK(list.items[11]->boolean);
  CHECK(list.items[12]->kind == Kind::kNone);
  CHECK(list.items[13]->text == "\xc3\xa9");
  CHECK(list.items[14]->kind == Kind::kBytes);
  CHECK(list.items[15]->kind == Kind::kTuple);
  CHECK(list.items[15]->items.size() == 2);
  CHECK(list.items[16]->kind == Kind::kSet);
}

TEST_CASE("pickle: PickleWriter's bytes are what Python's protocol-2 pickler reads") {
  PickleWriter w;
  w.BeginDict();
  w.Key("a");
  w.BeginList();
  w.Int(0);
  w.Int(255);
  w.Int(256);
  w.Int(-1);
  w.Int(int64_t{1} << 40);
  w.Int(INT64_MIN);
  w.Float(0.5);
  w.Bool(false);
  w.None();
  w.String("frames");
  w.String("frames");  // memoized: LONG_BINGET
  w.BeginTuple();
  w.Int(0);
  w.Int(0);
  w.EndTuple();
  w.EndList();
  w.EndDict();
  const std::string bytes = w.Finish();
  // Written by hand from pickletools' opcode table; python3 -c "import pickle;
  // print(pickle.loads(bytes.fromhex(...)))" prints {'a': [0, 255, 256, -1,
  // 1099511627776, -9223372036854775808, 0.5, False, None, 'frames', 'frames', (0, 0)]}.
  CHECK(bytes == FromHex("80027d285801000000615d284b004bff4a000100004affffffff8a060000000000018a"
                         "080000000000000080473fe0000000000000894e58060000006672616d657372000000"
                         "006a00000000284b004b007465752e"));
  PickleDoc doc;
  std::string err;
  REQUIRE_MESSAGE(ParsePickle(bytes, &doc, &err), err);
  const PickleValue* a = doc.root->Find("a");
  REQUIRE(a != nullptr);
  REQUIRE(a->items.size() == 12);
  CHECK(a->items[4]->integer == int64_t{1} << 40);
  CHECK(a->items[5]->integer == INT64_MIN);
  CHECK(a->items[10]->text == "frames");
}

TEST_CASE("pickle: shared and cyclic references are held, not copied") {
  // l = []; l.append(l); pickle.dumps(l, protocol=2)
  PickleDoc doc;
  std::string err;
  REQUIRE_MESSAGE(ParsePickle(FromHex("80025d71006800612e"), &doc, &err), err);
  REQUIRE(doc.root->items.size() == 1);
  CHECK(doc.root->items[0] == doc.root);
}

TEST_CASE("pickle: code-running opcodes are refused by name") {
  // pickle.dumps(os.system) style: GLOBAL 'posix system', then REDUCE.
  CHECK(Refusal("cposix\nsystem\n(S'touch /tmp/x'\ntR.") ==
        "byte 0: opcode GLOBAL (0x63) would construct a Python object; a memory snapshot holds "
        "only dicts, lists, strings and numbers, so this pickle is not loaded");
  CHECK(Refusal(FromHex("80025d93")) ==
        "byte 3: opcode STACK_GLOBAL (0x93) would construct a Python object; a memory snapshot "
        "holds only dicts, lists, strings and numbers, so this pickle is not loaded");
  CHECK(Refusal(FromHex("80024e52")) ==
        "byte 3: opcode REDUCE (0x52) would construct a Python object; a memory snapshot holds "
        "only dicts, lists, strings and numbers, so this pickle is not loaded");
}

TEST_CASE("pickle: broken input") {
  CHECK(Refusal("") == "byte 0: truncated: no STOP opcode");
  CHECK(Refusal(FromHex("80025d")) == "byte 3: truncated: no STOP opcode");
  CHECK(Refusal(FromHex("80028a090000000000000000012e")) == "byte 2: integer wider than 64 bits");
  CHECK(Refusal(FromHex("80024e2e00")) == "byte 3: 1 trailing bytes after STOP");
  CHECK(Refusal(FromHex("80024e4e2e")) ==
        "byte 4: STOP with 2 values and 0 marks on the stack (expected 1 and 0)");
  CHECK(Refusal(FromHex("800268")) == "byte 2: truncated: needs 1 more bytes, 0 left");
  CHECK(Refusal(FromHex("800268072e")) == "byte 2: GET of memo 7 that was never PUT");
  CHECK(Refusal(FromHex("800261")) == "byte 2: stack underflow");
  CHECK(Refusal(FromHex("80048c08627569")) == "byte 2: truncated: needs 8 more bytes, 3 left");
  CHECK(Refusal(FromHex("80024e4b01612e")) == "byte 5: APPEND on a None (expected a list)");
  CHECK(Refusal(FromHex("80062e")) == "byte 0: pickle protocol 6 (this reader knows 0-5)");
  CHECK(Refusal(FromHex("8002ff")) == "byte 2: unknown opcode 0xff");
  CHECK(Refusal(FromHex("80025801000000")) == "byte 2: truncated: needs 1 more bytes, 0 left");
  CHECK(Refusal("S'x'\n.") ==
        "byte 0: protocol-0 STRING opcode (escaped text) is not supported; save the snapshot "
        "with pickle protocol 2 or later");
}

}  // namespace
}  // namespace memplan::memviz
