// A graph where the order of recomputation decides the least peak
// (checkpoint.h: reverse_order). fd.bw reads p (a chain of three adds, 16 KiB
// each) and q (the sum of hq, a 112 KiB expansion). With both dropped,
// remaking q first holds only the 16 KiB q while p's chain runs; remaking p
// first holds p while hq's 112 KiB exist. fz.bw, where z.grad (128 KiB) is
// alive, is the peak when either is kept.
#ifndef MEMPLAN_TESTS_ORDER_GRAPH_H_
#define MEMPLAN_TESTS_ORDER_GRAPH_H_

namespace memplan::testing {

inline const char* kOrderGraph = R"({"format": "memplan.graph/1", "tensors": [
    {"id": "x1", "shape": [64, 64], "dtype": "float32", "kind": "input"},
    {"id": "w1", "shape": [64, 64], "dtype": "float32", "kind": "parameter"},
    {"id": "x3", "shape": [1, 64], "dtype": "float32", "kind": "input"},
    {"id": "w3", "shape": [1, 64], "dtype": "float32", "kind": "parameter"},
    {"id": "s3", "shape": [1, 64], "dtype": "float32"},
    {"id": "h1", "shape": [64, 64], "dtype": "float32"},
    {"id": "h2", "shape": [64, 64], "dtype": "float32"},
    {"id": "p", "shape": [64, 64], "dtype": "float32"},
    {"id": "hq", "shape": [448, 64], "dtype": "float32"},
    {"id": "q", "shape": [64, 64], "dtype": "float32"},
    {"id": "d", "shape": [64, 64], "dtype": "float32"},
    {"id": "z", "shape": [512, 64], "dtype": "float32"},
    {"id": "loss", "shape": [], "dtype": "float32"}],
  "ops": [
    {"id": "fs3", "type": "add", "inputs": ["x3", "w3"], "outputs": ["s3"]},
    {"id": "fhq", "type": "expand", "inputs": ["s3"], "outputs": ["hq"]},
    {"id": "fq", "type": "sum", "inputs": ["hq"], "outputs": ["q"]},
    {"id": "fh1", "type": "add", "inputs": ["x1", "w1"], "outputs": ["h1"]},
    {"id": "fh2", "type": "add", "inputs": ["h1", "w1"], "outputs": ["h2"]},
    {"id": "fp", "type": "add", "inputs": ["h2", "w1"], "outputs": ["p"]},
    {"id": "fd", "type": "mul", "inputs": ["p", "q"], "outputs": ["d"]},
    {"id": "fz", "type": "expand", "inputs": ["d"], "outputs": ["z"]},
    {"id": "l", "type": "mean", "inputs": ["z"], "outputs": ["loss"]}],
  "outputs": ["loss"]})";

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_ORDER_GRAPH_H_
