// The bracket search of the micro-batch search (microbatch.h) above
// kExhaustiveBatches, as a policy apart from the planning it drives: which
// batch to try next, given what the tries so far showed.
//
// Recipe: the bracket is [lo, hi] with lo fitting (or 0) and hi not. Each
// try is the model's guess (microbatch.cc, Guess: where the bytes would reach
// the budget if they grew linearly), clamped into the open bracket, and
// the batch above it is tried beside it when a second thread is free (so a
// right guess is confirmed at once). After two guesses in a row that did not
// halve the bracket, one try without the model: the midpoint, except the
// first time the last try fitted (the guesses crept up from below: the
// slope comes from a batch far over the budget, whose plan could not
// compress its bytes as far as plans near the boundary do, so the line
// falls short), when it is lo + 1 (with lo + 2 beside it), which ends the
// search if the guesses had reached the boundary. Then the guesses again.
//
// Complexity: with fitting monotone in the batch, the same answer as
// bisection, in at most 3 log2(N) + 3 tries even where the model is wrong:
// every third try at least halves the bracket, but for the one lo + 1.
// Where fitting is not monotone (reserved bytes of plans made at different
// allocation budgets), the answer is a batch that fits with the one above
// it not fitting, which another order of tries may place elsewhere.
//
// Where it falls short: the model's guess is only as good as a line through
// the baseline at batches 1 and 2 and the nearest batch over the budget;
// guesses that creep cost a try or two more than a perfect guess, and
// lo + 1 is one try more than the midpoint would have been where the
// boundary is far above the guesses.
#ifndef MEMPLAN_ANALYZER_DRIVERS_BATCH_BRACKET_H_
#define MEMPLAN_ANALYZER_DRIVERS_BATCH_BRACKET_H_

#include <cstdint>
#include <limits>

namespace memplan {

class BatchBracket {
 public:
  static constexpr int64_t kNoGuess = std::numeric_limits<int64_t>::min();

  // fits(lo) (lo 0: nothing known to fit), !fits(hi); lo < hi.
  BatchBracket(int64_t lo, int64_t hi) : lo_(lo), hi_(hi) {}

  int64_t lo() const { return lo_; }
  int64_t hi() const { return hi_; }
  // True when lo is the answer: hi = lo + 1.
  bool Done() const { return hi_ - lo_ <= 1; }
  // Whether Next uses a guess this time (else the caller may skip making one).
  bool WantsGuess() const { return stalls_ < 2; }

  // The batch to try next, in (lo, hi); `guess` is the model's (kNoGuess:
  // none). Call only while !Done().
  int64_t Next(int64_t guess);

  // The outcome of the batch Next returned and, when `above_known`, of the
  // one above it (tried beside it; ignored when that is hi).
  void Record(bool fits, bool above_known, bool above_fits);

 private:
  int64_t lo_, hi_;
  int64_t tried_ = 0;     // the batch Next returned
  int64_t width_ = 0;     // hi - lo when it did
  bool guessed_ = false;  // whether that was the model's guess
  int stalls_ = 0;        // guesses in a row that did not halve the bracket
  bool rising_ = false;   // the last try fitted
  bool stepped_ = false;  // whether a try was lo + 1 after stalled guesses
};

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_DRIVERS_BATCH_BRACKET_H_
