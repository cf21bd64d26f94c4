// SHA-256 (FIPS 180-4), for the graph_sha256 of plans: a plan names the exact
// bytes of the graph file it was made for.
#ifndef MEMPLAN_ANALYZER_BASE_SHA256_H_
#define MEMPLAN_ANALYZER_BASE_SHA256_H_

#include <string>
#include <string_view>

namespace memplan {

// The digest of `bytes` as 64 lower-case hex digits.
std::string Sha256Hex(std::string_view bytes);

// The digest of the bytes of file `path` (read through MappedFile: no copy);
// false with "cannot read PATH: <why>".
bool FileSha256Hex(const std::string& path, std::string* hex, std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_SHA256_H_
