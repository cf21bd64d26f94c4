#include "analyzer/ir/graph.h"

#include <doctest/doctest.h>

namespace memplan {
namespace {

Tensor MakeTensor(const std::string& id, std::vector<int64_t> dims, TensorKind kind) {
  Tensor t;
  t.id = id;
  std::vector<Dim> shape;
  for (int64_t d : dims) shape.push_back(Dim{d, ""});
  t.shape = Shape(shape);
  t.kind = kind;
  return t;
}

Op MakeOp(const std::string& id, std::vector<int> in, std::vector<int> out) {
  Op op;
  op.id = id;
  op.type = "relu";
  op.inputs.assign(in.begin(), in.end());
  op.outputs.assign(out.begin(), out.end());
  return op;
}

TEST_CASE("graph: Finalize derives bytes, bases and producers") {
  Graph g;
  g.tensors = {MakeTensor("w", {4, 4}, TensorKind::kParameter),
               MakeTensor("h", {4, 4}, TensorKind::kActivation),
               MakeTensor("v", {16}, TensorKind::kActivation),
               MakeTensor("vv", {2, 8}, TensorKind::kActivation)};
  g.tensors[2].alias_of = 1;
  g.tensors[3].alias_of = 2;
  g.ops = {MakeOp("f", {0}, {1}), MakeOp("view", {1}, {2}), MakeOp("view2", {2}, {3})};
  std::string err;
  REQUIRE(g.Finalize(&err));
  CHECK(g.tensors[1].bytes == 64);
  CHECK(g.tensors[3].base == 1);
  CHECK(g.OwnedBytes(3) == 0);
  CHECK(g.tensors[2].producer == 1);
  CHECK(g.ResidentBytes() == 64);
  CHECK_FALSE(g.joint);
  CHECK(g.FindTensor("vv") == 3);
  CHECK(g.FindOp("view2") == 2);
}

TEST_CASE("graph: Finalize rejects what a builder of the IR could get wrong") {
  std::string err;
  Graph range;
  range.tensors = {MakeTensor("a", {1}, TensorKind::kInput)};
  range.ops = {MakeOp("f", {0}, {7})};
  CHECK_FALSE(range.Finalize(&err));
  CHECK(err == "op 'f' refers to a tensor index out of range");

  Graph cycle;
  cycle.tensors = {MakeTensor("a", {1}, TensorKind::kActivation),
                   MakeTensor("b", {1}, TensorKind::kActivation)};
  cycle.tensors[0].alias_of = 1;
  cycle.tensors[1].alias_of = 0;
  CHECK_FALSE(cycle.Finalize(&err));
  CHECK(err == "alias_of cycle through tensor 'a'");

  Graph order;
  order.tensors = {MakeTensor("a", {1}, TensorKind::kActivation),
                   MakeTensor("b", {1}, TensorKind::kActivation)};
  order.ops = {MakeOp("g", {0}, {1}), MakeOp("f", {}, {0})};
  CHECK_FALSE(order.Finalize(&err));
  CHECK(err == "op 'g' reads tensor 'a' before it is produced");

  Graph twice;
  twice.tensors = {MakeTensor("a", {1}, TensorKind::kActivation)};
  twice.ops = {MakeOp("f", {}, {0}), MakeOp("g", {}, {0})};
  CHECK_FALSE(twice.Finalize(&err));
  CHECK(err == "tensor 'a' is produced by both 'f' and 'g'");
}

TEST_CASE("graph: all bytes together are limited to 2^61 so live sums stay exact") {
  std::string err;
  Graph big;
  // Two tensors of 2^60 bytes each pass; a third goes over 2^61.
  for (const char* id : {"a", "b"})
    big.tensors.push_back(MakeTensor(id, {int64_t{1} << 58}, TensorKind::kInput));
  CHECK(big.Finalize(&err));
  big.tensors.push_back(MakeTensor("c", {1}, TensorKind::kInput));
  CHECK_FALSE(big.Finalize(&err));
  CHECK(err ==
        "the tensors and workspaces of this graph add up to 2305843009213693956 bytes; memplan "
        "handles at most 2^61 bytes (2 EiB)");
}

}  // namespace
}  // namespace memplan
