"""FlexAttention (ai.onnx.preview 1, src/providers/cpu/nn/flex_attention.cc). onnxruntime
runs no FlexAttention, so one-node models are compared with onnx's reference implementation
(onnx.reference.ReferenceEvaluator) and with a float64 numpy formula written from the spec,
on random shapes beyond the ONNX node cases: several batch sizes, L != S, MHA / GQA / MQA head
sharing, head_size != v_head_size, float, double, float16 and bfloat16 (the half types
looser), scale given or default, softmax_precision given, 1 and 2 threads; with and without
modifier subgraphs built with onnx.helper (a causal mask through Trilu / Where, a soft cap
through Tanh / Mul, a bias from the score tensor's batch, head and position indices, a
prob_mod scaling or thresholding the probabilities, modifiers reading values of the
enclosing graph). Bad inputs and bad modifiers raise typed errors naming the node and the
problem."""

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ortlite
from helpers import NP_TO_ONNX, session

PREVIEW = "ai.onnx.preview"
OPSET = 23
F16, BF16, F32, F64 = np.float16, ml_dtypes.bfloat16, np.float32, np.float64
ELEM = {np.dtype(F16): TP.FLOAT16, np.dtype(BF16): TP.BFLOAT16, np.dtype(F32): TP.FLOAT,
        np.dtype(F64): TP.DOUBLE}
NP_OF = {v: k.type for k, v in ELEM.items()}
DIMS = ["B", "H", "L", "S"]

# (rtol, atol) against onnx's reference: it computes float16 / bfloat16 Q @ K^T in the input
# type and pre-scales Q and K by sqrt(float32(scale)); ortlite computes Q @ K^T in float
# (double for double inputs) and scales the product.
REF_TOL = {F32: (5e-6, 5e-6), F64: (1e-6, 1e-6), F16: (5e-3, 5e-3), BF16: (3e-2, 4e-2)}
# Against the float64 numpy formula (the inputs' own values, widened): the rounding of a
# float result to the output type for the half types.
ORACLE_TOL = {F32: (5e-6, 5e-6), F64: (1e-11, 1e-12), F16: (3e-3, 3e-3), BF16: (1e-2, 1.5e-2)}

# (B, Hq, Hkv, L, S, E, Ev)
SHAPES = [
    (1, 1, 1, 1, 1, 4, 4),
    (2, 4, 4, 8, 6, 16, 16),
    (3, 6, 2, 5, 9, 8, 12),  # GQA, L < S, E != Ev
    (2, 4, 1, 7, 3, 5, 3),  # MQA, L > S
    (1, 8, 2, 16, 32, 32, 16),
    (2, 2, 2, 1, 10, 8, 8),  # decode: one query
]


def elem(dtype):
    return ELEM[np.dtype(dtype)]


def vi(name, elem_type, shape=None):
    return helper.make_tensor_value_info(name, elem_type, shape)


def scalar(name, elem_type, value):
    return helper.make_tensor(name, elem_type, [], [value])


def flex_model(dtype, score_mod=None, prob_mod=None, name="fa", extra_inputs=(),
               initializers=(), y_dtype=None, **attrs):
    """One FlexAttention node. Q, K, V (and extra_inputs: [(name, dtype, shape)], values the
    modifiers read from the enclosing graph) are graph inputs of unknown shape."""
    if score_mod is not None:
        attrs["score_mod"] = score_mod
    if prob_mod is not None:
        attrs["prob_mod"] = prob_mod
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain=PREVIEW, name=name,
                            **attrs)
    inputs = [vi(n, elem(dtype)) for n in "QKV"] + [vi(n, elem(d), s) for n, d, s in extra_inputs]
    graph = helper.make_graph([node], "g", inputs, [vi("Y", elem(y_dtype or dtype))],
                              initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid(PREVIEW, 1)])
    model.ir_version = 10
    return model


def feeds(shape, dtype, seed=0, spread=1.0):
    B, Hq, Hkv, L, S, E, Ev = shape
    rng = np.random.default_rng(seed)
    return {"Q": (rng.standard_normal((B, Hq, L, E)) * spread).astype(dtype),
            "K": (rng.standard_normal((B, Hkv, S, E)) * spread).astype(dtype),
            "V": rng.standard_normal((B, Hkv, S, Ev)).astype(dtype)}


