// What the allocator models see of a step: buffers as plain intervals over
// the program's steps, with no graph behind them.
#ifndef MEMPLAN_ANALYZER_IR_BUFFER_INTERVAL_H_
#define MEMPLAN_ANALYZER_IR_BUFFER_INTERVAL_H_

#include <cstdint>

namespace memplan {

// A buffer's lifetime: allocated when step alloc_step starts (-1: resident),
// released by step free_step (steps.size(): alive at the end).
struct BufferInterval {
  int owner = -1;
  int64_t bytes = 0;
  int alloc_step = -1;
  int free_step = -1;
};

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_IR_BUFFER_INTERVAL_H_
