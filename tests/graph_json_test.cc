// Importer of memplan.graph/1 (analyzer/import/graph_json.h): every error class is
// checked word for word, since the messages are a contract with users
// ("FILE: POINTER: what; expected what", SPEC section 5, exit code 2).
#include "analyzer/import/graph_json.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <string>

#include "analyzer/base/file_io.h"
#include "analyzer/ir/graph.h"

namespace memplan {
namespace {

// Parses `text` as "g.json"; returns "" on success, else the error message.
std::string Err(const std::string& text, const GraphLoadOptions& options = {}) {
  Graph g;
  std::string err;
  if (ParseGraph(text, "g.json", options, &g, &err)) return "";
  CHECK(!err.empty());
  return err;
}

// A document with the given tensors and ops arrays (JSON text of the elements).
std::string Doc(const std::string& tensors, const std::string& ops, const std::string& more = "") {
  return R"({"format": "memplan.graph/1", )" + more + R"("tensors": [)" + tensors +
         R"(], "ops": [)" + ops + "]}";
}

// Tensors most cases build on: an input x, a parameter w, activations h and l.
const std::string kBaseTensors = R"(
  {"id": "x", "shape": [2, 3], "dtype": "float32", "kind": "input"},
  {"id": "w", "shape": [3, 3], "dtype": "float32", "kind": "parameter"},
  {"id": "h", "shape": [2, 3], "dtype": "float32"},
  {"id": "l", "shape": [], "dtype": "float32"})";
const std::string kBaseOps = R"(
  {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
  {"id": "loss", "type": "sum", "inputs": ["h"], "outputs": ["l"]})";

GraphLoadOptions Set(const std::string& name, int64_t value) {
  GraphLoadOptions o;
  o.symbol_overrides.emplace_back(name, value);
  return o;
}

constexpr const char* kKinds =
    "expected one of input, parameter, buffer, activation, gradient, optimizer_state, "
    "temporary";

}  // namespace

TEST_CASE("graph_json: the base document used by the error cases is valid") {
  CHECK(Err(Doc(kBaseTensors, kBaseOps, R"("outputs": ["l"], )")) == "");
}

// ---------------------------------------------------------------------------
// Document level
// ---------------------------------------------------------------------------

TEST_CASE("graph_json: invalid JSON syntax") {
  CHECK(Err(R"({"format": "memplan.graph/1", "tensors": [})") ==
        "g.json: invalid JSON: parse error at line 1, column 43: syntax error while parsing "
        "value - unexpected '}'; expected '[', '{', or a literal");
  CHECK(Err("") ==
        "g.json: invalid JSON: parse error at line 1, column 1: syntax error while parsing "
        "value - unexpected end of input; expected '[', '{', or a literal");
  CHECK(Err("{\n\"format\": ") ==
        "g.json: invalid JSON: parse error at line 2, column 11: syntax error while parsing "
        "value - unexpected end of input; expected '[', '{', or a literal");
}

TEST_CASE("graph_json: nesting deeper than kMaxJsonDepth is refused quickly") {
  auto start = std::chrono::steady_clock::now();
  std::string deep(100000, '[');
  // Arrays at the root: the first error met is that the root is not an object.
  CHECK(Err(deep) == "g.json: (root): expected an object, found an array");
  std::string closed = deep + std::string(100000, ']');
  CHECK(Err(closed) == "g.json: (root): expected an object, found an array");
  std::string deep_objects;
  for (int i = 0; i < 100000; ++i) deep_objects += R"({"a":)";
  CHECK(Err(deep_objects) ==
        "g.json: nesting deeper than 64 levels at byte 320; expected at most 64 levels of "
        "arrays and objects");
  // Too deep, then unterminated: the depth is met first. Levels 1 and 2 are
  // the root object and "a", so the 63rd "[" of `deep` opens level 65.
  CHECK(Err(R"({"a": [1, )" + deep) ==
        "g.json: nesting deeper than 64 levels at byte 72; expected at most 64 levels of arrays "
        "and objects");
  // A syntax error first, then too deep: still refused for depth, not parsed.
  CHECK(Err(R"({"a": [1,, )" + deep) ==
        "g.json: nesting deeper than 64 levels at byte 73; expected at most 64 levels of arrays "
        "and objects");
  // Deep objects inside "source", which the importer would otherwise keep.
  std::string prefix = R"({"format": "memplan.graph/1", "source": )";
  std::string src;
  for (int i = 0; i < 100000; ++i) src += R"({"a":)";
  src += "1";
  for (int i = 0; i < 100000; ++i) src += "}";
  std::string doc = prefix + src + R"(, "tensors": [], "ops": []})";
  // The root object is level 1, so level 65 is the 64th "{" of "source".
  size_t byte = prefix.size() + 63 * std::string(R"({"a":)").size();
  CHECK(Err(doc) == "g.json: nesting deeper than 64 levels at byte " + std::to_string(byte) +
                        "; expected at most 64 levels of arrays and objects");
  // Brackets inside strings do not count.
  std::string in_string =
      R"({"format": "memplan.graph/1", "name": ")" + deep + R"(\"[[", "tensors": [], "ops": []})";
  CHECK(Err(in_string) == "");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 5.0);
}

TEST_CASE("graph_json: exactly kMaxJsonDepth levels are accepted") {
  // Root object (1) + "source" (2) + 62 nested objects = 64 levels.
  std::string src;
  for (int i = 0; i < 62; ++i) src += R"({"a":)";
  src += "1";
  src += std::string(62, '}');
  std::string ok =
      R"({"format": "memplan.graph/1", "source": {"x": )" + src + R"(}, "tensors": [], "ops": []})";
  CHECK(Err(ok) == "");
  std::string too_deep = R"({"format": "memplan.graph/1", "source": {"x": {"y": )" + src +
                         R"(}}, "tensors": [], "ops": []})";
  CHECK(Err(too_deep).find("nesting deeper than 64 levels") != std::string::npos);
}

TEST_CASE("graph_json: root not an object") {
  CHECK(Err("[]") == "g.json: (root): expected an object, found an array");
  CHECK(Err("42") == "g.json: (root): expected an object, found 42");
  CHECK(Err(R"("memplan.graph/1")") ==
        "g.json: (root): expected an object, found \"memplan.graph/1\"");
}

TEST_CASE("graph_json: format missing, of the wrong type, unsupported") {
  CHECK(Err(R"({"tensors": [], "ops": []})") ==
        "g.json: /format: missing; expected \"memplan.graph/1\"");
  CHECK(Err(R"({"format": 1, "tensors": [], "ops": []})") ==
        "g.json: /format: expected \"memplan.graph/1\", found 1");
  CHECK(Err(R"({"format": "memplan.graph/2", "tensors": [], "ops": []})") ==
        "g.json: /format: unsupported format \"memplan.graph/2\"; expected "
        "\"memplan.graph/1\"");
}

TEST_CASE("graph_json: name and source of the wrong type") {
  CHECK(Err(R"({"format": "memplan.graph/1", "name": 3, "tensors": [], "ops": []})") ==
        "g.json: /name: expected a string, found 3");
  CHECK(Err(R"({"format": "memplan.graph/1", "source": "torch", "tensors": [], "ops": []})") ==
        "g.json: /source: expected an object, found \"torch\"");
}

TEST_CASE("graph_json: source.target_device is cpu, cuda or absent") {
  auto with = [](const std::string& device) {
    return R"({"format": "memplan.graph/1", "source": {"framework": "pytorch", "target_device": )" +
           device + R"(}, "tensors": [], "ops": []})";
  };
  CHECK(Err(with(R"("tpu")")) ==
        "g.json: /source/target_device: unknown target device \"tpu\"; expected \"cpu\" or "
        "\"cuda\"");
  CHECK(Err(with(R"("CUDA")")) ==
        "g.json: /source/target_device: unknown target device \"CUDA\"; expected \"cpu\" or "
        "\"cuda\"");
  CHECK(Err(with("1")) ==
        "g.json: /source/target_device: unknown target device 1; expected \"cpu\" or \"cuda\"");
  CHECK(Err(with("null")) ==
        "g.json: /source/target_device: unknown target device null; expected \"cpu\" or "
        "\"cuda\"");
  for (const char* device : {"cpu", "cuda"}) {
    Graph g;
    std::string err;
    REQUIRE_MESSAGE(ParseGraph(with(std::string("\"") + device + "\""), "g.json", {}, &g, &err),
                    err);
    CHECK(g.target_device == device);
    // Written back with the rest of the source object.
    Graph again;
    REQUIRE_MESSAGE(ParseGraph(GraphToJson(g), "again.json", {}, &again, &err), err);
    CHECK(again.target_device == device);
  }
  Graph g;
  std::string err;
  REQUIRE(ParseGraph(R"({"format": "memplan.graph/1", "source": {"framework": "jax"},
                         "tensors": [], "ops": []})",
                     "g.json", {}, &g, &err));
  CHECK(g.target_device.empty());
}