def run(model, fd, threads=None):
    return session(model, threads=threads).run(None, fd)[0]


def reference(model, fd):
    return np.asarray(ReferenceEvaluator(model).run(None, fd)[0])


def assert_close(got, want, tol, dtype=None):
    rtol, atol = tol
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), f"{got.dtype} != {np.dtype(dtype)}"
    assert got.shape == want.shape, f"{got.shape} != {want.shape}"
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want).astype(np.float64),
                               rtol=rtol, atol=atol)


def oracle(fd, scale=None, score_fn=None, prob_fn=None):
    """The spec in float64: query head h reads kv head h // (Hq / Hkv)."""
    q, k, v = (fd[n].astype(np.float64) for n in "QKV")
    B, Hq, L, E = q.shape
    Hkv, S, Ev = k.shape[1], k.shape[2], v.shape[3]
    group = Hq // Hkv
    scale = 1.0 / np.sqrt(E) if scale is None else float(np.float32(scale))
    s = np.empty((B, Hq, L, S))
    for h in range(Hq):
        s[:, h] = q[:, h] @ k[:, h // group].transpose(0, 2, 1) * scale
    if score_fn:
        s = score_fn(s)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    p = s / s.sum(axis=-1, keepdims=True)
    if prob_fn:
        p = prob_fn(p)
    y = np.empty((B, Hq, L, Ev))
    for h in range(Hq):
        y[:, h] = p[:, h] @ v[:, h // group]
    return y


# ---- modifier subgraphs: (GraphProto, the same function in numpy) -----------------------


def graph(name, nodes, elem_type, consts=(), in_shape=DIMS, out_elem=None, out_shape=DIMS,
          n_in=1, n_out=1):
    ins = [vi(f"{name}_in{i}" if i else f"{name}_x", elem_type, in_shape) for i in range(n_in)]
    outs = [vi(f"{name}_out{i}" if i else f"{name}_y", out_elem or elem_type, out_shape)
            for i in range(n_out)]
    return helper.make_graph(nodes, name, ins, outs, initializer=list(consts))


def causal(elem_type, k=0):
    """Positions j > i + k get -inf: Trilu of a ones tensor as the mask."""
    n = f"causal{k}".replace("-", "m")
    nodes = [
        helper.make_node("Shape", [f"{n}_x"], [f"{n}_shape"]),
        helper.make_node("ConstantOfShape", [f"{n}_shape"], [f"{n}_ones"],
                         value=helper.make_tensor("v", TP.FLOAT, [1], [1.0])),
        helper.make_node("Trilu", [f"{n}_ones", f"{n}_k"], [f"{n}_tri"], upper=0),
        helper.make_node("Cast", [f"{n}_tri"], [f"{n}_mask"], to=TP.BOOL),
        helper.make_node("Where", [f"{n}_mask", f"{n}_x", f"{n}_ninf"], [f"{n}_y"]),
    ]
    consts = [scalar(f"{n}_k", TP.INT64, k), scalar(f"{n}_ninf", elem_type, -np.inf)]

    def fn(s):
        L, S = s.shape[-2:]
        return np.where(np.tril(np.ones((L, S), bool), k), s, -np.inf)

    return graph(n, nodes, elem_type, consts), fn


def soft_cap(elem_type, cap=2.0):
    n = "softcap"
    nodes = [helper.make_node("Div", [f"{n}_x", f"{n}_cap"], [f"{n}_d"]),
             helper.make_node("Tanh", [f"{n}_d"], [f"{n}_t"]),
             helper.make_node("Mul", [f"{n}_t", f"{n}_cap"], [f"{n}_y"])]
    return (graph(n, nodes, elem_type, [scalar(f"{n}_cap", elem_type, cap)]),
            lambda s: cap * np.tanh(s / cap))


def index_bias(elem_type):
    """s + slope(h) * (j - i) + 0.25 * b, slope(h) = -0.125 * (h + 1): reads the batch, head
    and position indices from the score tensor's shape."""
    n = "ib"
    c = lambda name, v: scalar(f"{n}_{name}", TP.INT64, v)  # noqa: E731

    def idx(axis, shape):
        return [helper.make_node("Gather", [f"{n}_shape", f"{n}_a{axis}"], [f"{n}_d{axis}"],
                                 axis=0),
                helper.make_node("Range", [f"{n}_zero", f"{n}_d{axis}", f"{n}_one"],
                                 [f"{n}_r{axis}"]),
                helper.make_node("Cast", [f"{n}_r{axis}"], [f"{n}_f{axis}"], to=elem_type),
                helper.make_node("Reshape", [f"{n}_f{axis}", f"{n}_s{axis}"], [f"{n}_i{axis}"])]

    nodes = [helper.make_node("Shape", [f"{n}_x"], [f"{n}_shape"])]
    for axis in range(4):
        nodes += idx(axis, None)
    nodes += [
        helper.make_node("Add", [f"{n}_i1", f"{n}_onef"], [f"{n}_h1"]),
        helper.make_node("Mul", [f"{n}_h1", f"{n}_m"], [f"{n}_slope"]),
        helper.make_node("Sub", [f"{n}_i3", f"{n}_i2"], [f"{n}_rel"]),
        helper.make_node("Mul", [f"{n}_slope", f"{n}_rel"], [f"{n}_pos"]),
        helper.make_node("Mul", [f"{n}_i0", f"{n}_bq"], [f"{n}_bb"]),
        helper.make_node("Add", [f"{n}_x", f"{n}_pos"], [f"{n}_t"]),
        helper.make_node("Add", [f"{n}_t", f"{n}_bb"], [f"{n}_y"]),
    ]
    shapes = {0: [-1, 1, 1, 1], 1: [1, -1, 1, 1], 2: [1, 1, -1, 1], 3: [1, 1, 1, -1]}
    consts = [c("zero", 0), c("one", 1)] + [c(f"a{a}", a) for a in range(4)]
    consts += [helper.make_tensor(f"{n}_s{a}", TP.INT64, [4], s) for a, s in shapes.items()]
    consts += [scalar(f"{n}_onef", elem_type, 1.0), scalar(f"{n}_m", elem_type, -0.125),
               scalar(f"{n}_bq", elem_type, 0.25)]

    def fn(s):
        B, H, L, S = s.shape
        b = np.arange(B).reshape(-1, 1, 1, 1)
        h = np.arange(H).reshape(1, -1, 1, 1)
        i = np.arange(L).reshape(1, 1, -1, 1)
        j = np.arange(S).reshape(1, 1, 1, -1)
        return s + (-0.125 * (h + 1)) * (j - i) + 0.25 * b

    return graph(n, nodes, elem_type, consts), fn


def prob_scale(elem_type, c=0.5):
    n = "pscale"
    return (graph(n, [helper.make_node("Mul", [f"{n}_x", f"{n}_c"], [f"{n}_y"])], elem_type,
                  [scalar(f"{n}_c", elem_type, c)]),
            lambda p: p * c)


def prob_threshold(elem_type, thr=0.05):
    """Probabilities under thr become 0 (the rows are not renormalized)."""
    n = "pthr"
    nodes = [helper.make_node("Less", [f"{n}_x", f"{n}_thr"], [f"{n}_small"]),
             helper.make_node("Where", [f"{n}_small", f"{n}_zero", f"{n}_x"], [f"{n}_y"])]
    consts = [scalar(f"{n}_thr", elem_type, thr), scalar(f"{n}_zero", elem_type, 0.0)]
    return graph(n, nodes, elem_type, consts), lambda p: np.where(p < thr, 0.0, p)


# name -> (score_mod builder or None, prob_mod builder or None)
MODIFIERS = {
    "causal": (causal, None),
    "causal_offset": (lambda e: causal(e, 2), None),
    "soft_cap": (soft_cap, None),
    "index_bias": (index_bias, None),
    "prob_scale": (None, prob_scale),
    "prob_threshold": (None, prob_threshold),
    "soft_cap_and_prob_scale": (soft_cap, prob_scale),
    "causal_and_prob_threshold": (causal, prob_threshold),
}


def modifier_attrs(name, mod_elem):
    score_b, prob_b = MODIFIERS[name]
    attrs, fns = {}, {}
    if score_b:
        attrs["score_mod"], fns["score_fn"] = score_b(mod_elem)
    if prob_b:
        attrs["prob_mod"], fns["prob_fn"] = prob_b(mod_elem)
    return attrs, fns


# ---- against the reference and the numpy formula -----------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_against_reference_and_formula(shape, dtype, scale):
    attrs = {} if scale is None else {"scale": scale}
    model = flex_model(dtype, **attrs)
    fd = feeds(shape, dtype, seed=hash((shape, scale)) % 1000)
    got = run(model, fd)
    assert_close(got, reference(model, fd), REF_TOL[dtype], dtype)
    assert_close(got, oracle(fd, scale), ORACLE_TOL[dtype])


@pytest.mark.parametrize("mod", sorted(MODIFIERS))
@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[2], SHAPES[3], SHAPES[5]])
@pytest.mark.parametrize("dtype", [F32, F64, F16])
def test_modifiers_against_reference_and_formula(mod, shape, dtype):
    mod_elem = TP.DOUBLE if dtype == F64 else TP.FLOAT
    attrs, fns = modifier_attrs(mod, mod_elem)
    model = flex_model(dtype, **attrs)
    fd = feeds(shape, dtype, seed=7)
    got = run(model, fd)
    assert_close(got, reference(model, fd), REF_TOL[dtype], dtype)
    if dtype != F16 or "threshold" not in mod:  # a float16 input moves p across thr
        assert_close(got, oracle(fd, None, **fns), ORACLE_TOL[dtype])


