// The three-module graph the parallel tests compute peaks on by hand.
#ifndef MEMPLAN_TESTS_PARALLEL_THREE_H_
#define MEMPLAN_TESTS_PARALLEL_THREE_H_

#include <cstdint>

namespace memplan::parallel::testing_three {

constexpr int64_t U = 1024;  // one [256] float32 tensor

// Three modules, one parameter each: a = x * w0 (l0), y = a * w1 (l1),
// z = y * w2 (l2), loss = mean(z) (scope "loss"). Lowered backward:
// loss.grad.seed, l.bw (z.grad from loss.grad), f2.bw (z.grad, y, w2 ->
// y.grad, w2.grad), f1.bw (y.grad, a, w1 -> a.grad, w1.grad), f0.bw (a.grad,
// x -> w0.grad: x needs no gradient).
inline constexpr const char* kThree = R"({"format": "memplan.graph/1", "name": "three", "tensors": [
    {"id": "x", "shape": [256], "dtype": "float32", "kind": "input"},
    {"id": "w0", "shape": [256], "dtype": "float32", "kind": "parameter"},
    {"id": "w1", "shape": [256], "dtype": "float32", "kind": "parameter"},
    {"id": "w2", "shape": [256], "dtype": "float32", "kind": "parameter"},
    {"id": "a", "shape": [256], "dtype": "float32"},
    {"id": "y", "shape": [256], "dtype": "float32"},
    {"id": "z", "shape": [256], "dtype": "float32"},
    {"id": "loss", "shape": [], "dtype": "float32"}],
  "ops": [
    {"id": "f0", "type": "mul", "inputs": ["x", "w0"], "outputs": ["a"], "scope": "l0"},
    {"id": "f1", "type": "mul", "inputs": ["a", "w1"], "outputs": ["y"], "scope": "l1"},
    {"id": "f2", "type": "mul", "inputs": ["y", "w2"], "outputs": ["z"], "scope": "l2"},
    {"id": "l", "type": "mean", "inputs": ["z"], "outputs": ["loss"], "scope": "loss"}],
  "outputs": ["loss"]})";

}  // namespace memplan::parallel::testing_three

#endif  // MEMPLAN_TESTS_PARALLEL_THREE_H_
