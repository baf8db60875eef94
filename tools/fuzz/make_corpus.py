"""Writes the fuzzing seed corpus: small valid ONNX models built with onnx.helper.

    python tools/fuzz/make_corpus.py --out build/fuzz/seeds

One file per model: an MLP, a small CNN, transformer pieces (attention, layer norm, GELU),
one model per operator family (elementwise math, activations, comparisons/logic, NN,
reductions, tensor/data movement, casts), string and float16 initializers, a model-local
function, Constant nodes of every attribute form, symbolic dims. All self-contained (no
external data). Also importable: `models()` yields (name, ModelProto) pairs, used by
tests/safety/test_bad_inputs.py as its valid base models.
"""

import argparse
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), opset=17, functions=(), extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(graph, opset_imports=opsets, functions=list(functions),
                          producer_name="ortlite-fuzz-corpus")
    m.ir_version = min(m.ir_version, 10) if opset >= 21 else min(m.ir_version, 8)
    return m


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _w(name, shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)


def _i64(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def mlp():
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["m"]),
        helper.make_node("Add", ["m", "b2"], ["z"]),
        helper.make_node("Softmax", ["z"], ["y"], axis=-1),
    ]
    inits = [_w("w1", [8, 4], 1), _w("b1", [8], 2), _w("w2", [8, 3], 3), _w("b2", [3], 4)]
    return _model(nodes, [_vi("x", F, ["N", 4])], [_vi("y", F, ["N", 3])], inits)