TEST_CASE("graph_json: source.compile names a torch.compile backend or is absent") {
  auto with = [](const std::string& backend) {
    return R"({"format": "memplan.graph/1", "source": {"framework": "pytorch", "compile": )" +
           backend + R"(}, "tensors": [], "ops": []})";
  };
  CHECK(Err(with(R"("tvm")")) ==
        "g.json: /source/compile: unknown torch.compile backend \"tvm\"; expected "
        "\"aot_eager\" or \"inductor\"");
  CHECK(Err(with("true")) ==
        "g.json: /source/compile: unknown torch.compile backend true; expected \"aot_eager\" or "
        "\"inductor\"");
  for (const char* backend : {"aot_eager", "inductor"}) {
    Graph g;
    std::string err;
    REQUIRE_MESSAGE(ParseGraph(with(fmt::format("\"{}\"", backend)), "g.json", {}, &g, &err), err);
    CHECK(g.compile == backend);
    Graph again;  // written back with the rest of the source object
    REQUIRE_MESSAGE(ParseGraph(GraphToJson(g), "again.json", {}, &again, &err), err);
    CHECK(again.compile == backend);
  }
  Graph eager;
  std::string err;
  REQUIRE(ParseGraph(R"({"format": "memplan.graph/1", "source": {"framework": "pytorch"},
                         "tensors": [], "ops": []})",
                     "g.json", {}, &eager, &err));
  CHECK(eager.compile.empty());
}

TEST_CASE("graph_json: source.outputs_held is true, false or absent") {
  auto with = [](const std::string& held) {
    return R"({"format": "memplan.graph/1", "source": {"framework": "pytorch", "outputs_held": )" +
           held + R"(}, "tensors": [], "ops": []})";
  };
  CHECK(Err(with(R"("true")")) ==
        "g.json: /source/outputs_held: expected true or false, found \"true\"");
  CHECK(Err(with("1")) == "g.json: /source/outputs_held: expected true or false, found 1");
  CHECK(Err(with("null")) == "g.json: /source/outputs_held: expected true or false, found null");
  for (bool held : {true, false}) {
    Graph g;
    std::string err;
    REQUIRE_MESSAGE(ParseGraph(with(held ? "true" : "false"), "g.json", {}, &g, &err), err);
    REQUIRE(g.outputs_held.has_value());
    CHECK(*g.outputs_held == held);
    // Written back with the rest of the source object.
    Graph again;
    REQUIRE_MESSAGE(ParseGraph(GraphToJson(g), "again.json", {}, &again, &err), err);
    CHECK(again.outputs_held == held);
  }
  Graph g;
  std::string err;
  REQUIRE(ParseGraph(R"({"format": "memplan.graph/1", "source": {"framework": "jax"},
                         "tensors": [], "ops": []})",
                     "g.json", {}, &g, &err));
  CHECK(!g.outputs_held.has_value());
  REQUIRE(ParseGraph(R"({"format": "memplan.graph/1", "tensors": [], "ops": []})", "g.json", {}, &g,
                     &err));
  CHECK(!g.outputs_held.has_value());
}

// A graph of a symbolic export with source.warnings `warnings` (JSON text).
std::string WithExportWarnings(const std::string& warnings) {
  return R"({"format": "memplan.graph/1", "symbols": {"batch": 2, "seq": 8},
             "source": {"framework": "pytorch", "warnings": )" +
         warnings + R"(}, "tensors": [
    {"id": "x", "shape": ["batch", "seq"], "dtype": "float32", "kind": "input"},
    {"id": "w", "shape": ["seq", "seq"], "dtype": "float32", "kind": "parameter"},
    {"id": "h", "shape": ["batch", "seq"], "dtype": "float32"},
    {"id": "l", "shape": [], "dtype": "float32"}], "ops": [
    {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"], "workspace_bytes": 160},
    {"id": "loss", "type": "sum", "inputs": ["h"], "outputs": ["l"]}], "outputs": ["l"]})";
}

constexpr const char* kFrozen =
    R"({"kind": "frozen", "op": "fc", "field": "workspace_bytes", "value": 160,
        "symbols": ["batch"], "exported_at": {"batch": 2, "seq": 8}})";
constexpr const char* kDropped =
    R"({"kind": "dropped", "op": "loss", "field": "flops", "symbols": ["batch", "seq"],
        "exported_at": {"batch": 2, "seq": 8}})";

TEST_CASE("graph_json: source.warnings are read, and reported once --set leaves their sizes") {
  Graph g;
  std::string err;
  REQUIRE_MESSAGE(ParseGraph(WithExportWarnings(std::string("[") + kFrozen + ", " + kDropped + "]"),
                             "g.json", {}, &g, &err),
                  err);
  REQUIRE(g.export_warnings.size() == 2);
  const ExportWarning& w = g.export_warnings[0];
  CHECK(w.kind == ExportWarning::Kind::kFrozen);
  CHECK(w.op == "fc");
  CHECK(w.field == "workspace_bytes");
  CHECK(w.value == 160);
  CHECK(w.symbols == std::vector<std::string>{"batch"});
  CHECK(w.exported_at == std::vector<std::pair<std::string, int64_t>>{{"batch", 2}, {"seq", 8}});
  CHECK(g.export_warnings[1].kind == ExportWarning::Kind::kDropped);
  CHECK(g.export_warnings[1].value == -1);
  // At the exported sizes every entry holds: nothing to say.
  CHECK(ExportWarningsInEffect(g).empty());
  // Kept through `memplan lower` (written back with the source object).
  Graph again;
  REQUIRE_MESSAGE(ParseGraph(GraphToJson(g), "again.json", {}, &again, &err), err);
  CHECK(again.export_warnings.size() == 2);

  REQUIRE(ParseGraph(WithExportWarnings(std::string("[") + kFrozen + ", " + kDropped + "]"),
                     "g.json", Set("batch", 64), &g, &err));
  CHECK(ExportWarningsInEffect(g) ==
        std::vector<std::string>{
            "op \"fc\": workspace_bytes frozen at 160 B by the symbolic export at batch=2, seq=8 "
            "(not multilinear in batch); at batch=64 it may be larger",
            "op \"loss\": flops dropped by the symbolic export at batch=2, seq=8 (not "
            "multilinear in batch, seq); at batch=64 memplan estimates it from the op type and "
            "shapes"});
  // seq alone moves: the frozen workspace did not vary with it.
  REQUIRE(ParseGraph(WithExportWarnings(std::string("[") + kFrozen + ", " + kDropped + "]"),
                     "g.json", Set("seq", 4), &g, &err));
  std::vector<std::string> seq = ExportWarningsInEffect(g);
  REQUIRE(seq.size() == 1);
  CHECK(seq[0].find("op \"loss\": flops dropped") == 0);
  CHECK(seq[0].find("at seq=4 memplan estimates") != std::string::npos);
  // Past the limit, one line counts the rest.
  REQUIRE(ParseGraph(
      WithExportWarnings(std::string("[") + kFrozen + ", " + kDropped + ", " + kFrozen + "]"),
      "g.json", Set("batch", 3), &g, &err));
  std::vector<std::string> capped = ExportWarningsInEffect(g, 1);
  REQUIRE(capped.size() == 2);
  CHECK(capped[1] ==
        "and 2 more ops whose numbers the symbolic export froze or dropped (the graph's "
        "source.warnings)");
}

