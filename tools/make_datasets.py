"""Writes the example models of ortlite.datasets (ortlite/datasets/*.onnx).

    python tools/make_datasets.py [OUTDIR]   (default: ortlite/datasets)

They are the three examples onnxruntime's Python API documents and its tests read through
onnxruntime.datasets.get_example(name), rebuilt from their definitions:
  mul_1.onnx       Y = X * W, X float [3, 2], W = [[1, 2], [3, 4], [5, 6]] (opset 7, IR 4)
  sigmoid.onnx     y = Sigmoid(x), x float [3, 4, 5] (opset 9)
  logreg_iris.onnx a logistic regression over two features and three classes: LinearClassifier
                   (LOGISTIC) -> Normalizer (L1) -> ZipMap, outputs `label` and
                   `probabilities` (ai.onnx.ml 1). The coefficients are the published ones of
                   that example (scikit-learn's LogisticRegression fitted on iris), so that its
                   documented outputs hold.
The files are written deterministically (no timestamps or random names): running the script
again gives the same bytes.
"""

import os
import sys

from onnx import TensorProto, helper, numpy_helper, save

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "ortlite", "datasets")

IRIS_COEFFICIENTS = [0.38574114441871643, 1.3805406093597412, -2.1314499378204346,
                     -0.9928048253059387, 0.6427745223045349, -1.748938798904419,
                     0.5150966048240662, -1.4053475856781006, -1.7241191864013672,
                     -1.1595137119293213, 2.247884750366211, 2.428391456604004]
IRIS_INTERCEPTS = [0.2496291995048523, 0.582027792930603, -0.9416166543960571]


def model(graph, opsets, ir_version):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                          ir_version=ir_version, producer_name="ortlite")
    return m


def mul_1():
    w = numpy_helper.from_array(np.array([[1, 2], [3, 4], [5, 6]], np.float32), "W")
    g = helper.make_graph([helper.make_node("Mul", ["X", "W"], ["Y"])], "mul test",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 2])], [w])
    return model(g, [("", 7)], 4)  # IR 4: an initializer need not be a graph input


def sigmoid():
    g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "test_sigmoid",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 5])])
    return model(g, [("", 9)], 3)


def logreg_iris():
    ml = "ai.onnx.ml"
    nodes = [
        helper.make_node("LinearClassifier", ["float_input"], ["label", "probability_tensor"],
                         domain=ml, classlabels_ints=[0, 1, 2], coefficients=IRIS_COEFFICIENTS,
                         intercepts=IRIS_INTERCEPTS, multi_class=0, post_transform="LOGISTIC"),
        helper.make_node("Normalizer", ["probability_tensor"], ["probability_tensor_normalized"],
                         domain=ml, norm="L1"),
        helper.make_node("ZipMap", ["probability_tensor_normalized"], ["probabilities"],
                         domain=ml, classlabels_int64s=[0, 1, 2]),
    ]
    probs = helper.make_sequence_type_proto(helper.make_map_type_proto(
        TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, None)))
    g = helper.make_graph(nodes, "logreg_iris",
                          [helper.make_tensor_value_info("float_input", TensorProto.FLOAT, [3, 2])],
                          [helper.make_tensor_value_info("label", TensorProto.INT64, [3]),
                           helper.make_value_info("probabilities", probs)])
    return model(g, [(ml, 1)], 3)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, make in (("mul_1.onnx", mul_1), ("sigmoid.onnx", sigmoid),
                       ("logreg_iris.onnx", logreg_iris)):
        save(make(), os.path.join(OUT, name))
        print(os.path.join(OUT, name))
