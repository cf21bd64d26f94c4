// Random forward-only graphs for property tests: a DAG of elementwise,
// linear, normalization and view ops over tensors of a few sizes, with
// fan-out (some tensors read many times) and parameters mixed in.
#ifndef MEMPLAN_TESTS_RANDOM_GRAPH_H_
#define MEMPLAN_TESTS_RANDOM_GRAPH_H_

#include <random>
#include <string>
#include <vector>

namespace memplan::testing {

inline std::string RandomForwardGraph(uint32_t seed, int num_ops) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  struct T {
    std::string id;
    int size;
  };
  std::vector<T> acts;
  std::string tensors, ops;
  auto add_tensor = [&](const std::string& id, int size, const char* kind) {
    if (!tensors.empty()) tensors += ",\n";
    tensors += "{\"id\": \"" + id + "\", \"shape\": [" + std::to_string(size) +
               "], \"dtype\": \"float32\"" +
               (kind ? std::string(", \"kind\": \"") + kind + "\"" : "") + "}";
  };
  const int sizes[] = {64, 128, 256};
  add_tensor("x", 128, "input");
  acts.push_back({"x", 128});
  int params = 0;
  auto new_param = [&](int size) {
    std::string id = "p" + std::to_string(params++);
    add_tensor(id, size, "parameter");
    return id;
  };
  auto emit = [&](const std::string& id, const std::string& type,
                  const std::vector<std::string>& in, const std::string& out) {
    if (!ops.empty()) ops += ",\n";
    ops += "{\"id\": \"" + id + "\", \"type\": \"" + type + "\", \"inputs\": [";
    for (size_t i = 0; i < in.size(); ++i) ops += (i ? ", \"" : "\"") + in[i] + "\"";
    ops += "], \"outputs\": [\"" + out + "\"], \"scope\": \"m" + std::to_string(pick(4)) + "\"}";
  };
  // A recent tensor most of the time, any earlier one sometimes (fan-out).
  auto input = [&]() -> const T& {
    int n = static_cast<int>(acts.size());
    return pick(3) == 0 ? acts[pick(n)] : acts[std::max(0, n - 1 - pick(3))];
  };
  const char* unary[] = {"relu", "tanh", "gelu", "sigmoid", "softmax", "dropout", "layer_norm"};
  for (int i = 0; i < num_ops; ++i) {
    std::string op = "op" + std::to_string(i);
    std::string out = "t" + std::to_string(i);
    int kind = i == 0 ? 0 : pick(10);
    if (kind <= 2) {  // mix in a parameter
      const T& a = input();
      std::string p = new_param(a.size);
      emit(op, pick(2) ? "mul" : "add", {a.id, p}, out);
      add_tensor(out, a.size, nullptr);
      acts.push_back({out, a.size});
    } else if (kind <= 4) {  // two activations of one size
      const T& a = input();
      const T* b = nullptr;
      for (int tries = 0; tries < 8 && !b; ++tries) {
        const T& c = input();
        if (c.size == a.size) b = &c;
      }
      if (!b) b = &a;
      emit(op, pick(2) ? "add" : "mul", {a.id, b->id}, out);
      add_tensor(out, a.size, nullptr);
      acts.push_back({out, a.size});
    } else if (kind <= 5) {  // linear to another size
      const T& a = input();
      int size = sizes[pick(3)];
      std::string p = new_param(size * 4);
      emit(op, "linear", {a.id, p}, out);
      add_tensor(out, size, nullptr);
      acts.push_back({out, size});
    } else {
      const T& a = input();
      emit(op, unary[pick(7)], {a.id}, out);
      add_tensor(out, a.size, nullptr);
      acts.push_back({out, a.size});
    }
  }
  add_tensor("loss", 1, nullptr);
  emit("loss_fn", "mean", {acts.back().id}, "loss");
  return "{\"format\": \"memplan.graph/1\", \"name\": \"random" + std::to_string(seed) +
         "\", \"symbols\": {}, \"tensors\": [\n" + tensors + "], \"ops\": [\n" + ops +
         "], \"outputs\": [\"loss\"]}";
}

// A random op chain: each op reads the previous op's output (and maybe a
// parameter): linear (new size), elementwise, normalization, with sizes and
// costs that vary, then a mean loss. Activations are [16, size], so they
// outweigh the weights and recomputation pays. time_us is set per op so recompute costs
// differ from op to op.
inline std::string RandomChainGraph(uint32_t seed, int num_ops) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  std::string tensors =
      "{\"id\": \"x\", \"shape\": [16, 96], \"dtype\": \"float32\", \"kind\": \"input\"}";
  std::string ops;
  std::string prev = "x";
  int size = 96;
  const int sizes[] = {32, 64, 96, 128, 256};
  const char* unary[] = {"relu", "tanh", "gelu", "sigmoid", "softmax", "dropout", "layer_norm"};
  for (int i = 0; i < num_ops; ++i) {
    std::string out = "t" + std::to_string(i);
    std::string type;
    std::vector<std::string> in = {prev};
    int kind = pick(6);
    if (kind <= 1) {
      type = "linear";
      int next = sizes[pick(5)];
      std::string p = "w" + std::to_string(i);
      tensors += ",\n{\"id\": \"" + p + "\", \"shape\": [" + std::to_string(size * next) +
                 "], \"dtype\": \"float32\", \"kind\": \"parameter\"}";
      in.push_back(p);
      size = next;
    } else if (kind == 2) {
      type = "mul";
      std::string p = "p" + std::to_string(i);
      tensors += ",\n{\"id\": \"" + p + "\", \"shape\": [16, " + std::to_string(size) +
                 "], \"dtype\": \"float32\", \"kind\": \"parameter\"}";
      in.push_back(p);
    } else {
      type = unary[pick(7)];
    }
    tensors += ",\n{\"id\": \"" + out + "\", \"shape\": [16, " + std::to_string(size) +
               "], \"dtype\": \"float32\"}";
    if (!ops.empty()) ops += ",\n";
    ops += "{\"id\": \"op" + std::to_string(i) + "\", \"type\": \"" + type + "\", \"inputs\": [";
    for (size_t k = 0; k < in.size(); ++k) ops += (k ? ", \"" : "\"") + in[k] + "\"";
    ops += "], \"outputs\": [\"" + out + "\"], \"time_us\": " + std::to_string(1 + pick(40)) +
           ", \"scope\": \"b" + std::to_string(i / 3) + "\"}";
    prev = out;
  }
  tensors += ",\n{\"id\": \"loss\", \"shape\": [], \"dtype\": \"float32\"}";
  ops += ",\n{\"id\": \"loss_fn\", \"type\": \"mean\", \"inputs\": [\"" + prev +
         "\"], \"outputs\": [\"loss\"]}";
  return "{\"format\": \"memplan.graph/1\", \"name\": \"chain" + std::to_string(seed) +
         "\", \"symbols\": {}, \"tensors\": [\n" + tensors + "], \"ops\": [\n" + ops +
         "], \"outputs\": [\"loss\"]}";
}

}  // namespace memplan::testing

#endif  // MEMPLAN_TESTS_RANDOM_GRAPH_H_
