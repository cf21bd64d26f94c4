// Importing ONNX models: a forward ModelProto becomes a forward-only memplan
// Graph, which LowerToJoint lowers like any other (SPEC section 1).
//
// Recipe:
//  1. Parse the ModelProto (under 2 GiB: protobuf's limit; larger models keep
//     their weights in external data files, which are never opened: only the
//     dims and data types of initializers are read).
//  2. Shapes: every symbolic graph-input dimension (`dim_param`) becomes a
//     graph symbol whose value comes from --set (none: an error, as a peak
//     at a guessed batch would mislead). With those values,
//     onnx::shape_inference::InferShapes runs to a fixed point:
//     between rounds, the small integer tensors that compute shapes
//     (Constant, Shape, Gather, Concat, Unsqueeze, Cast, arithmetic, Slice)
//     are evaluated here and handed back to inference as initializers, so a
//     Reshape to `x.size(0), 2, c // 2, ...` gets its shape. Any data tensor
//     still without a concrete shape is an error naming it.
//  3. Tensors: graph inputs -> `input`; float initializers -> `parameter`
//     (BatchNormalization's running statistics -> `buffer`); integer and
//     scalar initializers, Constant outputs and everything computed from them
//     alone are static: they get no tensor, and are dropped from the inputs of
//     the ops that read them (a non-scalar static tensor read as data becomes
//     a `buffer`). Shape-only inputs (Reshape's shape, axes, pads, Clip's
//     bounds, Dropout's ratio) are dropped too.
//  4. Ops: ONNX types map to the op table's ATen names with its input order
//     (Gemm with transB -> linear(x, w, b), else addmm(c, a, b) / mm;
//     BatchNormalization -> batch_norm(x, w, b, mean, var) with its updated
//     statistics dropped; Dropout -> dropout (its mask comes from the table);
//     MaxPool / AveragePool / GlobalAveragePool -> max_pool2d / avg_pool2d /
//     adaptive_avg_pool2d; torch's erf GELU (Div, Erf, Add, Mul, Mul) fused
//     into one gelu, and x * sigmoid(x) into one silu, as eager runs them).
//     Clip becomes hardtanh, LeakyRelu leaky_relu (their backward saves the
//     input). Flatten, Reshape,
//     Transpose, Squeeze, Unsqueeze, Slice, Split and Expand outputs are
//     views (alias_of), as in eager PyTorch, except a Reshape / Flatten of a
//     transposed tensor, which copies (eager's `.contiguous()`). Identity and zero Pad forward
//     their input. Any other type keeps its ONNX name, so the lowering treats it conservatively and
//     warns once per type.
//  5. Loss: a training step needs one. A model whose first output is a float
//     scalar uses it; otherwise a cross_entropy over that output (as
//     `memplan_torch.py` and its measured step use) against a new int64
//     input `target` (the output's shape without its last dimension) is
//     added, and its scalar `loss` is the graph output.
//  6. Scope: torch names nodes "/layer1/layer1.0/conv1/Conv": the path
//     without its last component, each level written "PARENT.CHILD" after
//     PARENT or "CHILD" alone, joined as the module's qualified name
//     ("layer1.0.conv1", as memplan_torch.py scopes ops). Other names give no
//     scope.
//
// Errors: "FILE: LOCATOR: what was found; expected what", with LOCATOR like
// /graph/node/12 (name "Conv_3").
#ifndef MEMPLAN_ANALYZER_IMPORT_ONNX_IMPORT_H_
#define MEMPLAN_ANALYZER_IMPORT_ONNX_IMPORT_H_

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/import/graph_json.h"
#include "analyzer/ir/graph.h"

namespace memplan {

// Whether this build has the ONNX importer (CMake found libonnx-dev).
bool OnnxSupported();

// Whether `bytes` is a JSON document: its first non-whitespace byte is '{'.
// Anything else is read as an ONNX model.
bool LooksLikeJson(std::string_view bytes);

// ModelProto bytes (file `file`) -> a finalized forward-only graph.
// `warnings` gets the importer's notes (e.g. graph outputs left out).
// Without ONNX support: false, with an error saying so. ONNX's shape
// inference runs in a forked child process (libonnx 1.12 can crash on a
// malformed model), so call this before starting other threads.
bool ImportOnnx(std::string_view bytes, const std::string& file, const GraphLoadOptions& options,
                Graph* graph, std::vector<std::string>* warnings, std::string* err);

// "/layer1/layer1.0/conv1/Conv" -> "layer1.0.conv1"; "Conv_3" -> "".
std::string ScopeFromOnnxNodeName(std::string_view name);

}  // namespace memplan

#endif  // MEMPLAN_ANALYZER_IMPORT_ONNX_IMPORT_H_
