"""Writes the model tools/embed/embed.cc runs: Y = Relu(MatMul(X, W)) repeated DEPTH
times, X [N, N] float32, W an initializer the host recomputes with numpy. The model's
doc string is "N,DEPTH"."""

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=96)
    ap.add_argument("--depth", type=int, default=4)
    a = ap.parse_args()
    n, depth = a.n, a.depth
    w = ((np.arange(n * n, dtype=np.int64).reshape(n, n) % 7) - 3).astype(np.float32) / 8
    nodes, prev = [], "X"
    for i in range(depth):
        nodes.append(helper.make_node("MatMul", [prev, "W"], [f"m{i}"]))
        out = "Y" if i == depth - 1 else f"r{i}"
        nodes.append(helper.make_node("Relu", [f"m{i}"], [out]))
        prev = out
    g = helper.make_graph(nodes, "embed",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [n, n])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [n, n])],
                          initializer=[numpy_helper.from_array(w, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], doc_string=f"{n},{depth}")
    m.ir_version = 8
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