def test_bfloat16_with_modifiers_against_reference():
    attrs, fns = modifier_attrs("soft_cap_and_prob_scale", TP.FLOAT)
    model = flex_model(BF16, scale=0.4, **attrs)
    fd = feeds(SHAPES[2], BF16, seed=3)
    got = run(model, fd)
    assert_close(got, reference(model, fd), REF_TOL[BF16], BF16)
    assert_close(got, oracle(fd, 0.4, **fns), ORACLE_TOL[BF16])


@pytest.mark.parametrize("dtype,precision,tol", [
    (F32, TP.DOUBLE, (2e-5, 2e-5)),
    (F64, TP.FLOAT, (2e-5, 2e-5)),
    (F16, TP.DOUBLE, (1e-2, 1e-2)),
    (F32, TP.FLOAT16, (2e-2, 2e-2)),
    (F16, TP.FLOAT16, (2e-2, 2e-2)),
    (BF16, TP.BFLOAT16, (1e-1, 1e-1)),
    (F32, TP.BFLOAT16, (1e-1, 1e-1)),
])
@pytest.mark.parametrize("with_mods", [False, True])
def test_softmax_precision(dtype, precision, tol, with_mods):
    """The modifiers receive and return the softmax precision's type."""
    attrs = {}
    if with_mods:
        attrs, _ = modifier_attrs("soft_cap_and_prob_scale", precision)
    model = flex_model(dtype, softmax_precision=precision, **attrs)
    fd = feeds(SHAPES[2], dtype, seed=11)
    assert_close(run(model, fd), reference(model, fd), tol, dtype)


