// Check(cond): a fuzz target's invariant. On failure it names the file, line
// and condition and aborts, which libFuzzer and the replay tests report as a
// finding.
#ifndef MEMPLAN_FUZZ_FUZZ_CHECK_H_
#define MEMPLAN_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define Check(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

#endif  // MEMPLAN_FUZZ_FUZZ_CHECK_H_
