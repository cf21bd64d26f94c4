// Lowering: derives the backward pass of a forward-only graph (SPEC section 1).
//
// Recipe: propagate requires-grad forward from parameters; walk the forward ops
// in reverse, emitting "<op>.bw" for each op whose outputs carry a gradient and
// whose inputs need one. It reads the output gradients plus what the op-type
// table says the backward saves, and writes one gradient contribution per input
// that needs a gradient (a view of the output gradient where the table says
// so). A tensor with k > 1 contributions gets "<t>.grad.c0..c{k-1}" summed by a
// chain of k-1 binary "accumulate" ops into "<t>.grad", each placed right after
// the contribution it adds; the accumulation mode decides at schedule time
// whether they run in place, out of place or deferred. O(ops + tensors).
#ifndef MEMPLAN_ANALYZER_LOWER_LOWER_H_
#define MEMPLAN_ANALYZER_LOWER_LOWER_H_

#include <string>
#include <vector>

#include "analyzer/ir/graph.h"

namespace memplan {

// `forward` must be finalized and not joint (pass it with std::move to lower
// without a copy). `joint` receives the finalized forward+backward graph, with
// the forward tensors at their original indices; warnings name ops of unknown
// type.
bool LowerToJoint(Graph forward, Graph* joint, std::vector<std::string>* warnings,
                  std::string* err);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_LOWER_LOWER_H_
