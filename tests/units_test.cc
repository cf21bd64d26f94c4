// Sizes on the command line (--budget 24GiB) and in human output.
#include "analyzer/base/units.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

namespace memplan {
namespace {

// The parsed size, or -1 (and the message in *err) on a reject.
int64_t Size(const std::string& text, std::string* err = nullptr) {
  int64_t bytes = -12345;
  std::string e;
  if (!ParseSize(text, &bytes, &e)) {
    CHECK(!e.empty());
    if (err) *err = e;
    return -1;
  }
  CHECK(e.empty());
  return bytes;
}

std::string Reject(const std::string& text) {
  std::string err;
  int64_t v = Size(text, &err);
  CHECK_MESSAGE(v == -1, "accepted \"" << text << "\" as " << v);
  return err;
}

std::string Invalid(const std::string& text) {
  return "invalid size \"" + text +
         "\"; expected a number of bytes with an optional unit (B KB MB GB TB KiB MiB GiB TiB), "
         "e.g. 24GiB";
}

constexpr int64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kTiB = kGiB * 1024;

}  // namespace

TEST_CASE("units: ParseSize plain bytes") {
  CHECK(Size("0") == 0);
  CHECK(Size("1") == 1);
  CHECK(Size("4096") == 4096);
  CHECK(Size("512B") == 512);
  CHECK(Size("512 B") == 512);
  CHECK(Size("9223372036854775807") == INT64_MAX);
  CHECK(Size("9223372036854775807B") == INT64_MAX);
}

TEST_CASE("units: ParseSize decimal units are powers of 1000") {
  CHECK(Size("1KB") == 1000);
  CHECK(Size("1MB") == 1000000);
  CHECK(Size("1GB") == 1000000000);
  CHECK(Size("1TB") == 1000000000000);
  CHECK(Size("24GB") == 24000000000);
  CHECK(Size("1.5 GB") == 1500000000);
  CHECK(Size("2.5KB") == 2500);
}

TEST_CASE("units: ParseSize binary units are powers of 1024") {
  CHECK(Size("1KiB") == kKiB);
  CHECK(Size("1MiB") == kMiB);
  CHECK(Size("1GiB") == kGiB);
  CHECK(Size("1TiB") == kTiB);
  CHECK(Size("24GiB") == 24 * kGiB);
  CHECK(Size("24 GiB") == 24 * kGiB);
  CHECK(Size("1.5GiB") == 3 * kGiB / 2);
  CHECK(Size("0.5MiB") == kMiB / 2);
  CHECK(Size("80GiB") == 80 * kGiB);
  CHECK(Size("8388607TiB") == 8388607 * kTiB);
}

TEST_CASE("units: ParseSize decimals with a unit round to the nearest byte") {
  CHECK(Size("1.001KiB") == 1025);  // 1025.024
  CHECK(Size("0.0001KB") == 0);     // 0.1 byte
  CHECK(Size(".5KiB") == 512);
  CHECK(Size("3.KiB") == 3 * kKiB);
}

TEST_CASE("units: ParseSize rejects malformed text") {
  for (const char* text :
       {"",     "abc",  "-1GiB", "-1",  "1.2.3", "5XB", ".",   "GiB",  "1 GiB ", " 1GiB",
        "1gib", "1Gib", "1G",    "1e9", "1,024", "+5",  "1 2", "0x10", "1KiBB",  "1  GiB\n"}) {
    CAPTURE(text);
    CHECK(Reject(text) == Invalid(text));
  }
}

TEST_CASE("units: ParseSize rejects values over 2^63-1 bytes") {
  CHECK(Reject("99999999999999999999") ==
        "size \"99999999999999999999\" is larger than 2^63-1 bytes");
  CHECK(Reject("9223372036854775808") ==
        "size \"9223372036854775808\" is larger than 2^63-1 bytes");
  CHECK(Reject("99999999999999999999B") ==
        "size \"99999999999999999999B\" is larger than 2^63-1 bytes");
  CHECK(Reject("9000000TiB") == "size \"9000000TiB\" is larger than 2^63-1 bytes");
  CHECK(Reject("8388608TiB") == "size \"8388608TiB\" is larger than 2^63-1 bytes");  // 2^63
  CHECK(Reject("10000000TB") == "size \"10000000TB\" is larger than 2^63-1 bytes");
  CHECK(Reject("1" + std::string(400, '0') + "GiB") ==
        "size \"1" + std::string(400, '0') + "GiB\" is larger than 2^63-1 bytes");
}

TEST_CASE("units: FormatBytes") {
  CHECK(FormatBytes(0) == "0 B");
  CHECK(FormatBytes(1) == "1 B");
  CHECK(FormatBytes(512) == "512 B");
  CHECK(FormatBytes(1023) == "1023 B");
  CHECK(FormatBytes(1024) == "1.00 KiB");
  CHECK(FormatBytes(1536) == "1.50 KiB");
  CHECK(FormatBytes(196 * kKiB) == "196.00 KiB");
  CHECK(FormatBytes(kMiB) == "1.00 MiB");
  CHECK(FormatBytes(5689940) == "5.43 MiB");
  CHECK(FormatBytes(kGiB) == "1.00 GiB");
  CHECK(FormatBytes(3 * kGiB / 2) == "1.50 GiB");
  CHECK(FormatBytes(24 * kGiB) == "24.00 GiB");
  CHECK(FormatBytes(7301234688) == "6.80 GiB");
  CHECK(FormatBytes(kTiB) == "1.00 TiB");
  CHECK(FormatBytes(INT64_MAX) == "8.00 EiB");
}

// Values just under a unit boundary print as "1.00" of the next unit,
// never "1024.00" of the smaller one.
TEST_CASE("units: FormatBytes never prints 1024.00 of a unit") {
  CHECK(FormatBytes(kMiB - 1) == "1.00 MiB");
  CHECK(FormatBytes(kGiB - 1) == "1.00 GiB");
  CHECK(FormatBytes(kTiB - 1) == "1.00 TiB");
  CHECK(FormatBytes(kMiB - 5 * kKiB) == "1019.00 KiB");
}

TEST_CASE("units: ParseSize and FormatBytes agree on round values") {
  for (const char* text : {"1KiB", "1MiB", "1GiB", "1TiB", "24GiB", "1.5GiB"}) {
    CAPTURE(text);
    int64_t v = Size(text);
    std::string formatted = FormatBytes(v);
    // "1.50 GiB" parses back to the same number of bytes.
    CHECK(Size(formatted) == v);
  }
}

}  // namespace memplan