TEST_CASE("graph_json: a malformed source.warnings entry names its JSON pointer") {
  auto err = [](const std::string& warnings) { return Err(WithExportWarnings(warnings)); };
  CHECK(err("{}") == "g.json: /source/warnings: expected an array of warnings, found an object");
  CHECK(err("[1]") == "g.json: /source/warnings/0: expected an object, found 1");
  CHECK(err(R"([{"op": "fc"}])") ==
        "g.json: /source/warnings/0/kind: missing; expected \"frozen\" or \"dropped\"");
  CHECK(err(R"([{"kind": "stale"}])") ==
        "g.json: /source/warnings/0/kind: unknown kind \"stale\"; expected \"frozen\" or "
        "\"dropped\"");
  CHECK(err(R"([{"kind": "dropped"}])") ==
        "g.json: /source/warnings/0/op: missing; expected a non-empty string");
  CHECK(err(R"([{"kind": "dropped", "op": "nope"}])") ==
        "g.json: /source/warnings/0/op: unknown op \"nope\"; expected the id of an op in /ops");
  CHECK(err(R"([{"kind": "dropped", "op": "fc", "field": 3}])") ==
        "g.json: /source/warnings/0/field: expected a non-empty string, found 3");
  CHECK(err(R"([{"kind": "frozen", "op": "fc", "field": "workspace_bytes"}])") ==
        "g.json: /source/warnings/0/value: missing; expected the frozen value (a non-negative "
        "number)");
  CHECK(err(R"([{"kind": "frozen", "op": "fc", "field": "workspace_bytes", "value": -1}])") ==
        "g.json: /source/warnings/0/value: expected a non-negative number, found -1");
  const std::string head = R"([{"kind": "dropped", "op": "fc", "field": "flops", )";
  CHECK(err(R"([{"kind": "dropped", "op": "fc", "field": "flops"}])") ==
        "g.json: /source/warnings/0/symbols: missing; expected a non-empty array of symbols");
  CHECK(err(head + R"("symbols": []}])") ==
        "g.json: /source/warnings/0/symbols: expected a non-empty array of symbols, found an "
        "array");
  CHECK(err(head + R"("symbols": ["batch", ""]}])") ==
        "g.json: /source/warnings/0/symbols/1: expected a symbol name, found \"\"");
  CHECK(err(head + R"("symbols": ["batch"]}])") ==
        "g.json: /source/warnings/0/exported_at: missing; expected an object of symbol values");
  CHECK(err(head + R"("symbols": ["batch"], "exported_at": [2]}])") ==
        "g.json: /source/warnings/0/exported_at: expected an object of symbol values, found an "
        "array");
  CHECK(err(head + R"("symbols": ["batch"], "exported_at": {"batch": -2}}])") ==
        "g.json: /source/warnings/0/exported_at/batch: expected a non-negative integer, found -2");
  CHECK(err(std::string("[") + kFrozen + ", " + head.substr(1) +
            R"("symbols": ["batch", "seq"], "exported_at": {"batch": 2}}])") ==
        "g.json: /source/warnings/1/exported_at: no value for \"seq\"; expected one for each "
        "name in /source/warnings/1/symbols");
  // Unknown keys of an entry are ignored (forward compatibility).
  CHECK(err(std::string(R"([{"note": "x", )") + std::string(kFrozen).substr(1) + "]") == "");
}

TEST_CASE("graph_json: symbols must be non-negative integers") {
  CHECK(Err(Doc("", "", R"("symbols": {"batch": -1}, )")) ==
        "g.json: /symbols/batch: expected a non-negative integer, found -1");
  CHECK(Err(Doc("", "", R"("symbols": {"batch": 2.5}, )")) ==
        "g.json: /symbols/batch: expected a non-negative integer, found 2.5");
  CHECK(Err(Doc("", "", R"("symbols": {"batch": "64"}, )")) ==
        "g.json: /symbols/batch: expected a non-negative integer, found \"64\"");
  CHECK(Err(Doc("", "", R"("symbols": {"batch": 18446744073709551615}, )")) ==
        "g.json: /symbols/batch: expected a non-negative integer, found 18446744073709551615");
  CHECK(Err(Doc("", "", R"("symbols": [64], )")) ==
        "g.json: /symbols: expected an object, found an array");
}

// JSON pointers escape "/" as "~1" and "~" as "~0"
// (RFC 6901).
TEST_CASE("graph_json: symbol names in pointers are RFC 6901 escaped") {
  CHECK(Err(Doc("", "", R"("symbols": {"a/b~c": -1}, )")) ==
        "g.json: /symbols/a~1b~0c: expected a non-negative integer, found -1");
}

// ---------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------

TEST_CASE("graph_json: tensors missing or not an array") {
  CHECK(Err(R"({"format": "memplan.graph/1", "ops": []})") ==
        "g.json: /tensors: missing; expected an array of tensors");
  CHECK(Err(R"({"format": "memplan.graph/1", "tensors": {}, "ops": []})") ==
        "g.json: /tensors: expected an array of tensors, found an object");
}

TEST_CASE("graph_json: tensor not an object") {
  CHECK(Err(Doc(R"("x")", "")) == "g.json: /tensors/0: expected an object, found \"x\"");
  CHECK(Err(Doc(R"({"id": "a", "shape": [], "dtype": "float32"}, [1])", "")) ==
        "g.json: /tensors/1: expected an object, found an array");
}

