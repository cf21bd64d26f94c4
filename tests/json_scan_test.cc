#include "analyzer/base/json_scan.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace memplan {
namespace {

using json = nlohmann::json;

// Records every event as text, so two parsers can be compared.
class Recorder : public nlohmann::json_sax<json> {
 public:
  std::vector<std::string> events;
  bool null() override { return Add("null"); }
  bool boolean(bool v) override { return Add(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return Add("i" + std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Add("u" + std::to_string(v)); }
  bool number_float(number_float_t v, const string_t& s) override {
    char buf[64];
    std::snprintf(buf, sizeof buf, "f%.17g/", v);
    return Add(buf + s);
  }
  bool string(string_t& v) override { return Add("s" + v); }
  bool binary(binary_t&) override { return Add("binary"); }
  bool start_object(std::size_t n) override { return Add("{" + std::to_string(n)); }
  bool key(string_t& k) override { return Add("k" + k); }
  bool end_object() override { return Add("}"); }
  bool start_array(std::size_t n) override { return Add("[" + std::to_string(n)); }
  bool end_array() override { return Add("]"); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool Add(std::string e) {
    events.push_back(std::move(e));
    return true;
  }
};

// Both parsers agree on validity, and on every event of a valid document.
void Agree(const std::string& text) {
  CAPTURE(text);
  Recorder a, b;
  bool ok_nlohmann = json::sax_parse(text, &a);
  ScanResult scan = ScanJson(text, &b);
  CHECK(ok_nlohmann == (scan == ScanResult::kOk));
  CHECK(scan != ScanResult::kStopped);
  if (ok_nlohmann && scan == ScanResult::kOk) CHECK(a.events == b.events);
}

TEST_CASE("json scan: valid documents give nlohmann's events") {
  for (const char* text : {
           R"({"a": [1, -2, 3.5, true, false, null, "x"], "b": {}, "c": []})",
           R"([0, -0, 1e5, 1E-5, 2.5e+3, -1.25E2, 0.0, 123456789012])",
           R"([18446744073709551615, 18446744073709551616, -9223372036854775808])",
           R"([-9223372036854775809, 1e308, 4.9e-324, 1e-400])",
           R"("\"\\\/\b\f\n\r\t \u0041\u00e9\u4e2d \ud83d\ude00 \u0000")",
           "\"h\xc3\xa9llo \xe4\xb8\xad \xf0\x9f\x98\x80 \x7f\"",
           "  \n\t\r {\"k\" : \"v\" } \n",
           "\xEF\xBB\xBF[1]",
           R"({"a": 1, "a": 2})",
           R"([[[[[]]]], {"x": [{"y": []}]}])",
           "true",
           "42",
           "\"\"",
       })
    Agree(text);
}

TEST_CASE("json scan: invalid documents are refused as nlohmann refuses them") {
  for (const char* text : {
           "",
           " ",
           "[1,]",
           R"({"a":1,})",
           "[01]",
           "[1.]",
           "[.5]",
           "[-]",
           "[1e]",
           "[+1]",
           "[NaN]",
           "[Infinity]",
           "[1E400]",
           "[-1e400]",
           R"(["\x"])",
           R"(["\u12"])",
           R"(["\udc00"])",
           R"(["\ud800"])",
           R"(["\ud800\u0041"])",
           "[\"a\x01\"]",
           "[\"\xc0\xaf\"]",
           "[\"\xed\xa0\x80\"]",
           "[\"\xf4\x90\x80\x80\"]",
           "[\"\xff\"]",
           "[\"\xe4\xb8\"]",
           "[1] x",
           "[1] [2]",
           "{\"a\" 1}",
           "{1: 2}",
           "[\"abc",
           "[tru]",
           "[nul]",
           "{\"a\":}",
           "}",
           "]",
           "[",
           "{",
           "[1 2]",
           "/* c */ [1]",
       })
    Agree(text);
}

TEST_CASE("json scan: random mutations of graph documents agree with nlohmann") {
  const std::string seeds[] = {
      R"({"format": "memplan.graph/1", "symbols": {"batch": 8},
          "tensors": [{"id": "x", "shape": ["batch", 3], "dtype": "float32", "kind": "input"},
                      {"id": "h\u00e9", "shape": [1e2, -0, 18446744073709551616], "dtype": "bool"}],
          "ops": [{"id": "f", "type": "relu", "inputs": ["x"], "outputs": ["h"], "flops": 1.5e9}],
          "outputs": ["h"]})",
      R"([{"a": [true, false, null, -12.5e-3, "\n\t\u0041"]}, [], {}, "\ud83d\ude00"])",
  };
  const std::string alphabet = "{}[]:,\"\\-+.0123456789eEtrufalsn \t\n\xc3\xa9\xed\xa0\xff";
  std::mt19937 rng(12345);
  int mutations = 0;
  for (const std::string& seed : seeds) {
    for (int round = 0; round < 4000; ++round) {
      std::string text = seed;
      int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        size_t pos = rng() % text.size();
        switch (rng() % 3) {
          case 0:
            text.erase(pos, 1 + rng() % 3);
            break;
          case 1:
            text.insert(pos, 1, alphabet[rng() % alphabet.size()]);
            break;
          default:
            text[pos] = alphabet[rng() % alphabet.size()];
        }
      }
      Agree(text);
      ++mutations;
    }
  }
  CHECK(mutations == 8000);
}

// A handler that stops at the first string: the scan reports kStopped.
struct StopAtString : Recorder {
  bool string(string_t&) override { return false; }
};

TEST_CASE("json scan: a handler that returns false stops the scan") {
  StopAtString sax;
  CHECK(ScanJson(R"([1, "x", 2])", &sax) == ScanResult::kStopped);
  CHECK(sax.events == std::vector<std::string>{"[18446744073709551615", "u1"});
}

}  // namespace
}  // namespace memplan

namespace memplan {
namespace {

TEST_CASE("json scan: IsValidUtf8 accepts what a JSON string may hold and nothing else") {
  CHECK(IsValidUtf8(""));
  CHECK(IsValidUtf8("layer1.0/conv"));
  CHECK(IsValidUtf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));  // é € 😀
  CHECK(!IsValidUtf8("\xff"));
  CHECK(!IsValidUtf8("\xc0\xaf"));          // overlong "/"
  CHECK(!IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  CHECK(!IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  CHECK(!IsValidUtf8("ok\xe2\x82"));        // cut short
  // It agrees with nlohmann's parser on every 2-byte string.
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      std::string s{static_cast<char>(a), static_cast<char>(b)};
      bool parses = !nlohmann::json::parse("\"" + s + "\"", nullptr, false).is_discarded();
      bool json_safe = a >= 0x20 && b >= 0x20 && a != '"' && b != '"' && a != '\\' && b != '\\';
      if (json_safe) CHECK(IsValidUtf8(s) == parses);
    }
  }
}

}  // namespace
}  // namespace memplan