def test_double_softmax_precision_gives_the_modifiers_double_tensors():
    """Float inputs with softmax_precision = double: the subgraphs (their types undeclared)
    add double constants, which only a double tensor takes; with the default precision the
    same subgraph fails on Add's mixed types."""
    def build(sp):
        nodes = [helper.make_node("Add", ["dd_x", "dd_c"], ["dd_y"])]
        g = helper.make_graph(nodes, "dd", [helper.make_empty_tensor_value_info("dd_x")],
                              [helper.make_empty_tensor_value_info("dd_y")],
                              initializer=[scalar("dd_c", TP.DOUBLE, 0.75)])
        attrs = {} if sp is None else {"softmax_precision": sp}
        return flex_model(F32, score_mod=g, **attrs)

    fd = feeds(SHAPES[2], F32, seed=9)
    model = build(TP.DOUBLE)
    got = run(model, fd)
    assert_close(got, reference(model, fd), REF_TOL[F32], F32)
    assert_close(got, oracle(fd, score_fn=lambda s: s + 0.75), ORACLE_TOL[F32])
    with pytest.raises(ortlite.InvalidArgument,
                       match=r"FlexAttention node 'fa': subgraph 'score_mod': .*Add"):
        run(build(None), fd)


def test_gqa_query_head_h_reads_kv_head_h_div_group():
    """V holds 10 * b + j in every element of kv head j of batch b: query head h of batch b
    must give exactly 10 * b + h // (Hq / Hkv)."""
    B, Hq, Hkv, L, S, E, Ev = 2, 8, 2, 4, 6, 16, 32
    fd = feeds((B, Hq, Hkv, L, S, E, Ev), F32, seed=5, spread=2.0)
    fd["V"] = np.broadcast_to((10.0 * np.arange(B)[:, None] + np.arange(Hkv))[:, :, None, None],
                              (B, Hkv, S, Ev)).astype(F32).copy()
    got = run(flex_model(F32), fd)
    want = np.broadcast_to((10.0 * np.arange(B)[:, None] + np.arange(Hq) // (Hq // Hkv))
                           [:, :, None, None], got.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    fd["V"] = feeds((B, Hq, Hkv, L, S, E, Ev), F32, seed=6)["V"]
    assert_close(run(flex_model(F32), fd), oracle(fd), ORACLE_TOL[F32], F32)


def test_fully_masked_rows_are_nan_as_in_the_reference():
    """A row whose every score is -inf has no softmax: NaN, as onnx's reference gives."""
    g, fn = causal(TP.FLOAT, k=-2)
    model = flex_model(F32, score_mod=g)
    fd = feeds((1, 2, 2, 4, 4, 8, 8), F32, seed=1)
    got = run(model, fd)
    with np.errstate(invalid="ignore"):
        want = reference(model, fd)
        want_oracle = oracle(fd, score_fn=fn)
    assert np.isnan(got[:, :, :2]).all() and not np.isnan(got[:, :, 2:]).any()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, equal_nan=True)
    np.testing.assert_allclose(got, want_oracle, rtol=2e-5, atol=2e-5, equal_nan=True)


# ---- modifiers reading the enclosing graph -----------------------------------------------


def test_score_mod_reads_a_graph_input_and_an_initializer_of_the_enclosing_graph():
    """bias (a graph input, [L, S], fed per run) and temp (an initializer of the main graph)
    reach the subgraph as outer-scope values."""
    n = "outer"
    nodes = [helper.make_node("Add", [f"{n}_x", "bias"], [f"{n}_t"]),
             helper.make_node("Div", [f"{n}_t", "temp"], [f"{n}_y"])]
    g = graph(n, nodes, TP.FLOAT)
    temp = np.array(1.5, F32)
    p_nodes = [helper.make_node("Mul", ["pm_x", "pscale_w"], ["pm_y"])]
    pg = graph("pm", p_nodes, TP.FLOAT)
    model = flex_model(F32, score_mod=g, prob_mod=pg,
                       extra_inputs=[("bias", F32, None), ("pscale_w", F32, None)],
                       initializers=[numpy_helper.from_array(temp, "temp")])
    shape = (2, 4, 2, 5, 7, 8, 6)
    sess = session(model)
    for seed in range(3):
        fd = feeds(shape, F32, seed=seed)
        rng = np.random.default_rng(100 + seed)
        fd["bias"] = rng.standard_normal((5, 7)).astype(F32)
        fd["pscale_w"] = rng.uniform(0.5, 2.0, (1, 4, 1, 1)).astype(F32)
        want = oracle(fd, score_fn=lambda s: (s + fd["bias"]) / 1.5,
                      prob_fn=lambda p: p * fd["pscale_w"])
        assert_close(sess.run(None, fd)[0], want, ORACLE_TOL[F32], F32)


def test_modifiers_without_nodes_return_their_input():
    """A subgraph whose output is its input changes nothing."""
    ident = [helper.make_graph([], name, [vi(f"{name}_x", TP.FLOAT, DIMS)],
                               [vi(f"{name}_x", TP.FLOAT, DIMS)]) for name in ("s", "p")]
    model = flex_model(F32, score_mod=ident[0], prob_mod=ident[1])
    fd = feeds(SHAPES[2], F32, seed=8)
    np.testing.assert_array_equal(run(model, fd), run(flex_model(F32), fd))
    assert_close(run(model, fd), oracle(fd), ORACLE_TOL[F32], F32)


def test_flex_attention_inside_an_if_branch_reads_the_main_graph():
    """The node in a branch of If, its score_mod reading 'bias' two graphs up: the outer-scope
    value passes through If's implicit inputs, then FlexAttention's."""
    n = "nb"
    sg = graph(n, [helper.make_node("Add", [f"{n}_x", "bias"], [f"{n}_y"])], TP.FLOAT)
    fa = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Yt"], domain=PREVIEW, name="fa",
                          score_mod=sg)
    then_g = helper.make_graph([fa], "then", [], [vi("Yt", TP.FLOAT)])
    else_g = helper.make_graph([helper.make_node("Identity", ["Q"], ["Ye"])], "else", [],
                               [vi("Ye", TP.FLOAT)])
    node = helper.make_node("If", ["cond"], ["Y"], then_branch=then_g, else_branch=else_g)
    g = helper.make_graph([node], "g", [vi("cond", TP.BOOL, [])] +
                          [vi(x, TP.FLOAT) for x in ("Q", "K", "V", "bias")], [vi("Y", TP.FLOAT)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET),
                                                helper.make_opsetid(PREVIEW, 1)])
    model.ir_version = 10
    shape = (2, 4, 2, 3, 5, 8, 8)
    fd = feeds(shape, F32, seed=12)
    fd["bias"] = np.random.default_rng(13).standard_normal((3, 5)).astype(F32)
    sess = session(model)
    got = sess.run(None, dict(fd, cond=np.array(True)))[0]
    assert_close(got, oracle(fd, score_fn=lambda s: s + fd["bias"]), ORACLE_TOL[F32], F32)
    np.testing.assert_array_equal(sess.run(None, dict(fd, cond=np.array(False)))[0], fd["Q"])