TEST_CASE("graph_json: tensor id missing, empty, not a string") {
  CHECK(Err(Doc(R"({"shape": [1], "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/id: missing; expected a non-empty string");
  CHECK(Err(Doc(R"({"id": "", "shape": [1], "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/id: expected a non-empty string, found \"\"");
  CHECK(Err(Doc(R"({"id": 7, "shape": [1], "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/id: expected a non-empty string, found 7");
}

TEST_CASE("graph_json: duplicate tensor id") {
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": "float32"},
                   {"id": "b", "shape": [1], "dtype": "float32"},
                   {"id": "a", "shape": [1], "dtype": "float32"})",
                "")) ==
        "g.json: /tensors/2/id: duplicate tensor id \"a\"; first defined at "
        "/tensors/0");
}

TEST_CASE("graph_json: shape missing or not an array") {
  CHECK(Err(Doc(R"({"id": "a", "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/shape: missing; expected an array of dimensions");
  CHECK(Err(Doc(R"({"id": "a", "shape": 3, "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/shape: expected an array of dimensions, found 3");
}

TEST_CASE("graph_json: negative dimension") {
  CHECK(Err(Doc(R"({"id": "a", "shape": [2, -3], "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/shape/1: negative dimension -3; expected an integer >= 0 or a "
        "symbol name");
}

TEST_CASE("graph_json: streamed elements reuse member slots whatever each member holds") {
  // The reader fills each tensor's members into the slots the previous one
  // used: a slot that held an array, a string or a nested value must read
  // as what this element wrote, never as what the last one left.
  const std::string doc = Doc(
      R"({"id": "x", "shape": ["b", 3, 4, 5, 6], "dtype": "float32", "kind": "input",
          "meta": [1, {"k": [2, "c"]}, "d", [[]]]},
         {"id": "y", "shape": [7], "dtype": "float32", "meta": "plain"},
         {"id": "z", "shape": [], "dtype": "float16", "meta": [{"only": null}]},
         {"id": "w", "shape": ["b"], "dtype": "float32", "kind": "parameter", "meta": []})",
      R"({"id": "r", "type": "relu", "inputs": ["x", "w"], "outputs": ["y"],
          "note": [["a"], "b"]},
         {"id": "s", "type": "sum", "inputs": ["y"], "outputs": ["z"], "note": {"n": 1}})",
      R"("symbols": {"b": 2}, )");
  Graph g;
  std::string err;
  REQUIRE_MESSAGE(ParseGraph(doc, "g.json", {}, &g, &err), err);
  CHECK(g.tensors[0].extra == R"({"meta":[1,{"k":[2,"c"]},"d",[[]]]})");
  CHECK(g.tensors[1].extra == R"({"meta":"plain"})");
  CHECK(g.tensors[2].extra == R"({"meta":[{"only":null}]})");
  CHECK(g.tensors[3].extra == R"({"meta":[]})");
  REQUIRE(g.tensors[0].shape.size() == 5);
  CHECK(g.tensors[0].shape[0].symbol == "b");
  CHECK(g.tensors[0].shape[0].value == 2);
  CHECK(g.tensors[0].shape[4].value == 6);
  REQUIRE(g.tensors[1].shape.size() == 1);
  CHECK(g.tensors[1].shape[0].symbol.empty());
  CHECK(g.tensors[1].shape[0].value == 7);
  CHECK(g.tensors[2].shape.size() == 0);
  CHECK(g.tensors[3].shape[0].symbol == "b");
  CHECK(g.ops[0].inputs == std::vector<int>{0, 3});
  CHECK(g.ops[1].inputs == std::vector<int>{1});
  CHECK(g.ops[0].extra == R"({"note":[["a"],"b"]})");
  CHECK(g.ops[1].extra == R"({"note":{"n":1}})");
}

TEST_CASE("graph_json: fractional or non-scalar dimension") {
  CHECK(Err(Doc(R"({"id": "a", "shape": [2.5], "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/shape/0: expected an integer >= 0 or a symbol name, found 2.5");
  CHECK(Err(Doc(R"({"id": "a", "shape": [3.0], "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/shape/0: expected an integer >= 0 or a symbol name, found 3.0");
  CHECK(Err(Doc(R"({"id": "a", "shape": [null], "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/shape/0: expected an integer >= 0 or a symbol name, found null");
  CHECK(Err(Doc(R"({"id": "a", "shape": [[2]], "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/shape/0: expected an integer >= 0 or a symbol name, found an "
        "array");
}

TEST_CASE("graph_json: unknown symbol, with and without declared symbols") {
  CHECK(Err(Doc(R"({"id": "a", "shape": ["batch", 4], "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/shape/0: unknown symbol \"batch\"; expected one of the names in "
        "/symbols (none declared)");
  CHECK(Err(Doc(R"({"id": "a", "shape": [4, "btach"], "dtype": "float32"})", "",
                R"("symbols": {"batch": 2, "seq": 8}, )")) ==
        "g.json: /tensors/0/shape/1: unknown symbol \"btach\"; expected one of the names in "
        "/symbols (batch, seq)");
}

TEST_CASE("graph_json: dtype missing, not a string, unknown") {
  CHECK(Err(Doc(R"({"id": "a", "shape": [1]})", "")) ==
        "g.json: /tensors/0/dtype: missing; expected a dtype name");
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": 4})", "")) ==
        "g.json: /tensors/0/dtype: expected a dtype name, found 4");
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": "float"})", "")) ==
        "g.json: /tensors/0/dtype: unknown dtype \"float\"; expected one of float64, float32, "
        "float16, bfloat16, float8_e4m3fn, float8_e5m2, int64, int32, int16, int8, uint8, bool, "
        "complex64");
}

TEST_CASE("graph_json: unknown kind") {
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": "float32", "kind": "weight"})", "")) ==
        std::string("g.json: /tensors/0/kind: unknown kind \"weight\"; ") + kKinds);
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": "float32", "kind": 1})", "")) ==
        std::string("g.json: /tensors/0/kind: unknown kind 1; ") + kKinds);
}

TEST_CASE("graph_json: alias_of and grad_of must be strings") {
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": "float32", "alias_of": 0})", "")) ==
        "g.json: /tensors/0/alias_of: expected a string, found 0");
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": "float32", "grad_of": null})", "")) ==
        "g.json: /tensors/0/grad_of: expected a string, found null");
}

TEST_CASE("graph_json: element-count and byte-count overflow") {
  // 2^32 * 2^32 elements: the element count itself overflows.
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": "float32"},
                   {"id": "big", "shape": [4294967296, 4294967296], "dtype": "float32"})",
                "")) ==
        "g.json: /tensors/1/shape: element count overflows 64-bit arithmetic; "
        "expected a tensor under 2^63 bytes");
  // 2^31 * 2^31 = 2^62 elements fit, 2^62 * 4 bytes do not.
  CHECK(Err(Doc(R"({"id": "big", "shape": [2147483648, 2147483648], "dtype": "float32"})", "")) ==
        "g.json: /tensors/0/shape: byte count (4611686018427387904 elements of "
        "float32) overflows 64-bit arithmetic; expected a tensor under 2^63 "
        "bytes");
  // Through a symbol.
  CHECK(Err(Doc(R"({"id": "big", "shape": ["n", "n"], "dtype": "int8"})", "",
                R"("symbols": {"n": 4294967296}, )")) ==
        "g.json: /tensors/0/shape: element count overflows 64-bit arithmetic; expected a "
        "tensor under 2^63 bytes");
  // A zero dimension anywhere makes the tensor empty, not an overflow.
  CHECK(Err(Doc(R"({"id": "e", "shape": [4294967296, 0, 4294967296], "dtype": "float32"})", "")) ==
        "");
}

TEST_CASE("graph_json: total bytes across tensors overflow") {
  // Two tensors of 2^62 bytes each: 2^63 does not fit in int64.
  CHECK(Err(Doc(R"({"id": "a", "shape": [1152921504606846976], "dtype": "float32"},
                   {"id": "b", "shape": [1152921504606846976], "dtype": "float32"})",
                "")) ==
        "g.json: /tensors/1: the bytes of all tensors together overflow 64-bit "
        "arithmetic; expected a graph under 2^61 bytes");
  // Workspaces count too.
  CHECK(Err(Doc(R"({"id": "x", "shape": [1152921504606846976], "dtype": "float32", "kind": "input"},
                   {"id": "y", "shape": [1], "dtype": "float32"})",
                R"({"id": "op", "type": "relu", "inputs": ["x"], "outputs": ["y"],
                    "workspace_bytes": 4611686018427387904})")) ==
        "g.json: /ops/0/workspace_bytes: the bytes of all tensors and workspaces together "
        "overflow 64-bit arithmetic; expected a graph under 2^61 bytes");
}

// ---------------------------------------------------------------------------
// alias_of / grad_of
// ---------------------------------------------------------------------------

TEST_CASE("graph_json: alias_of unknown") {
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": "float32", "alias_of": "nope"})", "")) ==
        "g.json: /tensors/0/alias_of: unknown tensor \"nope\"; expected the id of a tensor in "
        "/tensors");
}

TEST_CASE("graph_json: alias_of itself") {
  CHECK(Err(Doc(R"({"id": "b", "shape": [1], "dtype": "float32"},
                   {"id": "a", "shape": [1], "dtype": "float32", "alias_of": "a"})",
                "")) ==
        "g.json: /tensors/1/alias_of: tensor \"a\" is a view of itself; "
        "expected another tensor's id");
}

TEST_CASE("graph_json: alias cycle") {
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": "float32", "alias_of": "b"},
                   {"id": "b", "shape": [1], "dtype": "float32", "alias_of": "a"})",
                "")) ==
        "g.json: /tensors/0/alias_of: alias cycle a -> b -> a; expected a chain "
        "ending at a tensor that owns its memory");
  // A chain leading into a cycle reports the cycle, not the chain.
  CHECK(Err(Doc(R"({"id": "v", "shape": [1], "dtype": "float32", "alias_of": "a"},
                   {"id": "a", "shape": [1], "dtype": "float32", "alias_of": "b"},
                   {"id": "b", "shape": [1], "dtype": "float32", "alias_of": "c"},
                   {"id": "c", "shape": [1], "dtype": "float32", "alias_of": "a"})",
                "")) ==
        "g.json: /tensors/1/alias_of: alias cycle a -> b -> c -> a; expected a "
        "chain ending at a tensor that owns its memory");
}

TEST_CASE("graph_json: resident view of a non-resident tensor") {
  CHECK(Err(Doc(R"({"id": "h", "shape": [4], "dtype": "float32"},
                   {"id": "p", "shape": [4], "dtype": "float32", "kind": "parameter",
                    "alias_of": "h"})",
                "")) ==
        "g.json: /tensors/1/alias_of: resident tensor \"p\" (parameter) is a view "
        "of \"h\" (activation); expected a resident base");
}

TEST_CASE("graph_json: grad_of unknown") {
  CHECK(Err(Doc(R"({"id": "g", "shape": [1], "dtype": "float32", "grad_of": "nope"})", "")) ==
        "g.json: /tensors/0/grad_of: unknown tensor \"nope\"; expected the id of a tensor in "
        "/tensors");
}

TEST_CASE("graph_json: grad_of itself") {
  CHECK(Err(Doc(R"({"id": "g", "shape": [1], "dtype": "float32", "grad_of": "g"})", "")) ==
        "g.json: /tensors/0/grad_of: tensor \"g\" is its own gradient; expected another "
        "tensor's id");
}

TEST_CASE("graph_json: grad_of on a tensor whose kind is not gradient") {
  CHECK(Err(Doc(R"({"id": "w", "shape": [3], "dtype": "float32", "kind": "parameter"},
                   {"id": "g", "shape": [3], "dtype": "float32", "kind": "activation",
                    "grad_of": "w"})",
                "")) ==
        "g.json: /tensors/1/grad_of: tensor \"g\" has kind activation; expected "
        "kind gradient on a tensor with grad_of");
}

