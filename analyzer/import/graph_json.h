// Reading and writing memplan.graph/1 documents.
//
// Errors have the form "FILE: POINTER: what was found; expected what" where
// POINTER is the JSON pointer of the offending value (RFC 6901).
#ifndef MEMPLAN_ANALYZER_IMPORT_GRAPH_JSON_H_
#define MEMPLAN_ANALYZER_IMPORT_GRAPH_JSON_H_

#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzer/ir/graph.h"

namespace memplan {

struct GraphLoadOptions {
  // --set NAME=VALUE: symbol overrides, applied before shapes are resolved.
  std::vector<std::pair<std::string, int64_t>> symbol_overrides;
};

// Parses `text` (named `file` in errors) into a finalized graph. The source
// object is kept whole (Graph::source); its target_device, outputs_held and
// warnings (Graph::export_warnings; each entry's op must name an op) are
// checked and read.
bool ParseGraph(std::string_view text, const std::string& file, const GraphLoadOptions& options,
                Graph* graph, std::string* err);
bool LoadGraphFile(const std::string& path, const GraphLoadOptions& options, Graph* graph,
                   std::string* err);

// Serializes a graph as memplan.graph/1 (symbols kept symbolic), one tensor
// or op per line, streamed so memory does not grow with the output.
void WriteGraphJson(const Graph& graph, std::ostream& out);
std::string GraphToJson(const Graph& graph);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_IMPORT_GRAPH_JSON_H_