# ---- threads, sizes ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [
    (2, 8, 2, 64, 96, 32, 16),
    (1, 1, 1, 256, 256, 64, 64),  # one (batch, head) pair: its GEMMs split over the pool
    (3, 4, 4, 33, 17, 24, 40),
])
@pytest.mark.parametrize("mod", [None, "index_bias", "causal_and_prob_threshold"])
def test_threads(shape, mod):
    attrs, fns = modifier_attrs(mod, TP.FLOAT) if mod else ({}, {})
    model = flex_model(F32, **attrs)
    fd = feeds(shape, F32, seed=2)
    want = oracle(fd, **fns)
    outs = []
    for threads in (1, 2):
        outs.append(run(model, fd, threads=threads))
        assert_close(outs[-1], want, (1e-4, 1e-5), F32)
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)


def test_one_session_runs_several_shapes():
    g, fn = index_bias(TP.FLOAT)
    sess = session(flex_model(F32, score_mod=g))
    for i, shape in enumerate(SHAPES):
        fd = feeds(shape, F32, seed=i)
        assert_close(sess.run(None, fd)[0], oracle(fd, score_fn=fn), ORACLE_TOL[F32], F32)


@pytest.mark.parametrize("dims,what", [
    ((2, 3, 3, 0, 4, 8, 5), "L = 0"),
    ((2, 3, 3, 4, 0, 8, 5), "S = 0"),
    ((2, 3, 3, 4, 6, 0, 5), "E = 0"),
    ((2, 3, 3, 4, 6, 8, 0), "Ev = 0"),
    ((0, 3, 3, 4, 6, 8, 5), "B = 0"),
])
@pytest.mark.parametrize("with_mods", [False, True])
def test_empty_dims(dims, what, with_mods):
    """Empty axes give an empty Y, or (S = 0: a sum over no key) zeros; E = 0 gives equal
    scores, the mean of V."""
    B, Hq, Hkv, L, S, E, Ev = dims
    attrs = modifier_attrs("soft_cap_and_prob_scale", TP.FLOAT)[0] if with_mods else {}
    fd = feeds(dims, F32, seed=4)
    got = run(flex_model(F32, **attrs), fd)
    assert got.shape == (B, Hq, L, Ev), what
    if S == 0:
        np.testing.assert_array_equal(got, np.zeros((B, Hq, L, Ev), F32))
    if E == 0:
        mean = fd["V"].mean(axis=2, keepdims=True) * (0.5 if with_mods else 1.0)
        np.testing.assert_allclose(got, np.broadcast_to(mean, got.shape), rtol=1e-6, atol=1e-6)