TEST_CASE("graph_json: two gradients for one tensor") {
  CHECK(Err(Doc(R"({"id": "w", "shape": [3], "dtype": "float32", "kind": "parameter"},
                   {"id": "g1", "shape": [3], "dtype": "float32", "grad_of": "w"},
                   {"id": "g2", "shape": [3], "dtype": "float32", "grad_of": "w"})",
                "")) ==
        "g.json: /tensors/2/grad_of: \"w\" already has gradient \"g1\" "
        "(/tensors/1); expected one gradient per tensor");
}

TEST_CASE("graph_json: gradient element count differs from its tensor") {
  CHECK(Err(Doc(R"({"id": "w", "shape": [3, 4], "dtype": "float32", "kind": "parameter"},
                   {"id": "g", "shape": [4, 4], "dtype": "float32", "grad_of": "w"})",
                "")) ==
        "g.json: /tensors/1/grad_of: gradient \"g\" has 16 elements but \"w\" has "
        "12; expected the same number");
  // Same count, different shape or dtype: accepted (e.g. a flattened bf16 grad).
  CHECK(Err(Doc(R"({"id": "w", "shape": [3, 4], "dtype": "float32", "kind": "parameter"},
                   {"id": "g", "shape": [12], "dtype": "bfloat16", "grad_of": "w"})",
                "")) == "");
}

// ---------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------

TEST_CASE("graph_json: ops missing or not an array") {
  CHECK(Err(R"({"format": "memplan.graph/1", "tensors": []})") ==
        "g.json: /ops: missing; expected an array of ops");
  CHECK(Err(R"({"format": "memplan.graph/1", "tensors": [], "ops": "fc"})") ==
        "g.json: /ops: expected an array of ops, found \"fc\"");
  CHECK(Err(Doc("", "1")) == "g.json: /ops/0: expected an object, found 1");
}

TEST_CASE("graph_json: op id missing") {
  CHECK(Err(Doc(kBaseTensors, R"({"type": "relu", "inputs": ["x"], "outputs": ["h"]})")) ==
        "g.json: /ops/0/id: missing; expected a non-empty string");
}

TEST_CASE("graph_json: duplicate op id") {
  CHECK(Err(Doc(kBaseTensors, R"(
      {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
      {"id": "fc", "type": "sum", "inputs": ["h"], "outputs": ["l"]})")) ==
        "g.json: /ops/1/id: duplicate op id \"fc\"; first defined at /ops/0");
}

TEST_CASE("graph_json: op type missing or empty") {
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "inputs": ["x", "w"], "outputs": ["h"]})")) ==
        "g.json: /ops/0/type: missing; expected a non-empty string");
  CHECK(Err(Doc(kBaseTensors,
                R"({"id": "fc", "type": "", "inputs": ["x", "w"], "outputs": ["h"]})")) ==
        "g.json: /ops/0/type: expected a non-empty string, found \"\"");
}

TEST_CASE("graph_json: inputs / outputs missing or not arrays") {
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": "x",
                                  "outputs": ["h"]})")) ==
        "g.json: /ops/0/inputs: expected an array of tensor ids, found \"x\"");
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "outputs": ["h"]})")) ==
        "g.json: /ops/0/inputs: missing; expected an array of tensor ids");
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": ["x"]})")) ==
        "g.json: /ops/0/outputs: missing; expected an array of tensor ids");
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": [0],
                                  "outputs": ["h"]})")) ==
        "g.json: /ops/0/inputs/0: expected a tensor id, found 0");
}

TEST_CASE("graph_json: dangling input id") {
  CHECK(Err(Doc(kBaseTensors, R"(
      {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
      {"id": "loss", "type": "sum", "inputs": ["hh"], "outputs": ["l"]})")) ==
        "g.json: /ops/1/inputs/0: unknown tensor \"hh\"; expected the id of a tensor in "
        "/tensors");
}

TEST_CASE("graph_json: dangling output id") {
  CHECK(Err(Doc(kBaseTensors,
                R"({"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["y"]})")) ==
        "g.json: /ops/0/outputs/0: unknown tensor \"y\"; expected the id of a tensor in "
        "/tensors");
}

TEST_CASE("graph_json: use before definition") {
  CHECK(Err(Doc(kBaseTensors, R"(
      {"id": "loss", "type": "sum", "inputs": ["h"], "outputs": ["l"]},
      {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"]})")) ==
        "g.json: /ops/0/inputs/0: tensor \"h\" is used before it is defined; its producer "
        "\"fc\" is /ops/1 (ops must be listed in execution order, without cycles)");
  // A cycle: two ops reading each other's outputs.
  CHECK(Err(Doc(R"({"id": "a", "shape": [1], "dtype": "float32"},
                   {"id": "b", "shape": [1], "dtype": "float32"})",
                R"({"id": "f", "type": "relu", "inputs": ["b"], "outputs": ["a"]},
                   {"id": "g", "type": "relu", "inputs": ["a"], "outputs": ["b"]})")) ==
        "g.json: /ops/0/inputs/0: tensor \"b\" is used before it is defined; its producer "
        "\"g\" is /ops/1 (ops must be listed in execution order, without cycles)");
}

TEST_CASE("graph_json: an op reading its own output") {
  CHECK(Err(Doc(kBaseTensors,
                R"({"id": "fc", "type": "linear", "inputs": ["h", "w"], "outputs": ["h"]})")) ==
        "g.json: /ops/0/inputs/0: tensor \"h\" is both an input and an output of this op; "
        "expected an op to read only tensors defined before it");
}

TEST_CASE("graph_json: a non-resident tensor that no op produces") {
  CHECK(Err(Doc(kBaseTensors,
                R"({"id": "loss", "type": "sum", "inputs": ["h"], "outputs": ["l"]})")) ==
        "g.json: /ops/0/inputs/0: tensor \"h\" is never produced and has kind activation; "
        "expected an output of an earlier op or a tensor of kind input, parameter, buffer or "
        "optimizer_state");
}

TEST_CASE("graph_json: two producers") {
  CHECK(Err(Doc(kBaseTensors, R"(
      {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
      {"id": "fc2", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"]})")) ==
        "g.json: /ops/1/outputs/0: tensor \"h\" already produced by \"fc\" (/ops/0); expected "
        "one producer per tensor");
}

TEST_CASE("graph_json: an op producing a resident tensor") {
  CHECK(Err(Doc(kBaseTensors,
                R"({"id": "fc", "type": "linear", "inputs": ["x", "h"], "outputs": ["w"]})")) ==
        "g.json: /ops/0/outputs/0: tensor \"w\" has kind parameter, which is resident; expected "
        "a tensor that an op produces");
}

TEST_CASE("graph_json: a view produced before its base") {
  CHECK(Err(Doc(R"({"id": "x", "shape": [4], "dtype": "float32", "kind": "input"},
                   {"id": "h", "shape": [4], "dtype": "float32"},
                   {"id": "v", "shape": [2, 2], "dtype": "float32", "alias_of": "h"})",
                R"({"id": "view", "type": "view", "inputs": ["x"], "outputs": ["v"]},
                   {"id": "relu", "type": "relu", "inputs": ["x"], "outputs": ["h"]})")) ==
        "g.json: /ops/0/outputs/0: view \"v\" of \"h\" is produced before \"h\" is defined; "
        "expected its base to be defined first");
}

TEST_CASE("graph_json: unknown phase") {
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": ["x", "w"],
                                  "outputs": ["h"], "phase": "bwd"})")) ==
        "g.json: /ops/0/phase: unknown phase \"bwd\"; expected forward, backward or optimizer");
}

TEST_CASE("graph_json: flops and time_us must be non-negative numbers") {
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": ["x", "w"],
                                  "outputs": ["h"], "flops": -1})")) ==
        "g.json: /ops/0/flops: expected a non-negative number, found -1");
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": ["x", "w"],
                                  "outputs": ["h"], "flops": "1e9"})")) ==
        "g.json: /ops/0/flops: bad dimension expression \"1e9\"; expected \"+\", \"-\" or \"*\" at "
        "\"e9\"");
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": ["x", "w"],
                                  "outputs": ["h"], "time_us": -0.5})")) ==
        "g.json: /ops/0/time_us: expected a non-negative number, found -0.5");
}

TEST_CASE("graph_json: workspace_bytes must be a non-negative integer") {
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": ["x", "w"],
                                  "outputs": ["h"], "workspace_bytes": 1.5})")) ==
        "g.json: /ops/0/workspace_bytes: expected a non-negative integer or a dimension "
        "expression, found 1.5");
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": ["x", "w"],
                                  "outputs": ["h"], "workspace_bytes": -8})")) ==
        "g.json: /ops/0/workspace_bytes: expected a non-negative integer or a dimension "
        "expression, found -8");
}

