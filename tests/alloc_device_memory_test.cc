// The whole device: presets, overrides and their exact errors, the total.
#include <doctest/doctest.h>

#include <string>

#include "analyzer/alloc/device_memory.h"

namespace memplan::alloc {
namespace {

std::string ConfError(const std::string& text) {
  DeviceMemory d;
  REQUIRE(FindDeviceMemory("h100", &d));
  const DeviceMemory before = d;
  std::string err;
  CHECK_FALSE(ParseDeviceConf(text, &d, &err));
  CHECK(d.cuda_context_bytes == before.cuda_context_bytes);
  CHECK(d.capacity_bytes == before.capacity_bytes);
  return err;
}

TEST_CASE("device memory: presets name their sources' numbers") {
  DeviceMemory h100, h200, a100, none;
  REQUIRE(FindDeviceMemory("H100", &h100));
  REQUIRE(FindDeviceMemory("h200", &h200));
  REQUIRE(FindDeviceMemory("a100", &a100));
  CHECK_FALSE(FindDeviceMemory("v100", &none));
  CHECK(DeviceMemoryNames() == "h100, h200, a100");
  CHECK(h100.capacity_bytes == 81050LL * 1024 * 1024);
  CHECK(h200.capacity_bytes == 143155LL * 1024 * 1024);
  // sm90: ":4096:8"; before it ":4096:2:16:8".
  CHECK(h100.cublas_workspace_bytes == 33554432);
  CHECK(a100.cublas_workspace_bytes == 8519680);
  CHECK(h100.cuda_context_is_estimate);
  CHECK(LibraryWorkspaces(h100) == std::vector<int64_t>{33554432});
}

TEST_CASE("device memory: overrides") {
  DeviceMemory d;
  REQUIRE(FindDeviceMemory("a100", &d));
  std::string err;
  REQUIRE_MESSAGE(ParseDeviceConf("capacity=40GiB,cuda_context=450MiB,"
                                  "cublas_workspace_config=:4096:2:16:8:1024:1,"
                                  "cublaslt_workspace=4MiB",
                                  &d, &err),
                  err);
  CHECK(d.capacity_bytes == 40LL << 30);
  CHECK(d.cuda_context_bytes == 450LL << 20);
  CHECK_FALSE(d.cuda_context_is_estimate);
  CHECK(d.cublas_workspace_bytes == 8519680 + 1024 * 1024);
  CHECK(LibraryWorkspaces(d) == std::vector<int64_t>{8519680 + 1024 * 1024, 4 << 20});
  REQUIRE(ParseDeviceConf("", &d, &err));  // nothing to change
  CHECK(d.capacity_bytes == 40LL << 30);
}

TEST_CASE("device memory: bad overrides name the key") {
  CHECK(ConfError("ram=1GiB") ==
        "unknown key \"ram\": expected capacity, cuda_context, cublas_workspace, "
        "cublas_workspace_config or cublaslt_workspace (key=value, comma-separated)");
  CHECK(ConfError("cublas_workspace_config=:4096") ==
        "cublas_workspace_config: expected \":SIZE_KiB:COUNT\" pairs (e.g. :4096:8), found "
        "\":4096\"");
  CHECK(ConfError("cuda_context=lots").rfind("cuda_context: ", 0) == 0);
  CHECK(ConfError("capacity=1GiB,") ==
        "unknown key \"\": expected capacity, cuda_context, cublas_workspace, "
        "cublas_workspace_config or cublaslt_workspace (key=value, comma-separated)");
}

TEST_CASE("device memory: the total is reserved plus the context, against the capacity") {
  DeviceMemory d;
  REQUIRE(FindDeviceMemory("h100", &d));
  DeviceTotal t = TotalOnDevice(d, 1LL << 30);
  CHECK(t.total_bytes == (1LL << 30) + 600LL * 1024 * 1024);
  CHECK(t.fits);
  t = TotalOnDevice(d, d.capacity_bytes);
  CHECK_FALSE(t.fits);
}

}  // namespace
}  // namespace memplan::alloc