def test_output_type_is_known_to_the_loader():
    """Y has Q's type: a model declaring another one is refused at load."""
    with pytest.raises(ortlite.InvalidGraph, match=r"type error: output 'Y' of FlexAttention "
                                                   r"node 'fa' is float16.*declares it float"):
        session(flex_model(F16, y_dtype=F32))


# ---- errors --------------------------------------------------------------------------------


def run_error(model, fd, code, match):
    with pytest.raises(code, match=match) as e:
        run(model, fd)
    assert "FlexAttention node 'fa'" in str(e.value)


Z = np.zeros


@pytest.mark.parametrize("q,k,v,match", [
    (Z((2, 3, 4), F32), Z((2, 3, 4), F32), Z((2, 3, 4), F32),
     r"inputs must be rank 4 .* got Q \[2,3,4\], K \[2,3,4\], V \[2,3,4\]"),
    (Z((1, 2, 3, 4), F32), Z((1, 2, 3, 4, 1), F32), Z((1, 2, 3, 4), F32), r"must be rank 4"),
    (Z((1, 3, 4, 8), F32), Z((1, 2, 5, 8), F32), Z((1, 2, 5, 8), F32),
     r"query head count \(3\) must be a multiple of the kv head count \(2\)"),
    (Z((1, 2, 4, 8), F32), Z((1, 0, 5, 8), F32), Z((1, 0, 5, 8), F32),
     r"query head count \(2\) must be a multiple of the kv head count \(0\)"),
    (Z((1, 2, 4, 8), F32), Z((1, 2, 5, 6), F32), Z((1, 2, 5, 8), F32),
     r"Q and K must have the same head size, got Q \[1,2,4,8\], K \[1,2,5,6\]"),
    (Z((1, 2, 4, 8), F32), Z((1, 2, 5, 8), F32), Z((1, 2, 6, 8), F32),
     r"K and V must have the same kv head count and sequence length"),
    (Z((1, 2, 4, 8), F32), Z((1, 2, 5, 8), F32), Z((1, 1, 5, 8), F32),
     r"K and V must have the same kv head count"),
    (Z((2, 2, 4, 8), F32), Z((1, 2, 5, 8), F32), Z((1, 2, 5, 8), F32), r"batch sizes of Q"),
    (Z((1, 2, 4, 8), F32), Z((1, 2, 5, 8), F16), Z((1, 2, 5, 8), F32),
     r"Q, K and V must have the same element type, got float, float16 and float"),
    (Z((1, 2, 4, 8), np.int32), Z((1, 2, 5, 8), np.int32), Z((1, 2, 5, 8), np.int32),
     r"must be float, float16, bfloat16 or double, got int32"),
])
def test_bad_inputs(q, k, v, match):
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain=PREVIEW, name="fa")
    graph_ = helper.make_graph([node], "g",
                               [vi(n, NP_TO_ONNX[a.dtype]) for n, a in zip("QKV", (q, k, v))],
                               [vi("Y", NP_TO_ONNX[q.dtype])])
    model = helper.make_model(graph_, opset_imports=[helper.make_opsetid("", OPSET),
                                                     helper.make_opsetid(PREVIEW, 1)])
    model.ir_version = 10
    run_error(model, {"Q": q, "K": k, "V": v}, ortlite.InvalidArgument, match)


