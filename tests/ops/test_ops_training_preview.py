"""The training operators an inference session runs: Adagrad, Adam and Momentum
(ai.onnx.preview.training 1, src/providers/cpu/nn/training_optimizers.cc), one optimizer
step as a pure function of R, T, the optimized tensors, their gradients and states; and
BatchNormalization with training_mode = 1 (opset 14 / 15, normalization.cc). The optimizers
are compared with numpy oracles written from the ONNX spec (in float64, rounded to the
element type) and with onnx.reference.ReferenceEvaluator; training-mode
BatchNormalization with onnxruntime (its CPU kernel runs training_mode = 1) and a float64
numpy oracle. Plus the error paths."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ortlite
from helpers import NP_TO_ONNX, assert_same, run_lite, run_ort, session

F16, F32, F64 = np.float16, np.float32, np.float64
TRAINING = "ai.onnx.preview.training"

# The state groups after X and G, and the outputs' groups, of each optimizer.
STATES = {"Adagrad": ["H"], "Adam": ["V", "H"], "Momentum": ["V"]}


def value_info(name, dtype, shape=None):
    return helper.make_tensor_value_info(name, NP_TO_ONNX[np.dtype(dtype)], shape)


def optimizer_model(op, n, dtype=F32, r_dtype=None, attrs=None, t_dtype=np.int64,
                    inputs=None, outputs=None, default_opset=True):
    """One `op` node optimizing n tensors, R (r_dtype, default dtype) and T graph inputs.
    inputs / outputs: override the node's input / output names. default_opset=False imports
    the training domain alone (as the ONNX node test models do)."""
    groups = ["X", "G"] + STATES[op]
    ins = inputs if inputs is not None else (
        ["R", "T"] + [f"{g}{i}" for g in groups for i in range(n)])
    outs = outputs if outputs is not None else (
        [f"{g}{i}_new" for g in ["X"] + STATES[op] for i in range(n)])
    node = helper.make_node(op, ins, outs, domain=TRAINING, **(attrs or {}))
    types = {"R": r_dtype or dtype, "T": t_dtype}
    graph = helper.make_graph(
        [node], "g", [value_info(name, types.get(name, dtype)) for name in dict.fromkeys(ins)
                      if name],
        [value_info(o, dtype) for o in outs if o])
    opsets = [helper.make_opsetid(TRAINING, 1)]
    if default_opset:
        opsets.insert(0, helper.make_opsetid("", 17))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def tensors(shapes, dtype, seed, positive=False):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        a = rng.standard_normal(s)
        out.append((np.abs(a) + 0.05 if positive else a).astype(dtype))
    return out


def optimizer_feeds(op, shapes, dtype, r, t, seed=0, r_dtype=None):
    """R, T, then X_i, G_i and the states (H positive: a sum of squares) for each shape."""
    feeds = {"R": np.array(r, dtype=r_dtype or dtype), "T": np.array(t, dtype=np.int64)}
    for k, g in enumerate(["X", "G"] + STATES[op]):
        for i, a in enumerate(tensors(shapes, dtype, seed * 10 + k, positive=g == "H")):
            feeds[f"{g}{i}"] = a
    return feeds


def f32(v):
    """An attribute as the model stores it (float32), widened to float64."""
    return float(np.float32(v))


def oracle(op, feeds, n, attrs):
    """The spec's pseudo code in float64 per tensor; results rounded to the inputs' type."""
    a = {k: f32(v) for k, v in attrs.items() if k != "mode"}
    r = float(feeds["R"])
    t = int(feeds["T"])
    xs, states = [], [[] for _ in STATES[op]]
    for i in range(n):
        x = feeds[f"X{i}"].astype(F64)
        g = feeds[f"G{i}"].astype(F64)
        dt = feeds[f"X{i}"].dtype
        g_reg = a.get("norm_coefficient", 0.0) * x + g
        if op == "Adagrad":
            r_ = r / (1 + t * a.get("decay_factor", 0.0))
            h_new = feeds[f"H{i}"].astype(F64) + g_reg * g_reg
            x_new = x - r_ * g_reg / (np.sqrt(h_new) + a.get("epsilon", f32(1e-6)))
            new = [h_new]
        elif op == "Adam":
            alpha, beta = a.get("alpha", f32(0.9)), a.get("beta", f32(0.999))
            v_new = alpha * feeds[f"V{i}"].astype(F64) + (1 - alpha) * g_reg
            h_new = beta * feeds[f"H{i}"].astype(F64) + (1 - beta) * g_reg * g_reg
            h_sqrt = np.sqrt(h_new) + a.get("epsilon", f32(1e-6))
            r_adj = r * np.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
            x_new = (1 - a.get("norm_coefficient_post", 0.0)) * (x - r_adj * v_new / h_sqrt)
            new = [v_new, h_new]
        else:
            alpha = a["alpha"]
            beta = a["beta"] if t > 0 else 1.0
            v_new = alpha * feeds[f"V{i}"].astype(F64) + beta * g_reg
            if attrs["mode"] == "standard":
                x_new = x - r * v_new
            else:
                x_new = x - r * (g_reg + alpha * v_new)
            new = [v_new]
        xs.append(np.asarray(x_new).astype(dt))
        for k, s in enumerate(new):
            states[k].append(np.asarray(s).astype(dt))
    return xs + [s for group in states for s in group]


def tol(dtype):
    return dict(rtol=1e-6, atol=1e-6) if dtype == F32 else dict(rtol=1e-13, atol=1e-13)


SHAPES = {1: [(3, 4)], 3: [(), (5,), (2, 3, 4)]}
ATTRS = {
    "Adagrad": [{}, dict(decay_factor=0.3, epsilon=1e-3, norm_coefficient=0.02)],
    "Adam": [{}, dict(alpha=0.8, beta=0.7, epsilon=1e-2, norm_coefficient=0.05,
                      norm_coefficient_post=0.1)],
    "Momentum": [dict(alpha=0.9, beta=0.5, norm_coefficient=0.0, mode="standard"),
                 dict(alpha=0.7, beta=0.25, norm_coefficient=0.03, mode="standard"),
                 dict(alpha=0.9, beta=0.5, norm_coefficient=0.0, mode="nesterov"),
                 dict(alpha=0.7, beta=0.25, norm_coefficient=0.03, mode="nesterov")],
}
CASES = [(op, k) for op in ATTRS for k in range(len(ATTRS[op]))]


@pytest.mark.parametrize("op,attr_index", CASES, ids=[f"{op}-{k}" for op, k in CASES])
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("t", [0, 1, 7])
def test_optimizer_step_against_spec(op, attr_index, dtype, n, t):
    attrs = ATTRS[op][attr_index]
    feeds = optimizer_feeds(op, SHAPES[n], dtype, r=0.05, t=t, seed=n + t)
    got = run_lite(optimizer_model(op, n, dtype, attrs=attrs), feeds)
    assert_same(got, oracle(op, feeds, n, attrs), **tol(dtype))


@pytest.mark.parametrize("op,attr_index", CASES, ids=[f"{op}-{k}" for op, k in CASES])
@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("t", [0, 3])
def test_optimizer_step_against_onnx_reference(op, attr_index, n, t):
    """float32 tensors against ReferenceEvaluator (which computes in float32 where numpy
    keeps float32, in float64 where a Python float or T promotes; its single-tensor Adam
    returns such float64 results as they are, read here as the float32 the schema says)."""
    attrs = ATTRS[op][attr_index]
    feeds = optimizer_feeds(op, [(4, 5), (7,)][:n], F32, r=0.1, t=t, seed=3)
    model = optimizer_model(op, n, F32, attrs=attrs)
    expected = [np.asarray(e).astype(F32) for e in ReferenceEvaluator(model).run(None, feeds)]
    assert_same(run_lite(model, feeds), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", sorted(STATES))
def test_optimizer_r_double_with_float_tensors(op):
    """R's type (T1) is independent of the tensors' (T3)."""
    attrs = ATTRS[op][-1]
    feeds = optimizer_feeds(op, [(6,), (2, 2)], F32, r=0.125, t=2, r_dtype=F64)
    got = run_lite(optimizer_model(op, 2, F32, r_dtype=F64, attrs=attrs), feeds)
    assert_same(got, oracle(op, feeds, 2, attrs), **tol(F32))


@pytest.mark.parametrize("op", sorted(STATES))
@pytest.mark.parametrize("threads", [1, 2])
def test_optimizer_large_tensors(op, threads):
    """Tensors large enough to be split over the pool's threads."""
    attrs = ATTRS[op][-1]
    feeds = optimizer_feeds(op, [(300, 1001), (17,)], F32, r=0.01, t=4)
    got = run_lite(optimizer_model(op, 2, F32, attrs=attrs), feeds, threads=threads)
    assert_same(got, oracle(op, feeds, 2, attrs), **tol(F32))