def cnn():
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["p"], ["ap"], kernel_shape=[2, 2]),
        helper.make_node("GlobalAveragePool", ["ap"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
    ]
    inits = [_w("w", [4, 2, 3, 3], 1), _w("b", [4], 2), _w("s", [4], 3), _w("bb", [4], 4),
             _w("mu", [4], 5), numpy_helper.from_array(np.ones(4, np.float32), "var"),
             _w("fw", [5, 4], 6), _w("fb", [5], 7)]
    return _model(nodes, [_vi("x", F, [1, 2, 8, 8])], [_vi("y", F, [1, 5])], inits)


def attention():
    # Single-head self-attention with layer norm and GELU (erf form).
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln_s", "ln_b"], ["ln"], axis=-1, epsilon=1e-5),
        n("MatMul", ["ln", "wq"], ["q"]),
        n("MatMul", ["ln", "wk"], ["k"]),
        n("MatMul", ["ln", "wv"], ["v"]),
        n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["qk"]),
        n("Div", ["qk", "scale"], ["qks"]),
        n("Softmax", ["qks"], ["a"], axis=-1),
        n("MatMul", ["a", "v"], ["att"]),
        n("Div", ["att", "sqrt2"], ["d"]),
        n("Erf", ["d"], ["e"]),
        n("Add", ["e", "one"], ["e1"]),
        n("Mul", ["att", "e1"], ["g0"]),
        n("Mul", ["g0", "half"], ["g"]),
        n("Add", ["g", "x"], ["y"]),
    ]
    inits = [_w("ln_s", [8], 1), _w("ln_b", [8], 2), _w("wq", [8, 8], 3), _w("wk", [8, 8], 4),
             _w("wv", [8, 8], 5), numpy_helper.from_array(np.array(2.8, np.float32), "scale"),
             numpy_helper.from_array(np.array(1.4142135, np.float32), "sqrt2"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    return _model(nodes, [_vi("x", F, ["batch", "seq", 8])], [_vi("y", F, None)], inits)


def reshape_gather():
    n = helper.make_node
    nodes = [
        n("Gather", ["emb", "ids"], ["e"], axis=0),
        n("Shape", ["e"], ["sh"]),
        n("Reshape", ["e", "newshape"], ["r"]),
        n("Unsqueeze", ["r", "ax"], ["u"]),
        n("Squeeze", ["u", "ax"], ["s"]),
        n("Concat", ["s", "s"], ["c"], axis=-1),
        n("Split", ["c", "splits"], ["p1", "p2"], axis=-1),
        n("Slice", ["p1", "st", "en", "axs"], ["sl"]),
        n("Expand", ["sl", "exshape"], ["ex"]),
        n("Tile", ["ex", "reps"], ["t"]),
        n("Pad", ["t", "pads"], ["y"], mode="constant"),
        n("Size", ["y"], ["sz"]),
    ]
    inits = [_w("emb", [10, 4], 1), _i64("newshape", [-1, 4]), _i64("ax", [0]),
             _i64("splits", [4, 4]), _i64("st", [0]), _i64("en", [2]), _i64("axs", [1]),
             _i64("exshape", [2, 1, 2]), _i64("reps", [1, 2, 1]), _i64("pads", [0, 0, 0, 0, 1, 1])]
    return _model(nodes, [_vi("ids", I64, ["n"])],
                  [_vi("y", F, None), _vi("sh", I64, None), _vi("sz", I64, None)], inits, opset=18)


def math_family():
    n = helper.make_node
    unary = ["Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Sin", "Cos",
             "Tanh", "Sigmoid", "Sign", "Round", "Erf", "Softplus", "Softsign"]
    nodes, prev = [], "x"
    for i, op in enumerate(unary):
        nodes.append(n(op, [prev], [f"u{i}"]))
        prev = f"u{i}"
    nodes += [n("Add", [prev, "x"], ["a"]), n("Sub", ["a", "c"], ["b"]), n("Mul", ["b", "c"], ["m"]),
              n("Div", ["m", "c"], ["d"]), n("Pow", ["d", "c"], ["p"]), n("Max", ["p", "x", "c"], ["mx"]),
              n("Min", ["mx", "x"], ["mn"]), n("Sum", ["mn", "x"], ["sm"]), n("Mean", ["sm", "x"], ["me"]),
              n("Clip", ["me", "lo", "hi"], ["y"])]
    inits = [_w("c", [3], 1), numpy_helper.from_array(np.array(-1, np.float32), "lo"),
             numpy_helper.from_array(np.array(1, np.float32), "hi")]
    return _model(nodes, [_vi("x", F, [2, 3])], [_vi("y", F, [2, 3])], inits)


def activations():
    n = helper.make_node
    nodes = [n("LeakyRelu", ["x"], ["a"], alpha=0.1), n("Elu", ["a"], ["b"]), n("Selu", ["b"], ["c"]),
             n("HardSigmoid", ["c"], ["d"]), n("HardSwish", ["d"], ["e"]), n("PRelu", ["e", "slope"], ["f"]),
             n("ThresholdedRelu", ["f"], ["g"], alpha=0.5), n("Celu", ["g"], ["h"]),
             n("Gelu", ["h"], ["i"]), n("Mish", ["i"], ["j"]), n("LogSoftmax", ["j"], ["y"], axis=1)]
    return _model(nodes, [_vi("x", F, [2, 3])], [_vi("y", F, [2, 3])], [_w("slope", [3], 1)], opset=20)


def compare_logic():
    n = helper.make_node
    nodes = [n("Greater", ["x", "z"], ["g"]), n("Less", ["x", "z"], ["l"]), n("Equal", ["x", "z"], ["e"]),
             n("Or", ["g", "l"], ["o"]), n("And", ["o", "e"], ["a"]), n("Not", ["a"], ["na"]),
             n("Xor", ["na", "g"], ["xo"]), n("Where", ["xo", "x", "z"], ["w"]),
             n("GreaterOrEqual", ["w", "z"], ["ge"]), n("LessOrEqual", ["w", "z"], ["le"]),
             n("IsNaN", ["w"], ["nan"]), n("IsInf", ["w"], ["inf"]),
             n("Cast", ["ge"], ["y"], to=TensorProto.INT32)]
    inits = [numpy_helper.from_array(np.zeros([1, 4], np.float32), "z")]
    return _model(nodes, [_vi("x", F, [3, 4])],
                  [_vi("y", TensorProto.INT32, None), _vi("le", TensorProto.BOOL, None),
                   _vi("nan", TensorProto.BOOL, None), _vi("inf", TensorProto.BOOL, None)], inits)


def reductions():
    n = helper.make_node
    nodes = [n("ReduceSum", ["x", "axes"], ["s"], keepdims=1), n("ReduceMean", ["x"], ["m"], axes=[1]),
             n("ReduceMax", ["x"], ["mx"], axes=[0], keepdims=0), n("ReduceMin", ["x"], ["mn"]),
             n("ReduceProd", ["x"], ["p"], axes=[2]), n("ReduceL2", ["x"], ["l2"], axes=[1]),
             n("ReduceLogSumExp", ["x"], ["lse"], axes=[2]), n("ArgMax", ["x"], ["am"], axis=1),
             n("ArgMin", ["x"], ["an"], axis=2, keepdims=0)]
    return _model(nodes, [_vi("x", F, [2, 3, 4])],
                  [_vi(o, F, None) for o in ["s", "m", "mx", "mn", "p", "l2", "lse"]] +
                  [_vi("am", I64, None), _vi("an", I64, None)], [_i64("axes", [1])], opset=13)


def casts_and_types():
    n = helper.make_node
    f16 = numpy_helper.from_array(np.arange(6, dtype=np.float16).reshape(2, 3), "h")
    strs = helper.make_tensor("names", TensorProto.STRING, [3], [b"a", b"bc", b""])
    nodes = [n("Cast", ["x"], ["xd"], to=TensorProto.DOUBLE), n("Cast", ["h"], ["hf"], to=F),
             n("Add", ["hf", "x"], ["s"]), n("Cast", ["s"], ["y"], to=TensorProto.FLOAT16),
             n("Identity", ["names"], ["names_out"]), n("Cast", ["x"], ["xs"], to=TensorProto.STRING),
             n("Cast", ["x"], ["xi8"], to=TensorProto.INT8), n("Cast", ["xi8"], ["xb"], to=TensorProto.BOOL),
             n("Cast", ["x"], ["xu64"], to=TensorProto.UINT64)]
    return _model(nodes, [_vi("x", F, [2, 3])],
                  [_vi("y", TensorProto.FLOAT16, None), _vi("xd", TensorProto.DOUBLE, None),
                   _vi("names_out", TensorProto.STRING, None), _vi("xs", TensorProto.STRING, None),
                   _vi("xb", TensorProto.BOOL, None), _vi("xu64", TensorProto.UINT64, None)], [f16, strs])


def constants():
    n = helper.make_node
    t = numpy_helper.from_array(np.arange(4, dtype=np.float32), "t")
    nodes = [n("Constant", [], ["c0"], value=t), n("Constant", [], ["c1"], value_float=2.0),
             n("Constant", [], ["c2"], value_floats=[1.0, 2.0]), n("Constant", [], ["c3"], value_int=3),
             n("Constant", [], ["c4"], value_ints=[1, 2, 3]), n("Constant", [], ["c5"], value_string="s"),
             n("Constant", [], ["c6"], value_strings=["a", "b"]),
             n("ConstantOfShape", ["c4"], ["c7"], value=numpy_helper.from_array(np.array([1.5], np.float32))),
             n("Range", ["st", "lim", "dl"], ["r"]), n("Add", ["c0", "c1"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "st"),
             numpy_helper.from_array(np.array(5, np.int64), "lim"),
             numpy_helper.from_array(np.array(1, np.int64), "dl")]
    outs = [_vi("y", F, None), _vi("c2", F, None), _vi("c3", I64, None), _vi("c5", TensorProto.STRING, None),
            _vi("c6", TensorProto.STRING, None), _vi("c7", F, None), _vi("r", I64, None)]
    return _model(nodes, [], outs, inits)


def function_model():
    body = [helper.make_node("Mul", ["a", "b"], ["t"]),
            helper.make_node("LeakyRelu", ["t"], ["o"], alpha=0.2),
            helper.make_node("Constant", [], ["k"], value_float=1.0)]
    body[1].attribute[0].ClearField("f")
    body[1].attribute[0].ref_attr_name = "alpha"
    fn = helper.make_function("local", "MulAct", ["a", "b"], ["o"], body,
                              [helper.make_opsetid("", 17)], attributes=["alpha"])
    nodes = [helper.make_node("MulAct", ["x", "x"], ["m"], domain="local", alpha=0.3),
             helper.make_node("MulAct", ["m", "x"], ["y"], domain="local", alpha=0.1)]
    return _model(nodes, [_vi("x", F, [2, 2])], [_vi("y", F, [2, 2])], functions=[fn],
                  extra_opsets=[("local", 1)])


def misc_nn():
    n = helper.make_node
    nodes = [n("ConvTranspose", ["x", "w"], ["ct"], kernel_shape=[2, 2], strides=[2, 2])
             if False else n("Conv", ["x", "w"], ["ct"], kernel_shape=[2, 2], strides=[2, 2], group=2),
             n("InstanceNormalization", ["ct", "s", "b"], ["in"]),
             n("Dropout", ["in"], ["dr"]), n("GlobalMaxPool", ["dr"], ["gm"]),
             n("Flatten", ["gm"], ["f"]), n("MatMul", ["f", "mw"], ["y"])]
    inits = [_w("w", [4, 1, 2, 2], 1), _w("s", [4], 2), _w("b", [4], 3), _w("mw", [4, 2], 4)]
    return _model(nodes, [_vi("x", F, [1, 2, 4, 4])], [_vi("y", F, None)], inits)


def int_ops():
    n = helper.make_node
    I32 = TensorProto.INT32
    nodes = [n("Add", ["x", "x"], ["a"]), n("Mul", ["a", "x"], ["m"]), n("Div", ["m", "two"], ["d"]),
             n("Mod", ["d", "three"], ["md"]), n("Neg", ["md"], ["ng"]), n("Abs", ["ng"], ["ab"]),
             n("Transpose", ["ab"], ["y"], perm=[1, 0])]
    inits = [numpy_helper.from_array(np.array([2], np.int32), "two"),
             numpy_helper.from_array(np.array([3], np.int32), "three")]
    return _model(nodes, [_vi("x", I32, [2, 3])], [_vi("y", I32, None)], inits)


def models():
    for fn in [mlp, cnn, attention, reshape_gather, math_family, activations, compare_logic,
               reductions, casts_and_types, constants, function_model, misc_nn, int_ops]:
        yield fn.__name__, fn()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/fuzz/seeds")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, m in models():
        with open(os.path.join(args.out, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())
    print(f"wrote {len(list(models()))} seed models to {args.out}")


if __name__ == "__main__":
    main()