def load_error(model, match, code=ortlite.InvalidGraph):
    with pytest.raises(code, match=match) as e:
        session(model)
    assert "FlexAttention node 'fa'" in str(e.value)


@pytest.mark.parametrize("attr", ["score_mod", "prob_mod"])
@pytest.mark.parametrize("n_in,n_out", [(2, 1), (1, 2), (0, 1)])
def test_modifier_with_the_wrong_number_of_inputs_or_outputs(attr, n_in, n_out):
    n = "bad"
    nodes = [helper.make_node("Identity", ["bad_c"], [f"{n}_y"])]
    if n_out == 2:
        nodes.append(helper.make_node("Identity", ["bad_c"], [f"{n}_out1"]))
    g = graph(n, nodes, TP.FLOAT, [scalar("bad_c", TP.FLOAT, 1.0)], n_in=n_in, n_out=n_out)
    load_error(flex_model(F32, **{attr: g}),
               rf"subgraph '{attr}' must take 1 input and return 1 output .* but it takes "
               rf"{n_in} and returns {n_out}")


@pytest.mark.parametrize("attr", ["score_mod", "prob_mod"])
def test_modifier_declaring_another_rank(attr):
    g = graph("r2", [helper.make_node("Identity", ["r2_x"], ["r2_y"])], TP.FLOAT,
              in_shape=["L", "S"])
    load_error(flex_model(F32, **{attr: g}),
               rf"subgraph '{attr}' declares its input of rank 2; it must be rank 4")