@pytest.mark.parametrize("op", sorted(STATES))
def test_optimizer_empty_tensor(op):
    attrs = ATTRS[op][-1]
    feeds = optimizer_feeds(op, [(0, 3), (2,)], F64, r=0.5, t=1)
    got = run_lite(optimizer_model(op, 2, F64, attrs=attrs), feeds)
    assert_same(got, oracle(op, feeds, 2, attrs), **tol(F64))


@pytest.mark.parametrize("op", sorted(STATES))
def test_optimizer_model_importing_only_the_training_domain(op):
    attrs = ATTRS[op][0]
    feeds = optimizer_feeds(op, [(3,)], F32, r=0.1, t=1)
    got = run_lite(optimizer_model(op, 1, F32, attrs=attrs, default_opset=False), feeds)
    assert_same(got, oracle(op, feeds, 1, attrs), **tol(F32))


def test_adam_bias_correction_and_post_regularization_matter():
    """T > 0 scales R by sqrt(1 - beta^T) / (1 - alpha^T); norm_coefficient_post scales the
    result: each changes X_new (an oracle missing either would not match)."""
    feeds = optimizer_feeds("Adam", [(8,)], F64, r=0.1, t=0)
    x0 = run_lite(optimizer_model("Adam", 1, F64), feeds)[0]
    feeds["T"] = np.array(2, np.int64)
    x2 = run_lite(optimizer_model("Adam", 1, F64), feeds)[0]
    xp = run_lite(optimizer_model("Adam", 1, F64, attrs=dict(norm_coefficient_post=0.5)),
                  feeds)[0]
    x = feeds["X0"]
    np.testing.assert_allclose((x - x2) / (x - x0),
                               np.sqrt(1 - f32(0.999) ** 2) / (1 - f32(0.9) ** 2), rtol=1e-10)
    np.testing.assert_allclose(xp, 0.5 * x2, rtol=1e-15)


