#include "analyzer/drivers/batch_bracket.h"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

namespace memplan {
namespace {

// Runs the bracket over [0, n] (n does not fit) as the micro-batch search
// does: `answer` the largest batch that fits, `guess(lo, hi)` the model's
// guess, the batch above each try tried beside it when `pairs`. Returns
// the batches tried, in order (each try, then the one above it).
struct Run {
  int64_t found = -1;
  int64_t tries = 0;  // rounds of tries: a pair is planned at once on two threads
  std::vector<int64_t> tried;
};
Run Search(int64_t n, int64_t answer, const std::function<int64_t(int64_t, int64_t)>& guess,
           bool pairs) {
  Run run;
  BatchBracket bracket(0, n);
  while (!bracket.Done()) {
    const int64_t b = bracket.Next(bracket.WantsGuess() ? guess(bracket.lo(), bracket.hi())
                                                        : BatchBracket::kNoGuess);
    REQUIRE(b > bracket.lo());
    REQUIRE(b < bracket.hi());
    ++run.tries;
    run.tried.push_back(b);
    const bool above = pairs && b + 1 < bracket.hi();
    if (above) run.tried.push_back(b + 1);
    bracket.Record(b <= answer, above, b + 1 <= answer);
  }
  run.found = bracket.lo();
  return run;
}

TEST_CASE("BatchBracket: guesses that creep up from below are followed by the bottom plus one") {
  // Llama-2-13B, 8 ranks, op plans under a reserved budget: the model's
  // guesses (from batch 64, far over) fitted twice without halving the
  // bracket; the midpoint then tried 41 and 42, both far over. Now the
  // try after the two guesses is the bottom plus one.
  const auto low_guess = [](int64_t lo, int64_t) { return lo < 16 ? 16 : lo; };
  const Run run = Search(64, 19, low_guess, /*pairs=*/true);
  CHECK(run.found == 19);
  CHECK(run.tried == std::vector<int64_t>{16, 17, 18, 19, 20, 21});
}

TEST_CASE("BatchBracket: guesses that creep down fall back to the midpoint") {
  const auto high_guess = [](int64_t, int64_t hi) { return hi - 1; };
  const Run run = Search(64, 10, high_guess, /*pairs=*/false);
  CHECK(run.found == 10);
  // 63 and 62 did not halve [0, 64]: the midpoint 31, then guesses again.
  REQUIRE(run.tried.size() >= 3);
  CHECK(run.tried[0] == 63);
  CHECK(run.tried[1] == 62);
  CHECK(run.tried[2] == 31);
}

TEST_CASE("BatchBracket: a right guess is confirmed by the batch above it") {
  const auto right = [](int64_t, int64_t) { return int64_t{37}; };
  const Run run = Search(512, 37, right, /*pairs=*/true);
  CHECK(run.found == 37);
  CHECK(run.tried == std::vector<int64_t>{37, 38});
}

TEST_CASE("BatchBracket: bisection's answer in 3 log2(N) + 3 tries, whatever the guesses") {
  const std::vector<std::function<int64_t(int64_t, int64_t)>> guesses = {
      [](int64_t, int64_t) { return BatchBracket::kNoGuess; },
      [](int64_t lo, int64_t) { return lo; },                         // always too low
      [](int64_t, int64_t hi) { return hi; },                         // always too high
      [](int64_t, int64_t) { return int64_t{1}; },                    // stuck
      [](int64_t lo, int64_t hi) { return (lo * 7 + hi * 3) % 97; },  // arbitrary
  };
  for (int64_t n : {33, 64, 100, 512, 4096}) {
    const int64_t bound = 3 * static_cast<int64_t>(std::ceil(std::log2(n))) + 3;  // the header's
    for (int64_t answer = 0; answer < n; answer += n < 200 ? 1 : 37) {
      for (size_t k = 0; k < guesses.size(); ++k) {
        for (bool pairs : {false, true}) {
          CAPTURE(n);
          CAPTURE(answer);
          CAPTURE(k);
          CAPTURE(pairs);
          const Run run = Search(n, answer, guesses[k], pairs);
          CHECK(run.found == answer);
          CHECK(run.tries <= bound);
        }
      }
    }
  }
}

}  // namespace
}  // namespace memplan