TEST_CASE("graph_json: accumulate must be a boolean") {
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": ["x", "w"],
                                  "outputs": ["h"], "accumulate": 1})")) ==
        "g.json: /ops/0/accumulate: expected a boolean, found 1");
}

TEST_CASE("graph_json: scope must be a string") {
  CHECK(Err(Doc(kBaseTensors, R"({"id": "fc", "type": "linear", "inputs": ["x", "w"],
                                  "outputs": ["h"], "scope": ["a"]})")) ==
        "g.json: /ops/0/scope: expected a string, found an array");
}

TEST_CASE("graph_json: saves referring to a later tensor or an unknown one") {
  CHECK(Err(Doc(kBaseTensors, R"(
      {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"], "saves": ["l"]},
      {"id": "loss", "type": "sum", "inputs": ["h"], "outputs": ["l"]})")) ==
        "g.json: /ops/0/saves/0: tensor \"l\" is used before it is defined; its producer "
        "\"loss\" is /ops/1 (ops must be listed in execution order, without cycles)");
  CHECK(Err(Doc(kBaseTensors, R"(
      {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"], "saves": ["q"]})")) ==
        "g.json: /ops/0/saves/0: unknown tensor \"q\"; expected the id of a tensor in "
        "/tensors");
  // An op may save its own outputs.
  CHECK(Err(Doc(kBaseTensors, R"(
      {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"],
       "saves": ["x", "h"]})")) == "");
}

TEST_CASE("graph_json: graph outputs with an unknown id or of the wrong type") {
  CHECK(Err(Doc(kBaseTensors, kBaseOps, R"("outputs": ["loss"], )")) ==
        "g.json: /outputs/0: unknown tensor \"loss\"; expected the id of a tensor in /tensors");
  CHECK(Err(Doc(kBaseTensors, kBaseOps, R"("outputs": "l", )")) ==
        "g.json: /outputs: expected an array of tensor ids, found \"l\"");
}

// A graph output that no op produces (and that is not resident) is an input
// error with a pointer, not a failure of the baseline program later.
TEST_CASE("graph_json: a graph output that is never produced is an input error") {
  std::string err = Err(Doc(kBaseTensors, R"(
      {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"]})",
                            R"("outputs": ["l"], )"));
  CHECK(err ==
        "g.json: /outputs/0: tensor \"l\" is never produced and has kind activation; expected "
        "an output of an op or a resident tensor");
}

// ---------------------------------------------------------------------------
// --set (GraphLoadOptions::symbol_overrides)
// ---------------------------------------------------------------------------

TEST_CASE("graph_json: --set of a symbol the graph neither declares nor uses") {
  std::string doc = Doc(R"({"id": "x", "shape": ["batch"], "dtype": "float32", "kind": "input"})",
                        "", R"("symbols": {"batch": 4, "seq": 8}, )");
  CHECK(Err(doc, Set("btach", 3)) ==
        "g.json: --set btach: the graph has no symbol \"btach\"; expected one of: batch, seq");
  CHECK(Err(Doc("", ""), Set("batch", 3)) ==
        "g.json: --set batch: the graph has no symbol \"batch\"; expected no --set: the "
        "graph declares no symbols");
}

TEST_CASE("graph_json: --set of a declared symbol changes bytes") {
  std::string doc =
      Doc(R"({"id": "x", "shape": ["batch", 3], "dtype": "float16", "kind": "input"})", "",
          R"("symbols": {"batch": 4}, )");
  Graph g;
  std::string err;
  REQUIRE(ParseGraph(doc, "g.json", {}, &g, &err));
  CHECK(g.tensors[0].bytes == 4 * 3 * 2);
  REQUIRE(ParseGraph(doc, "g.json", Set("batch", 10), &g, &err));
  CHECK(g.tensors[0].bytes == 10 * 3 * 2);
  CHECK(g.tensors[0].shape[0].symbol == "batch");
  CHECK(g.tensors[0].shape[0].value == 10);
  REQUIRE(g.symbols.size() == 1);
  CHECK(g.symbols[0] == std::pair<std::string, int64_t>("batch", 10));
  // The last --set wins.
  GraphLoadOptions twice;
  twice.symbol_overrides = {{"batch", 5}, {"batch", 7}};
  REQUIRE(ParseGraph(doc, "g.json", twice, &g, &err));
  CHECK(g.tensors[0].bytes == 7 * 3 * 2);
  // An override can make a tensor overflow.
  CHECK(Err(doc, Set("batch", int64_t{1} << 62)) ==
        "g.json: /tensors/0/shape: element count overflows 64-bit arithmetic; expected a "
        "tensor under 2^63 bytes");
}

TEST_CASE("graph_json: --set may supply a symbol the graph uses but does not declare") {
  std::string doc =
      Doc(R"({"id": "x", "shape": ["batch", 3], "dtype": "float32", "kind": "input"})", "");
  Graph g;
  std::string err;
  REQUIRE(ParseGraph(doc, "g.json", Set("batch", 2), &g, &err));
  CHECK(g.tensors[0].bytes == 24);
}

// ---------------------------------------------------------------------------
// Positive cases
// ---------------------------------------------------------------------------

TEST_CASE("graph_json: a valid forward-only graph") {
  std::string doc = R"({
    "format": "memplan.graph/1",
    "name": "tiny",
    "source": {"framework": "handwritten", "version": "1"},
    "symbols": {"batch": 8, "hidden": 16},
    "tensors": [
      {"id": "x", "shape": ["batch", "hidden"], "dtype": "float32", "kind": "input"},
      {"id": "w", "shape": ["hidden", "hidden"], "dtype": "bfloat16", "kind": "parameter"},
      {"id": "h", "shape": ["batch", "hidden"], "dtype": "float32"},
      {"id": "hv", "shape": [128], "dtype": "float32", "alias_of": "h"},
      {"id": "ids", "shape": [3, 5, 7], "dtype": "int64", "kind": "input"},
      {"id": "l", "shape": [], "dtype": "float32"}
    ],
    "ops": [
      {"id": "fc", "type": "aten.linear.default", "inputs": ["x", "w"], "outputs": ["h"],
       "flops": 4096, "scope": "model.fc", "workspace_bytes": 1024},
      {"id": "flat", "type": "view", "inputs": ["h"], "outputs": ["hv"]},
      {"id": "loss", "type": "sum", "inputs": ["hv"], "outputs": ["l"], "time_us": 2.5}
    ],
    "outputs": ["l"]
  })";
  Graph g;
  std::string err;
  REQUIRE_MESSAGE(ParseGraph(doc, "g.json", {}, &g, &err), err);
  CHECK(g.name == "tiny");
  CHECK_FALSE(g.joint);
  REQUIRE(g.tensors.size() == 6);
  REQUIRE(g.ops.size() == 3);
  REQUIRE(g.symbols.size() == 2);
  CHECK(g.symbols[0].first == "batch");
  CHECK(g.symbols[0].second == 8);
  CHECK(g.symbols[1].first == "hidden");
  CHECK(g.symbols[1].second == 16);

  const Tensor& x = g.tensors[g.FindTensor("x")];
  CHECK(x.numel == 128);
  CHECK(x.bytes == 512);
  CHECK(x.kind == TensorKind::kInput);
  CHECK(x.base == g.FindTensor("x"));
  CHECK(x.producer == -1);
  const Tensor& w = g.tensors[g.FindTensor("w")];
  CHECK(w.dtype == DType::kBFloat16);
  CHECK(w.numel == 256);
  CHECK(w.bytes == 512);
  const Tensor& ids = g.tensors[g.FindTensor("ids")];
  CHECK(ids.numel == 105);
  CHECK(ids.bytes == 840);
  const Tensor& h = g.tensors[g.FindTensor("h")];
  CHECK(h.kind == TensorKind::kActivation);
  CHECK(h.producer == g.FindOp("fc"));
  CHECK(h.base == g.FindTensor("h"));
  const Tensor& hv = g.tensors[g.FindTensor("hv")];
  CHECK(hv.alias_of == g.FindTensor("h"));
  CHECK(hv.base == g.FindTensor("h"));
  CHECK(hv.producer == g.FindOp("flat"));
  CHECK(hv.bytes == 512);
  CHECK(g.OwnedBytes(g.FindTensor("hv")) == 0);
  CHECK(g.OwnedBytes(g.FindTensor("h")) == 512);
  const Tensor& l = g.tensors[g.FindTensor("l")];
  CHECK(l.numel == 1);
  CHECK(l.bytes == 4);
  CHECK(g.ResidentBytes() == 512 + 512 + 840);

  const Op& fc = g.ops[g.FindOp("fc")];
  CHECK(fc.type == "aten.linear.default");
  CHECK(CanonicalOpType(fc.type) == "linear");
  CHECK(fc.phase == Phase::kForward);
  CHECK(fc.flops == 4096);
  CHECK(fc.time_us < 0);
  CHECK(fc.workspace_bytes == 1024);
  CHECK(fc.scope == "model.fc");
  CHECK_FALSE(fc.saves_given);
  CHECK_FALSE(fc.accumulate);
  CHECK(g.ops[g.FindOp("loss")].time_us == 2.5);
  CHECK(g.ops[g.FindOp("loss")].flops < 0);
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.outputs[0] == g.FindTensor("l"));
  CHECK(g.FindTensor("nope") == -1);
  CHECK(g.FindOp("nope") == -1);
}

TEST_CASE("graph_json: every dtype has its size") {
  struct {
    const char* name;
    int64_t size;
  } cases[] = {{"float64", 8},       {"float32", 4},     {"float16", 2}, {"bfloat16", 2},
               {"float8_e4m3fn", 1}, {"float8_e5m2", 1}, {"int64", 8},   {"int32", 4},
               {"int16", 2},         {"int8", 1},        {"uint8", 1},   {"bool", 1},
               {"complex64", 8}};
  for (const auto& c : cases) {
    CAPTURE(c.name);
    Graph g;
    std::string err;
    REQUIRE(ParseGraph(
        Doc(std::string(R"({"id": "t", "shape": [3], "dtype": ")") + c.name + R"("})", ""),
        "g.json", {}, &g, &err));
    CHECK(g.tensors[0].bytes == 3 * c.size);
    CHECK(std::string(DTypeName(g.tensors[0].dtype)) == c.name);
  }
}

TEST_CASE("graph_json: kinds default from producers and grad_of; joint detection") {
  std::string doc = Doc(R"(
      {"id": "x", "shape": [4], "dtype": "float32", "kind": "input"},
      {"id": "w", "shape": [4], "dtype": "float32", "kind": "parameter"},
      {"id": "h", "shape": [4], "dtype": "float32"},
      {"id": "h.grad", "shape": [4], "dtype": "float32"},
      {"id": "w.grad", "shape": [4], "dtype": "float32", "grad_of": "w"},
      {"id": "tmp", "shape": [4], "dtype": "float32", "kind": "temporary"},
      {"id": "w.new", "shape": [4], "dtype": "float32"})",
                        R"(
      {"id": "mul", "type": "mul", "inputs": ["x", "w"], "outputs": ["h"]},
      {"id": "seed", "type": "ones_like", "inputs": ["h"], "outputs": ["h.grad"],
       "phase": "backward"},
      {"id": "mul.bw", "type": "mul", "inputs": ["h.grad", "x"], "outputs": ["w.grad", "tmp"],
       "phase": "backward", "accumulate": true, "saves": ["x"]},
      {"id": "sgd", "type": "sub", "inputs": ["w", "w.grad"], "outputs": ["w.new"],
       "phase": "optimizer"})");
  Graph g;
  std::string err;
  REQUIRE_MESSAGE(ParseGraph(doc, "g.json", {}, &g, &err), err);
  CHECK(g.joint);
  CHECK(g.tensors[g.FindTensor("h")].kind == TensorKind::kActivation);
  CHECK(g.tensors[g.FindTensor("h.grad")].kind == TensorKind::kGradient);
  CHECK(g.tensors[g.FindTensor("h.grad")].grad_of == -1);
  CHECK(g.tensors[g.FindTensor("w.grad")].kind == TensorKind::kGradient);
  CHECK(g.tensors[g.FindTensor("w.grad")].grad_of == g.FindTensor("w"));
  CHECK(g.tensors[g.FindTensor("tmp")].kind == TensorKind::kTemporary);
  // Outputs of optimizer ops are not forward outputs either.
  CHECK(g.tensors[g.FindTensor("w.new")].kind == TensorKind::kGradient);
  CHECK(g.IsParameterGradient(g.FindTensor("w.grad")));
  CHECK_FALSE(g.IsParameterGradient(g.FindTensor("h.grad")));
  CHECK(g.ops[g.FindOp("seed")].phase == Phase::kBackward);
  CHECK(g.ops[g.FindOp("sgd")].phase == Phase::kOptimizer);
  CHECK(g.ops[g.FindOp("mul.bw")].accumulate);
  CHECK(g.ops[g.FindOp("mul.bw")].saves_given);
  CHECK(g.ops[g.FindOp("mul.bw")].saves == std::vector<int>{g.FindTensor("x")});

  // A tensor with grad_of that no op produces (e.g. in a forward-only graph)
  // defaults to gradient too.
  Graph f;
  REQUIRE(ParseGraph(Doc(R"({"id": "w", "shape": [4], "dtype": "float32", "kind": "parameter"},
                           {"id": "g", "shape": [4], "dtype": "float32", "grad_of": "w"})",
                         ""),
                     "g.json", {}, &f, &err));
  CHECK(f.tensors[1].kind == TensorKind::kGradient);
  CHECK_FALSE(f.joint);
}

TEST_CASE("graph_json: optimizer phase alone does not make a graph joint") {
  Graph g;
  std::string err;
  REQUIRE(ParseGraph(Doc(kBaseTensors, R"(
      {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"],
       "phase": "forward"},
      {"id": "loss", "type": "sum", "inputs": ["h"], "outputs": ["l"], "phase": "optimizer"})"),
                     "g.json", {}, &g, &err));
  CHECK_FALSE(g.joint);
}

// Regression test: GraphToJson once crashed (SIGSEGV) on any unknown key,
// iterating items() of a temporary parsed JSON object.
TEST_CASE("graph_json: unknown keys are accepted, kept, and survive a round trip") {
  std::string doc = R"({
    "format": "memplan.graph/1",
    "name": "extras",
    "future_top_level": {"anything": [1, 2, 3]},
    "source": {"framework": "jax", "nested": {"k": [true, null]}},
    "symbols": {"b": 2},
    "tensors": [
      {"id": "x", "shape": ["b", 3], "dtype": "float32", "kind": "input",
       "stride": [3, 1], "device": "cuda:0"},
      {"id": "y", "shape": ["b", 3], "dtype": "float32", "note": "activation"}
    ],
    "ops": [
      {"id": "r", "type": "relu", "inputs": ["x"], "outputs": ["y"],
       "stack": ["model.py:12"], "cost_model": {"alpha": 0.5}}
    ],
    "outputs": ["y"]
  })";
  Graph g;
  std::string err;
  REQUIRE_MESSAGE(ParseGraph(doc, "g.json", {}, &g, &err), err);
  CHECK(g.tensors[0].extra == R"({"device":"cuda:0","stride":[3,1]})");
  CHECK(g.tensors[1].extra == R"({"note":"activation"})");
  CHECK(g.ops[0].extra == R"({"cost_model":{"alpha":0.5},"stack":["model.py:12"]})");
  CHECK(g.source == R"({"framework":"jax","nested":{"k":[true,null]}})");

  std::string out = GraphToJson(g);
  Graph g2;
  REQUIRE_MESSAGE(ParseGraph(out, "roundtrip.json", {}, &g2, &err), err);
  CHECK(g2.name == "extras");
  CHECK(g2.source == g.source);
  CHECK(g2.tensors[0].extra == g.tensors[0].extra);
  CHECK(g2.tensors[1].extra == g.tensors[1].extra);
  CHECK(g2.ops[0].extra == g.ops[0].extra);
  CHECK(g2.tensors[0].shape[0].symbol == "b");
  CHECK(g2.tensors[0].bytes == g.tensors[0].bytes);
  CHECK(g2.symbols == g.symbols);
  // Serializing again gives the same bytes.
  CHECK(GraphToJson(g2) == out);
}