# ---- optimizer errors ------------------------------------------------------------------


@pytest.mark.parametrize("op,count", [("Adagrad", 4), ("Adagrad", 6), ("Adam", 5), ("Adam", 9),
                                      ("Momentum", 7), ("Momentum", 2)])
def test_optimizer_wrong_input_count(op, count):
    names = ["R", "T"] + [f"I{i}" for i in range(count - 2)]
    attrs = ATTRS[op][0]
    model = optimizer_model(op, 1, attrs=attrs, inputs=names[:count], outputs=["Y"])
    groups = 2 + len(STATES[op])
    with pytest.raises(ortlite.InvalidGraph, match=rf"expects 2 \+ {groups} x n inputs .*got "
                                                   rf"{count}"):
        session(model)


@pytest.mark.parametrize("op", sorted(STATES))
def test_optimizer_wrong_output_count(op):
    attrs = ATTRS[op][0]
    outs = (1 + len(STATES[op])) * 2
    model = optimizer_model(op, 2, attrs=attrs, outputs=[f"Y{i}" for i in range(outs - 1)])
    with pytest.raises(ortlite.InvalidGraph, match=rf"so {outs} outputs, got {outs - 1}"):
        session(model)


def test_optimizer_omitted_input():
    names = ["R", "T", "X0", "", "H0"]
    model = optimizer_model("Adagrad", 1, inputs=names)
    with pytest.raises(ortlite.InvalidGraph,
                       match=r"input 3 \(G_1\) is missing \(every input is required\)"):
        session(model)


@pytest.mark.parametrize("which,shape,match", [
    ("R", (1, 2), r"R must be a scalar \(one element\), got shape \[1,2\]"),
    ("T", (2,), r"T must be a scalar \(one element\), got shape \[2\]"),
])
def test_optimizer_r_and_t_must_be_scalars(which, shape, match):
    attrs = ATTRS["Adam"][0]
    feeds = optimizer_feeds("Adam", [(3,)], F32, r=0.1, t=1)
    feeds[which] = np.resize(feeds[which], shape)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(optimizer_model("Adam", 1, attrs=attrs), feeds)


