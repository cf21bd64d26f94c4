#include "analyzer/base/version.h"

#ifndef MEMPLAN_VERSION
#define MEMPLAN_VERSION "0.0.0"
#endif

namespace memplan {

const char* MemplanVersion() { return MEMPLAN_VERSION; }

}  // namespace memplan
