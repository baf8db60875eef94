"""Writes the bundled demo model: a small CNN image classifier (conv / batch-norm / relu /
max-pool / residual block / global average pool / gemm / softmax) with seeded weights.

usage: python tools/make_demo_model.py --out build/demo/cnn_classifier.onnx
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(seed=0):
    rng = np.random.default_rng(seed)
    inits = []
    nodes = []

    def weight(name, *shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        s = scale if scale is not None else np.sqrt(2.0 / fan_in)
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name))
        return name

    def conv_bn_relu(x, name, cin, cout, k=3, stride=1, relu=True):
        w = weight(f"{name}.w", cout, cin, k, k)
        nodes.append(helper.make_node("Conv", [x, w], [f"{name}.conv"], name=f"{name}.conv",
                                      kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride] * 2))
        for p, v in (("scale", 1 + 0.1 * rng.standard_normal(cout)), ("bias", 0.1 * rng.standard_normal(cout)),
                     ("mean", 0.1 * rng.standard_normal(cout)), ("var", 1 + 0.1 * rng.random(cout))):
            inits.append(numpy_helper.from_array(v.astype(np.float32), f"{name}.bn.{p}"))
        out = f"{name}.bn"
        nodes.append(helper.make_node("BatchNormalization",
                                      [f"{name}.conv"] + [f"{name}.bn.{p}" for p in ("scale", "bias", "mean", "var")],
                                      [out], name=f"{name}.bn", epsilon=1e-5))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [f"{name}.relu"], name=f"{name}.relu"))
            out = f"{name}.relu"
        return out

    x = conv_bn_relu("image", "stem", 3, 16)
    nodes.append(helper.make_node("MaxPool", [x], ["pool1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]))
    # Residual block.
    y = conv_bn_relu("pool1", "block1a", 16, 16)
    y = conv_bn_relu(y, "block1b", 16, 16, relu=False)
    nodes.append(helper.make_node("Add", ["pool1", y], ["res1"], name="res1"))
    nodes.append(helper.make_node("Relu", ["res1"], ["res1.relu"], name="res1.relu"))
    z = conv_bn_relu("res1.relu", "down", 16, 32, stride=2)
    nodes.append(helper.make_node("GlobalAveragePool", [z], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat", axis=1))
    weight("fc.w", 10, 32, scale=0.2)
    inits.append(numpy_helper.from_array((0.01 * rng.standard_normal(10)).astype(np.float32), "fc.b"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1))

    graph = helper.make_graph(
        nodes, "cnn_classifier",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="ortlite-demo")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    onnx.save(build(args.seed), args.out)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
