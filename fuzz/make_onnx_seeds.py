#!/usr/bin/python3
"""Writes the seed corpus of fuzz_onnx (fuzz/corpus/fuzz_onnx/*.onnx): small
forward models built with onnx.helper that cover the importer's rules (Gemm,
Conv + BatchNormalization + Relu, shape arithmetic feeding Reshape, the erf
GELU pattern, a symbolic batch, an op without a rule, Split and Concat).

    /usr/bin/python3 fuzz/make_onnx_seeds.py   (needs python3-onnx)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_onnx")


def init(name, shape, dtype=np.float32):
    return numpy_helper.from_array(np.zeros(shape, dtype=dtype), name)


def save(name, nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def main():
    os.makedirs(OUT, exist_ok=True)
    save("mlp", [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/act/Relu"),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], name="/fc2/Gemm", transB=1),
    ], [vi("x", [4, 8])], [vi("y", [4, 3])],
        [init("w1", [16, 8]), init("b1", [16]), init("w2", [3, 16]), init("b2", [3])])
    save("conv_bn", [
        helper.make_node("Conv", ["x", "w"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n", "rm", "rv"],
                         name="/bn/BatchNormalization", training_mode=1),
        helper.make_node("Relu", ["n"], ["r"], name="/relu/Relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="/gap/GlobalAveragePool"),
        helper.make_node("Flatten", ["g"], ["y"], name="/Flatten"),
    ], [vi("x", ["batch", 3, 8, 8])], [vi("y", ["batch", 4])],
        [init("w", [4, 3, 3, 3]), init("s", [4]), init("b", [4]), init("m", [4]), init("v", [4])])
    save("reshape_shape", [
        helper.make_node("Shape", ["x"], ["sh"], name="/Shape"),
        helper.make_node("Gather", ["sh", "zero"], ["n"], name="/Gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="/Unsqueeze"),
        helper.make_node("Concat", ["n1", "rest"], ["target"], name="/Concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"], name="/Reshape"),
        helper.make_node("Transpose", ["r"], ["t"], name="/Transpose", perm=[0, 2, 1]),
        helper.make_node("Softmax", ["t"], ["y"], name="/Softmax", axis=-1),
    ], [vi("x", [2, 6, 4])], [vi("y", [2, 4, 6])],
        [init("zero", [], np.int64), numpy_helper.from_array(np.array([0], np.int64), "axes"),
         numpy_helper.from_array(np.array([6, 4], np.int64), "rest")])
    save("gelu", [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="/fc/MatMul"),
        helper.make_node("Div", ["h", "sqrt2"], ["d"], name="/act/Div"),
        helper.make_node("Erf", ["d"], ["e"], name="/act/Erf"),
        helper.make_node("Add", ["e", "one"], ["a"], name="/act/Add"),
        helper.make_node("Mul", ["h", "a"], ["m"], name="/act/Mul"),
        helper.make_node("Mul", ["m", "half"], ["g"], name="/act/Mul_1"),
        helper.make_node("LayerNormalization", ["g", "ln_w", "ln_b"], ["y"], name="/ln/LayerNorm",
                         axis=-1),
    ], [vi("x", [2, 5, 8])], [vi("y", [2, 5, 8])],
        [init("w", [8, 8]), numpy_helper.from_array(np.array(1.4142135, np.float32), "sqrt2"),
         numpy_helper.from_array(np.array(1.0, np.float32), "one"),
         numpy_helper.from_array(np.array(0.5, np.float32), "half"), init("ln_w", [8]),
         init("ln_b", [8])])
    save("split_concat_unknown", [
        helper.make_node("Split", ["x", "sizes"], ["a", "b"], name="/Split", axis=1),
        helper.make_node("Sigmoid", ["a"], ["sa"], name="/Sigmoid"),
        helper.make_node("Cos", ["b"], ["cb"], name="/Cos"),
        helper.make_node("Concat", ["sa", "cb"], ["c"], name="/Concat", axis=1),
        helper.make_node("ReduceMean", ["c"], ["y"], name="/ReduceMean", keepdims=0),
    ], [vi("x", [3, 10])], [vi("y", [])],
        [numpy_helper.from_array(np.array([4, 6], np.int64), "sizes")])


if __name__ == "__main__":
    main()