def test_optimizer_one_element_r_and_t():
    """R and T of one element in a 1-D tensor are read as scalars."""
    attrs = ATTRS["Momentum"][1]
    feeds = optimizer_feeds("Momentum", [(3,)], F32, r=0.1, t=1)
    expected = oracle("Momentum", feeds, 1, attrs)
    feeds["R"] = feeds["R"].reshape(1)
    feeds["T"] = feeds["T"].reshape(1)
    assert_same(run_lite(optimizer_model("Momentum", 1, attrs=attrs), feeds), expected,
                **tol(F32))


def test_optimizer_t_must_be_int64():
    attrs = ATTRS["Momentum"][0]
    feeds = optimizer_feeds("Momentum", [(3,)], F32, r=0.1, t=1)
    feeds["T"] = feeds["T"].astype(np.int32)
    with pytest.raises(ortlite.InvalidArgument, match="T must be an int64 scalar, got element "
                                                      "type int32"):
        run_lite(optimizer_model("Momentum", 1, attrs=attrs, t_dtype=np.int32), feeds)


@pytest.mark.parametrize("op,bad,match", [
    ("Adagrad", "G1", r"G_2 \[4\] does not match X_2 \[2,2\]"),
    ("Adagrad", "H0", r"H_1 \[4\] does not match X_1 \[3\]"),
    ("Adam", "V1", r"V_2 \[4\] does not match X_2 \[2,2\]"),
    ("Adam", "H1", r"H_2 \[4\] does not match X_2 \[2,2\]"),
    ("Momentum", "V0", r"V_1 \[4\] does not match X_1 \[3\]"),
])
def test_optimizer_mismatched_shapes(op, bad, match):
    attrs = ATTRS[op][0]
    feeds = optimizer_feeds(op, [(3,), (2, 2)], F32, r=0.1, t=1)
    feeds[bad] = np.ones(4, F32)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        run_lite(optimizer_model(op, 2, attrs=attrs), feeds)


def test_optimizer_mixed_tensor_types():
    attrs = ATTRS["Adam"][0]
    feeds = optimizer_feeds("Adam", [(3,)], F32, r=0.1, t=1)
    feeds["V0"] = feeds["V0"].astype(F64)
    model = optimizer_model("Adam", 1, attrs=attrs)
    model.graph.input[4].type.tensor_type.elem_type = TensorProto.DOUBLE
    with pytest.raises(ortlite.InvalidArgument, match="V_1 has element type double, X_1 has "
                                                      "float"):
        run_lite(model, feeds)


def test_optimizer_integer_tensors():
    attrs = ATTRS["Adagrad"][0]
    feeds = optimizer_feeds("Adagrad", [(3,)], F32, r=0.1, t=1)
    for k in ("X0", "G0", "H0"):
        feeds[k] = feeds[k].astype(np.int64)
    model = optimizer_model("Adagrad", 1, np.int64, r_dtype=F32, attrs=attrs)
    with pytest.raises(ortlite.InvalidArgument, match="X_1 has element type int64; the "
                                                      "optimized tensors must be float or double"):
        run_lite(model, feeds)


def test_optimizer_r_must_be_float():
    feeds = optimizer_feeds("Adagrad", [(3,)], F32, r=1, t=1, r_dtype=np.int64)
    with pytest.raises(ortlite.InvalidArgument, match="R must be a float or double scalar, got "
                                                      "element type int64"):
        run_lite(optimizer_model("Adagrad", 1, r_dtype=np.int64), feeds)


def test_momentum_unknown_mode():
    attrs = dict(ATTRS["Momentum"][0], mode="heavy_ball")
    with pytest.raises(ortlite.InvalidGraph, match="attribute 'mode' must be \"standard\" or "
                                                   "\"nesterov\", got \"heavy_ball\""):
        session(optimizer_model("Momentum", 1, attrs=attrs))


@pytest.mark.parametrize("missing", ["alpha", "beta", "norm_coefficient", "mode"])
def test_momentum_required_attributes(missing):
    attrs = {k: v for k, v in ATTRS["Momentum"][0].items() if k != missing}
    with pytest.raises(ortlite.InvalidGraph, match=missing):
        session(optimizer_model("Momentum", 1, attrs=attrs))


# ---- BatchNormalization, training_mode = 1 ----------------------------------------------


