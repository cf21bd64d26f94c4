#include "analyzer/drivers/batch_bracket.h"

#include <algorithm>

namespace memplan {

int64_t BatchBracket::Next(int64_t guess) {
  const int64_t mid = lo_ + (hi_ - lo_) / 2;
  guessed_ = WantsGuess() && guess != kNoGuess;
  if (guessed_) {
    tried_ = std::clamp(guess, lo_ + 1, hi_ - 1);
  } else if (rising_ && !stepped_) {
    tried_ = std::min(lo_ + 1, mid);
    stepped_ = true;
  } else {
    tried_ = mid;
  }
  width_ = hi_ - lo_;
  return tried_;
}

void BatchBracket::Record(bool fits, bool above_known, bool above_fits) {
  (fits ? lo_ : hi_) = tried_;
  if (fits && above_known && tried_ + 1 < hi_) (above_fits ? lo_ : hi_) = tried_ + 1;
  rising_ = fits;
  stalls_ = guessed_ && 2 * (hi_ - lo_) > width_ ? stalls_ + 1 : 0;
}

}  // namespace memplan
