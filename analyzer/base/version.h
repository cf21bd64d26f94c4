// The memplan release this binary was built from (CMake's PROJECT_VERSION).
#ifndef MEMPLAN_ANALYZER_BASE_VERSION_H_
#define MEMPLAN_ANALYZER_BASE_VERSION_H_

namespace memplan {

const char* MemplanVersion();

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_BASE_VERSION_H_