def bn_feeds(xs, dtype=F32, pdtype=None, seed=0, offset=0.0):
    pdtype = pdtype or dtype
    rng = np.random.default_rng(seed)
    c = xs[1]
    return {
        "X": (rng.standard_normal(xs) * 2 + offset + rng.standard_normal(c).reshape(
            (1, c) + (1,) * (len(xs) - 2))).astype(dtype),
        "scale": rng.uniform(0.5, 1.5, c).astype(pdtype),
        "B": rng.uniform(-1, 1, c).astype(pdtype),
        "mean": rng.uniform(-1, 1, c).astype(pdtype),
        "var": rng.uniform(0.1, 2, c).astype(pdtype),
    }


def bn_model(feeds, outputs=("Y", "running_mean", "running_var"), opset=15, attrs=None,
             training_mode=1, const_params=False):
    attrs = dict(attrs or {})
    attrs["training_mode"] = training_mode
    names = ["X", "scale", "B", "mean", "var"]
    node = helper.make_node("BatchNormalization", names, list(outputs), **attrs)
    graph_inputs = ["X"] if const_params else names
    out_types = {"Y": feeds["X"].dtype, "running_mean": feeds["mean"].dtype,
                 "running_var": feeds["var"].dtype}
    graph = helper.make_graph(
        [node], "g", [value_info(n, feeds[n].dtype, feeds[n].shape) for n in graph_inputs],
        [value_info(o, out_types.get(o, feeds["X"].dtype)) for o in outputs if o],
        initializer=[numpy_helper.from_array(feeds[n], n) for n in names[1:]]
        if const_params else [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def bn_oracle(feeds, epsilon=1e-5, momentum=0.9):
    """The spec in float64: batch mean and population variance over every axis but 1."""
    x = feeds["X"].astype(F64)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    eps, mom = f32(epsilon), f32(momentum)
    y = ((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) *
         feeds["scale"].astype(F64).reshape(shape) + feeds["B"].astype(F64).reshape(shape))
    rm = feeds["mean"].astype(F64) * mom + mean * (1 - mom)
    rv = feeds["var"].astype(F64) * mom + var * (1 - mom)
    return [y.astype(feeds["X"].dtype), rm.astype(feeds["mean"].dtype),
            rv.astype(feeds["var"].dtype)]


BN_SHAPES = [(6, 3), (2, 3, 7), (2, 3, 4, 5), (2, 2, 3, 4, 5)]
BN_ATTRS = [{}, dict(epsilon=1e-2, momentum=0.6)]


@pytest.mark.parametrize("xs", BN_SHAPES, ids=str)
@pytest.mark.parametrize("opset", [14, 15])
@pytest.mark.parametrize("attr_index", range(len(BN_ATTRS)))
def test_batchnorm_training_against_ort(xs, opset, attr_index):
    attrs = BN_ATTRS[attr_index]
    feeds = bn_feeds(xs, seed=len(xs) + opset)
    model = bn_model(feeds, opset=opset, attrs=attrs)
    got = run_lite(model, feeds)
    assert_same(got, run_ort(model, feeds), rtol=1e-5, atol=1e-5)
    assert_same(got, bn_oracle(feeds, **attrs), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("xs", BN_SHAPES, ids=str)
def test_batchnorm_training_double(xs):
    attrs = BN_ATTRS[1]
    feeds = bn_feeds(xs, F64, seed=7)
    got = run_lite(bn_model(feeds, attrs=attrs), feeds)
    assert_same(got, bn_oracle(feeds, **attrs), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xdtype,pdtype", [(F16, F16), (F16, F32), (F32, F16), (F64, F32)])
def test_batchnorm_training_mixed_types(xdtype, pdtype):
    """Opset 15: scale / B (T1) and input_mean / input_var (T2) of their own float types;
    running_mean / running_var take T2."""
    feeds = bn_feeds((3, 4, 5, 2), xdtype, pdtype, seed=11)
    got = run_lite(bn_model(feeds), feeds)
    assert [a.dtype for a in got] == [np.dtype(xdtype), np.dtype(pdtype), np.dtype(pdtype)]
    t = 2e-3 if F16 in (xdtype, pdtype) else 1e-6
    assert_same(got, bn_oracle(feeds), rtol=t, atol=t)


def test_batchnorm_training_far_from_zero():
    """Values around 1e4 with a spread of about 1: the variance of the batch is taken from
    deviations, not from the sum of squares (which loses it in float)."""
    feeds = bn_feeds((8, 3, 16, 16), seed=5, offset=1e4)
    got = run_lite(bn_model(feeds), feeds)
    assert_same(got, bn_oracle(feeds), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("threads", [1, 2])
def test_batchnorm_training_large(threads):
    feeds = bn_feeds((4, 16, 64, 64), seed=9)
    model = bn_model(feeds, attrs=BN_ATTRS[1])
    got = run_lite(model, feeds, threads=threads)
    assert_same(got, run_ort(model, feeds), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("outputs", [("Y",), ("Y", "running_mean"), ("Y", "", "running_var")],
                         ids=str)
def test_batchnorm_training_optional_outputs(outputs):
    feeds = bn_feeds((2, 3, 4, 5), seed=2)
    expected = dict(zip(("Y", "running_mean", "running_var"), bn_oracle(feeds)))
    got = run_lite(bn_model(feeds, outputs=outputs), feeds)
    assert_same(got, [expected[o] for o in outputs if o], rtol=1e-6, atol=1e-6)


def test_batchnorm_training_y_uses_batch_statistics():
    """Y does not depend on input_mean / input_var in training mode."""
    feeds = bn_feeds((2, 3, 4), seed=4)
    model = bn_model(feeds, outputs=("Y",))
    y1 = run_lite(model, feeds)[0]
    feeds["mean"] = feeds["mean"] + 5
    feeds["var"] = feeds["var"] * 3
    np.testing.assert_array_equal(run_lite(model, feeds)[0], y1)


def test_batchnorm_training_constant_params_after_conv():
    """A Conv with constant weights followed by a training-mode BatchNormalization with
    constant parameters: the load-time fold into the Conv applies to inference only."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 8, 8)).astype(F32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(F32)
    p = bn_feeds((2, 4, 6, 6), seed=3)
    nodes = [helper.make_node("Conv", ["X", "W"], ["C"]),
             helper.make_node("BatchNormalization", ["C", "scale", "B", "mean", "var"],
                              ["Y", "rm", "rv"], training_mode=1, momentum=0.7)]
    inits = [numpy_helper.from_array(w, "W")] + [
        numpy_helper.from_array(p[n], n) for n in ("scale", "B", "mean", "var")]
    graph = helper.make_graph(nodes, "g", [value_info("X", F32, x.shape)],
                              [value_info(o, F32) for o in ("Y", "rm", "rv")],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    expected = run_ort(model, {"X": x})
    for level in (ortlite.GraphOptimizationLevel.ORT_DISABLE_ALL,
                  ortlite.GraphOptimizationLevel.ORT_ENABLE_ALL):
        assert_same(session(model, level=level).run(None, {"X": x}), expected, rtol=1e-5,
                    atol=1e-5)


def test_batchnorm_training_const_params():
    feeds = bn_feeds((2, 3, 4, 5), seed=6)
    model = bn_model(feeds, const_params=True)
    assert_same(run_lite(model, {"X": feeds["X"]}), bn_oracle(feeds), rtol=1e-6, atol=1e-6)


def test_batchnorm_training_empty_spatial_dims():
    """No elements per channel: Y is empty and the batch statistics are NaN (0 / 0, as
    numpy's mean), so are the running outputs."""
    feeds = bn_feeds((2, 3, 0), seed=1)
    y, rm, rv = run_lite(bn_model(feeds), feeds)
    assert y.shape == (2, 3, 0)
    assert rm.shape == rv.shape == (3,)
    assert np.isnan(rm).all() and np.isnan(rv).all()


def test_batchnorm_training_errors():
    feeds = bn_feeds((2, 3, 4), seed=0)
    feeds["var"] = feeds["var"][:2]
    with pytest.raises(ortlite.InvalidArgument, match=r"input input_var \[2\] does not match X"):
        run_lite(bn_model(feeds), feeds)
    feeds = bn_feeds((2, 3, 4), seed=0)
    feeds["X"] = feeds["X"][0, 0]
    with pytest.raises(ortlite.InvalidArgument, match="X must have rank >= 2"):
        run_lite(bn_model(feeds), feeds)


def test_batchnorm_running_outputs_need_training_mode():
    feeds = bn_feeds((2, 3, 4), seed=0)
    with pytest.raises(ortlite.InvalidGraph, match="only produced in training mode"):
        session(bn_model(feeds, training_mode=0))
