// Byte sizes on the command line and in human output.
#ifndef MEMPLAN_ANALYZER_BASE_UNITS_H_
#define MEMPLAN_ANALYZER_BASE_UNITS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace memplan {

// "24GiB", "1.5 GB", "4096", "512B": B KB MB GB TB (powers of 1000) and KiB
// MiB GiB TiB (powers of 1024). False, with a message quoting the text, on
// anything else, on a negative value, or on a value over 2^63-1 bytes.
bool ParseSize(std::string_view text, int64_t* bytes, std::string* err);

// 1536 -> "1.50 KiB"; below 1 KiB -> "512 B".
std::string FormatBytes(int64_t bytes);

// 1536 -> "1.50 KiB (1536 bytes)": FormatBytes with the exact count beside.
std::string FormatBytesExact(int64_t bytes);

// 1, 2, 4, ...; false for 0 and negative values.
constexpr bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// ASCII case-insensitive equality (preset names: "H100" is "h100").
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_UNITS_H_