TEST_CASE("graph_json: GraphToJson round trip keeps every field") {
  std::string doc = Doc(R"(
      {"id": "x", "shape": [4], "dtype": "float16", "kind": "input"},
      {"id": "w", "shape": [4], "dtype": "float32", "kind": "parameter"},
      {"id": "h", "shape": [4], "dtype": "float32"},
      {"id": "hv", "shape": [2, 2], "dtype": "float32", "alias_of": "h"},
      {"id": "hv.grad", "shape": [2, 2], "dtype": "float32", "grad_of": "hv"},
      {"id": "h.grad", "shape": [4], "dtype": "float32", "grad_of": "h", "alias_of": "hv.grad"},
      {"id": "w.grad", "shape": [4], "dtype": "float32", "grad_of": "w"})",
                        R"(
      {"id": "mul", "type": "mul", "inputs": ["x", "w"], "outputs": ["h"], "flops": 4,
       "time_us": 1.5, "workspace_bytes": 64, "saves": ["x", "w"], "scope": "m"},
      {"id": "v", "type": "view", "inputs": ["h"], "outputs": ["hv"]},
      {"id": "seed", "type": "ones_like", "inputs": ["hv"], "outputs": ["hv.grad"],
       "phase": "backward"},
      {"id": "v.bw", "type": "view", "inputs": ["hv.grad"], "outputs": ["h.grad"],
       "phase": "backward"},
      {"id": "mul.bw", "type": "mul", "inputs": ["h.grad", "x"], "outputs": ["w.grad"],
       "phase": "backward", "accumulate": true})",
                        R"("name": "rt", "symbols": {}, "outputs": ["w.grad"], )");
  Graph g;
  std::string err;
  REQUIRE_MESSAGE(ParseGraph(doc, "g.json", {}, &g, &err), err);
  std::string out = GraphToJson(g);
  Graph g2;
  REQUIRE_MESSAGE(ParseGraph(out, "rt.json", {}, &g2, &err), err);
  REQUIRE(g2.tensors.size() == g.tensors.size());
  REQUIRE(g2.ops.size() == g.ops.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    CAPTURE(g.tensors[t].id);
    CHECK(g2.tensors[t].id == g.tensors[t].id);
    CHECK(g2.tensors[t].dtype == g.tensors[t].dtype);
    CHECK(g2.tensors[t].kind == g.tensors[t].kind);
    CHECK(g2.tensors[t].alias_of == g.tensors[t].alias_of);
    CHECK(g2.tensors[t].grad_of == g.tensors[t].grad_of);
    CHECK(g2.tensors[t].bytes == g.tensors[t].bytes);
    CHECK(g2.tensors[t].base == g.tensors[t].base);
    CHECK(g2.tensors[t].producer == g.tensors[t].producer);
  }
  for (size_t o = 0; o < g.ops.size(); ++o) {
    CAPTURE(g.ops[o].id);
    CHECK(g2.ops[o].id == g.ops[o].id);
    CHECK(g2.ops[o].type == g.ops[o].type);
    CHECK(g2.ops[o].inputs == g.ops[o].inputs);
    CHECK(g2.ops[o].outputs == g.ops[o].outputs);
    CHECK(g2.ops[o].phase == g.ops[o].phase);
    CHECK(g2.ops[o].flops == g.ops[o].flops);
    CHECK(g2.ops[o].time_us == g.ops[o].time_us);
    CHECK(g2.ops[o].workspace_bytes == g.ops[o].workspace_bytes);
    CHECK(g2.ops[o].saves == g.ops[o].saves);
    CHECK(g2.ops[o].saves_given == g.ops[o].saves_given);
    CHECK(g2.ops[o].accumulate == g.ops[o].accumulate);
    CHECK(g2.ops[o].scope == g.ops[o].scope);
  }
  CHECK(g2.outputs == g.outputs);
  CHECK(g2.joint);
  CHECK(g.tensors[g.FindTensor("h.grad")].base == g.FindTensor("hv.grad"));
  CHECK(GraphToJson(g2) == out);
}