def test_modifier_attribute_of_another_type():
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain=PREVIEW, name="fa",
                            score_mod=3)
    model = flex_model(F32)
    model.graph.node[0].CopyFrom(node)
    load_error(model, r"score_mod")


def test_bad_softmax_precision():
    load_error(flex_model(F32, softmax_precision=TP.INT64),
               r"attribute 'softmax_precision' = 7 is not float \(1\), float16 \(10\)")


@pytest.mark.parametrize("attr", ["score_mod", "prob_mod"])
def test_modifier_returning_another_shape(attr):
    """A ReduceMax over the keys returns [B, H, L, 1]."""
    g = graph("rm", [helper.make_node("ReduceMax", ["rm_x", "rm_axes"], ["rm_y"], keepdims=1)],
              TP.FLOAT, [helper.make_tensor("rm_axes", TP.INT64, [1], [3])])
    model = flex_model(F32, **{attr: g})
    fd = feeds((1, 2, 2, 3, 4, 8, 8), F32)
    run_error(model, fd, ortlite.InvalidArgument,
              rf"subgraph '{attr}' returned float \[1,2,3,1\]; it must return the shape and "
              rf"element type of its input, float \[1,2,3,4\]")


@pytest.mark.parametrize("attr", ["score_mod", "prob_mod"])
def test_modifier_returning_another_type(attr):
    """The output's type is undeclared: the run finds the double tensor."""
    g = graph("ct", [helper.make_node("Cast", ["ct_x"], ["ct_y"], to=TP.DOUBLE)], TP.FLOAT)
    g.output[0].CopyFrom(helper.make_empty_tensor_value_info("ct_y"))
    model = flex_model(F32, **{attr: g})
    fd = feeds((1, 2, 2, 3, 4, 8, 8), F32)
    run_error(model, fd, ortlite.InvalidArgument,
              rf"subgraph '{attr}' returned double \[1,2,3,4\]; it must return the shape and "
              rf"element type of its input, float \[1,2,3,4\]")


@pytest.mark.parametrize("attr", ["score_mod", "prob_mod"])
@pytest.mark.parametrize("dtype,declared,sp", [
    (F32, TP.FLOAT16, None),  # float16 inputs would still give float scores
    (F16, TP.FLOAT16, None),
    (F64, TP.FLOAT, None),
    (F32, TP.FLOAT, TP.DOUBLE),
])
def test_modifier_declaring_another_element_type(attr, dtype, declared, sp):
    g = graph("dt", [helper.make_node("Identity", ["dt_x"], ["dt_y"])], declared)
    attrs = {attr: g}
    if sp is not None:
        attrs["softmax_precision"] = sp
    model = flex_model(dtype, **attrs)
    want = "double" if dtype == F64 or sp == TP.DOUBLE else "float"
    got = {TP.FLOAT16: "float16", TP.FLOAT: "float"}[declared]
    run_error(model, feeds((1, 2, 2, 3, 4, 8, 8), dtype), ortlite.InvalidArgument,
              rf"subgraph '{attr}' declares its input {got}, but the tensor it receives and "
              rf"returns is {want} \(the softmax precision\)")


def test_failing_node_inside_a_modifier_names_the_subgraph():
    n = "rs"
    g = graph(n, [helper.make_node("Reshape", [f"{n}_x", f"{n}_s"], [f"{n}_y"])], TP.FLOAT,
              [helper.make_tensor(f"{n}_s", TP.INT64, [2], [5, 7])])
    model = flex_model(F32, score_mod=g)
    run_error(model, feeds((1, 2, 2, 3, 4, 8, 8), F32), ortlite.InvalidArgument,
              r"subgraph 'score_mod': .*Reshape")


def test_modifier_reading_an_undefined_outer_name():
    g = graph("un", [helper.make_node("Add", ["un_x", "nowhere"], ["un_y"])], TP.FLOAT)
    load_error(flex_model(F32, score_mod=g),
               r"input 'nowhere' is not a graph input, an initializer or the output of any node")
