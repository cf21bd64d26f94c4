// Reports of `memplan plan --global-batch`: the JSON report and the summary
// of a micro-batch search (analyzer/drivers/microbatch.h).
#ifndef MEMPLAN_ANALYZER_REPORT_MICROBATCH_REPORT_H_
#define MEMPLAN_ANALYZER_REPORT_MICROBATCH_REPORT_H_

#include <cstdint>
#include <string>

#include "analyzer/drivers/microbatch.h"

namespace memplan {

// "8/100 = 0.08".
std::string LossScale(int64_t micro, int64_t global_batch);

// The plan report for --global-batch (command "plan"): the recommended
// choice at the top (micro_batch, accumulation_steps, last_micro_batch, loss
// scales, predicted), both choices, the search and the batches evaluated.
std::string MicroBatchReportJson(const JointGraph& jg, const std::string& batch_symbol,
                                 const PlannerOptions& options, const MicroBatchResult& r);
std::string MicroBatchSummary(const JointGraph& jg, const std::string& batch_symbol,
                              const PlannerOptions& options, const MicroBatchResult& r);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_REPORT_MICROBATCH_REPORT_H_