TEST_CASE("graph_json: LoadGraphFile names a missing file") {
  Graph g;
  std::string err;
  CHECK_FALSE(LoadGraphFile("/nonexistent/dir/g.json", {}, &g, &err));
  CHECK(err == "cannot read /nonexistent/dir/g.json: No such file or directory");
}

TEST_CASE("graph_json: ReadFile refuses a directory instead of allocating its size") {
  std::string text, err;
  CHECK_FALSE(ReadFile("/tmp", &text, &err));
  CHECK(err == "cannot read /tmp: Is a directory");
}

TEST_CASE("graph_json: the example graphs load") {
  for (const char* name : {"mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json",
                           "cnn_small.joint.graph.json", "mlp_torch.joint.graph.json"}) {
    CAPTURE(name);
    Graph g;
    std::string err;
    CHECK_MESSAGE(
        LoadGraphFile(std::string(MEMPLAN_SOURCE_DIR) + "/examples/" + name, {}, &g, &err), err);
    CHECK(g.joint == (std::string(name).find(".joint.") != std::string::npos));
  }
}

}  // namespace memplan

namespace memplan {

TEST_CASE("graph_json: dimension expressions resize with --set") {
  const std::string doc = Doc(R"(
    {"id": "x", "shape": ["batch", "seq"], "dtype": "float32", "kind": "input"},
    {"id": "h", "shape": ["batch*seq", 4], "dtype": "float32"})",
                              R"({"id": "f", "type": "view", "inputs": ["x"], "outputs": ["h"],
                                  "workspace_bytes": "16*batch", "flops": "2*batch*seq"})",
                              R"("symbols": {"batch": 2, "seq": 3}, )");
  Graph g;
  std::string err;
  REQUIRE(ParseGraph(doc, "g.json", Set("batch", 5), &g, &err));
  CHECK(g.tensors[1].shape[0].value == 15);
  CHECK(g.tensors[1].shape[0].symbol == "batch*seq");
  CHECK(g.ops[0].workspace_bytes == 80);
  CHECK(g.ops[0].flops == 30);
}

TEST_CASE("graph_json: dimension expression errors name the pointer") {
  CHECK(Err(Doc(R"({"id": "a", "shape": ["batch*"], "dtype": "float32"})", "",
                R"("symbols": {"batch": 2}, )")) ==
        "g.json: /tensors/0/shape/0: bad dimension expression \"batch*\"; expected a name or an "
        "integer after \"*\"");
  CHECK(Err(Doc(kBaseTensors,
                R"({"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"],
                    "workspace_bytes": "btach"})")) ==
        "g.json: /ops/0/workspace_bytes: unknown symbol \"btach\"; expected one of the names in "
        "/symbols (none declared)");
  CHECK(Err(Doc(kBaseTensors,
                R"({"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"],
                    "workspace_bytes": -4})")) ==
        "g.json: /ops/0/workspace_bytes: expected a non-negative integer or a dimension "
        "expression, found -4");
}

}  // namespace memplan

namespace memplan {
namespace {

// The op lists' tensor lookup tries the tensor after the last one found
// first: references in declaration order, repeated, backwards, far apart
// and unknown all resolve as the index does.
TEST_CASE("graph_json: op tensor references in any order resolve by id") {
  const std::string tensors = R"(
    {"id": "a", "shape": [2], "dtype": "float32", "kind": "input"},
    {"id": "b", "shape": [2], "dtype": "float32", "kind": "parameter"},
    {"id": "c", "shape": [2], "dtype": "float32"},
    {"id": "d", "shape": [2], "dtype": "float32"},
    {"id": "e", "shape": [2], "dtype": "float32"})";
  const std::string ops = R"(
    {"id": "o1", "type": "add", "inputs": ["a", "b", "b", "a"], "outputs": ["c"]},
    {"id": "o2", "type": "mul", "inputs": ["c", "a"], "outputs": ["e"]},
    {"id": "o3", "type": "mul", "inputs": ["e", "b", "c"], "outputs": ["d"]})";
  Graph g;
  std::string err;
  REQUIRE(ParseGraph(Doc(tensors, ops), "g.json", {}, &g, &err));
  CHECK(g.ops[0].inputs.ToVector() == std::vector<int>{0, 1, 1, 0});
  CHECK(g.ops[0].outputs.ToVector() == std::vector<int>{2});
  CHECK(g.ops[1].inputs.ToVector() == std::vector<int>{2, 0});
  CHECK(g.ops[1].outputs.ToVector() == std::vector<int>{4});
  CHECK(g.ops[2].inputs.ToVector() == std::vector<int>{4, 1, 2});
  CHECK(g.ops[2].outputs.ToVector() == std::vector<int>{3});
  CHECK(Err(Doc(tensors, R"({"id": "o1", "type": "add", "inputs": ["a", "b", "bb"],
                              "outputs": ["c"]})")) ==
        "g.json: /ops/0/inputs/2: unknown tensor \"bb\"; expected the id of a tensor in "
        "/tensors");
}

}  // namespace
}  // namespace memplan
