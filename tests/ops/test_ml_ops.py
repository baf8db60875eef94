"""ai.onnx.ml operators (LinearClassifier, LinearRegressor, Normalizer, ZipMap, Scaler,
Binarizer, ArrayFeatureExtractor, LabelEncoder, TreeEnsembleClassifier/Regressor,
TreeEnsemble) compared with onnxruntime (or the ONNX reference where onnxruntime has no
kernel or departs from the specification), the logreg_iris.onnx model onnxruntime ships,
ZipMap's list of dicts (types, order, refcounts, leaks) and the typed errors."""

import gc
import os
import sys
import tracemalloc

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ortlite
from helpers import assert_same, run_lite, run_ort

F = TensorProto.FLOAT
D = TensorProto.DOUBLE
I64 = TensorProto.INT64
I32 = TensorProto.INT32
S = TensorProto.STRING
NP = {F: np.float32, D: np.float64, I64: np.int64, I32: np.int32}
ML = "ai.onnx.ml"
IRIS = os.path.join(os.path.dirname(onnxruntime.__file__), "datasets", "logreg_iris.onnx")


def ml_model(op, inputs, outputs, ml_opset=1, **attrs):
    """One ai.onnx.ml node. inputs: [(name, elem)]; outputs: [(name, elem or TypeProto)]."""
    node = helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], domain=ML,
                            **attrs)

    def out_vi(name, t):
        if isinstance(t, int):
            return helper.make_tensor_value_info(name, t, None)
        return helper.make_value_info(name, t)

    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, None)
                                        for n, t in inputs],
                          [out_vi(n, t) for n, t in outputs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid(ML, ml_opset)])
    m.ir_version = 10
    return m.SerializeToString()


def check(data, feeds, rtol=1e-5, atol=1e-6):
    got = run_lite(data, feeds)
    exp = run_ort(data, feeds)
    assert_same(got, exp, rtol, atol)
    return got


def seq_map_type(key):
    return helper.make_sequence_type_proto(
        helper.make_map_type_proto(key, helper.make_tensor_type_proto(F, None)))


# ---- logreg_iris.onnx ----------------------------------------------------------------------

def test_logreg_iris_matches_onnxruntime():
    lite = ortlite.InferenceSession(IRIS)
    ref = onnxruntime.InferenceSession(IRIS, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = (rng.random((3, 2)) * 8 - 2).astype(np.float32)
        got = lite.run(None, {"float_input": x})
        exp = ref.run(None, {"float_input": x})
        assert got[0].dtype == np.int64
        np.testing.assert_array_equal(got[0], exp[0])
        assert isinstance(got[1], list) and len(got[1]) == len(exp[1]) == 3
        for g, e in zip(got[1], exp[1]):
            assert type(g) is dict
            assert list(g) == list(e) == [0, 1, 2]
            assert all(type(k) is int and type(v) is float for k, v in g.items())
            np.testing.assert_allclose([g[k] for k in e], [e[k] for k in e], rtol=1e-5,
                                       atol=1e-6)
    # Only the maps.
    (probs,) = lite.run(["probabilities"], {"float_input": x})
    assert list(probs[0]) == [0, 1, 2]


def test_logreg_iris_node_args_match_onnxruntime():
    lite = ortlite.InferenceSession(IRIS)
    ref = onnxruntime.InferenceSession(IRIS, providers=["CPUExecutionProvider"])
    for a, b in [(lite.get_inputs(), ref.get_inputs()), (lite.get_outputs(), ref.get_outputs())]:
        assert [(n.name, n.type, n.shape) for n in a] == [(n.name, n.type, n.shape) for n in b]
    assert lite.get_outputs()[1].type == "seq(map(int64,tensor(float)))"


def test_zipmap_output_refused_by_run_with_ort_values():
    sess = ortlite.InferenceSession(IRIS)
    x = ortlite.OrtValue.ortvalue_from_numpy(np.ones((3, 2), np.float32))
    with pytest.raises(ortlite.NotImplemented, match=r"seq\(map\(int64,tensor\(float\)\)\)"):
        sess.run_with_ort_values(None, {"float_input": x})
    (label,) = sess.run_with_ort_values(["label"], {"float_input": x})
    assert label.numpy().shape == (3,)


def test_zipmap_results_hold_no_extra_references_and_do_not_leak():
    sess = ortlite.InferenceSession(IRIS)
    x = np.random.default_rng(1).random((3, 2)).astype(np.float32)
    feed = {"float_input": x}
    out = sess.run(None, feed)
    d = out[1][0]
    assert sys.getrefcount(d) == 3  # the list, `d` and the call's argument
    assert all(sys.getrefcount(d[k]) == 2 for k in d)  # the dict and the argument
    del out, d
    before = (sys.getrefcount(x), sys.getrefcount(feed))
    for _ in range(200):
        sess.run(None, feed)
    gc.collect()
    tracemalloc.start()
    for _ in range(50):
        sess.run(None, feed)
    gc.collect()
    base, _ = tracemalloc.get_traced_memory()
    for _ in range(1000):
        sess.run(None, feed)
    gc.collect()
    grown, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert (sys.getrefcount(x), sys.getrefcount(feed)) == before
    assert grown - base < 64 * 1024, grown - base


def test_seq_map_input_is_refused():
    g = helper.make_graph([helper.make_node("Identity", ["m"], ["y"])], "g",
                          [helper.make_value_info("m", seq_map_type(I64))],
                          [helper.make_value_info("y", seq_map_type(I64))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    sess = ortlite.InferenceSession(m.SerializeToString())
    assert sess.get_inputs()[0].type == "seq(map(int64,tensor(float)))"
    with pytest.raises(ortlite.NotImplemented, match="maps"):
        sess.run(None, {"m": [{1: 0.5}]})


# ---- LinearClassifier / LinearRegressor ----------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_linear_classifier_matches_onnxruntime(seed):
    rng = np.random.default_rng(seed)
    for _ in range(12):
        c = int(rng.integers(1, 5))
        e = int(rng.choice([1, 2, 3, 4]))
        n = int(rng.integers(1, 6))
        nl = e if e > 1 else int(rng.choice([1, 2, 3]))
        posts = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"] + (["PROBIT"] if nl != 2 else [])
        post = str(rng.choice(posts))
        attrs = dict(coefficients=rng.normal(size=e * c).tolist(),
                     intercepts=rng.normal(size=e).tolist(), post_transform=post)
        strings = bool(rng.integers(0, 2))
        if strings:
            attrs["classlabels_strings"] = [f"c{i}" for i in range(nl)]
        else:
            attrs["classlabels_ints"] = [i * 7 - 3 for i in range(nl)]
        xt = int(rng.choice([F, D, I64, I32]))
        x = (rng.normal(size=(n, c)) * 3).astype(NP[xt])
        if post == "PROBIT":  # scores in (0, 1), where probit is defined
            attrs["coefficients"] = (rng.random(e * c) * 0.02).tolist()
            attrs["intercepts"] = rng.uniform(0.2, 0.7, size=e).tolist()
            x = np.abs(x)
        if rng.integers(0, 4) == 0:
            x = x[0]  # one row given as [C]
        data = ml_model("LinearClassifier", [("X", xt)], [("Y", S if strings else I64), ("Z", F)],
                        **attrs)
        check(data, {"X": x}, rtol=1e-4, atol=1e-5)


def test_linear_classifier_ignores_surplus_coefficients_like_onnxruntime():
    # logreg_iris.onnx holds 3 x 4 coefficients for 2 features.
    data = ml_model("LinearClassifier", [("X", F)], [("Y", I64), ("Z", F)],
                    coefficients=[float(v) for v in range(12)], intercepts=[0.1, 0.2, -0.3],
                    classlabels_ints=[5, 6, 7])
    check(data, {"X": np.array([[1, -2], [0.5, 0.25]], np.float32)})


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("targets", [1, 3])
def test_linear_regressor_matches_onnxruntime(post, targets):
    rng = np.random.default_rng(targets)
    attrs = dict(coefficients=rng.normal(size=targets * 4).tolist(), targets=targets,
                 post_transform=post)
    x = rng.normal(size=(5, 4)).astype(np.float32)
    check(ml_model("LinearRegressor", [("X", F)], [("Y", F)], **attrs), {"X": x}, 1e-4, 1e-5)
    attrs["intercepts"] = rng.normal(size=targets).tolist()
    check(ml_model("LinearRegressor", [("X", F)], [("Y", F)], **attrs), {"X": x}, 1e-4, 1e-5)


def test_linear_regressor_other_input_types_match_float():
    # onnxruntime has a float kernel only; the others are converted to float first.
    attrs = dict(coefficients=[0.5, -1.0, 2.0, 0.25], intercepts=[1.0, -1.0], targets=2)
    x = np.array([[1, 2], [-3, 4]], np.int64)
    want = run_lite(ml_model("LinearRegressor", [("X", F)], [("Y", F)], **attrs),
                    {"X": x.astype(np.float32)})[0]
    for xt in (D, I64, I32):
        got = run_lite(ml_model("LinearRegressor", [("X", xt)], [("Y", F)], **attrs),
                       {"X": x.astype(NP[xt])})[0]
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(want, x @ np.array([[0.5, -1.0], [2.0, 0.25]]).T + [1, -1])


# ---- Normalizer, Scaler, Binarizer, ArrayFeatureExtractor ----------------------------------

@pytest.mark.parametrize("xt", [F, D, I64, I32])
def test_normalizer_scaler_match_onnxruntime(xt):
    rng = np.random.default_rng(xt)
    for shape in [(4,), (3, 5), (2, 1)]:
        x = (rng.normal(size=shape) * 4).astype(NP[xt])
        x[..., 0] = 0
        if len(shape) == 2:
            x[1] = 0  # a row of zeros is copied
        for norm in ("MAX", "L1", "L2"):
            check(ml_model("Normalizer", [("X", xt)], [("Y", F)], norm=norm), {"X": x})
        for k in {1, shape[-1]}:
            check(ml_model("Scaler", [("X", xt)], [("Y", F)], scale=rng.normal(size=k).tolist(),
                           offset=rng.normal(size=k).tolist()), {"X": x})


def test_binarizer_matches_onnxruntime_and_keeps_the_type():
    x = np.array([[-1, 0, 0.5, 1, 1.5]], np.float32)
    check(ml_model("Binarizer", [("X", F)], [("Y", F)]), {"X": x})
    check(ml_model("Binarizer", [("X", F)], [("Y", F)], threshold=0.75), {"X": x})
    for xt in (D, I64, I32):
        (y,) = run_lite(ml_model("Binarizer", [("X", xt)], [("Y", xt)], threshold=0.5),
                        {"X": x.astype(NP[xt])})
        assert y.dtype == NP[xt]
        np.testing.assert_array_equal(y, (x.astype(NP[xt]) > 0.5).astype(NP[xt]))
    # NaN is not above any threshold (onnxruntime rejects it).
    (y,) = run_lite(ml_model("Binarizer", [("X", F)], [("Y", F)]),
                    {"X": np.array([np.nan, 2], np.float32)})
    np.testing.assert_array_equal(y, [0, 1])


@pytest.mark.parametrize("xt", [F, D, I64, I32, S])
def test_array_feature_extractor_matches_onnxruntime(xt):
    rng = np.random.default_rng(3)
    for shape in [(5,), (2, 4), (2, 3, 4)]:
        x = rng.integers(-9, 9, size=shape)
        x = np.array([f"s{v}" for v in x.ravel()], dtype=object).reshape(shape) if xt == S \
            else x.astype(NP[xt])
        for ind in ([0], [3, 1, 1], [[2, 0]]):
            data = ml_model("ArrayFeatureExtractor", [("X", xt), ("I", I64)], [("Y", xt)])
            check(data, {"X": x, "I": np.array(ind, np.int64)})


# ---- ZipMap --------------------------------------------------------------------------------

@pytest.mark.parametrize("labels", [
    dict(classlabels_int64s=[3, -1, 7]),
    dict(classlabels_int64s=[2, 2, -5, 9]),  # a repeated label keeps its last column
    dict(classlabels_strings=["b", "a", "zz"]),
    dict(classlabels_strings=["x", "B", "x", "a"]),
])
def test_zipmap_matches_onnxruntime(labels):
    key = I64 if "classlabels_int64s" in labels else S
    c = len(next(iter(labels.values())))
    data = ml_model("ZipMap", [("X", F)], [("Z", seq_map_type(key))], **labels)
    rng = np.random.default_rng(c)
    for x in (rng.random((3, c)).astype(np.float32), rng.random(c).astype(np.float32),
              np.zeros((0, c), np.float32)):
        (got,) = run_lite(data, {"X": x})
        (exp,) = run_ort(data, {"X": x})
        assert got == exp
        assert [list(d) for d in got] == [list(d) for d in exp]  # key order too


# ---- LabelEncoder --------------------------------------------------------------------------

def test_label_encoder_v1_matches_onnxruntime():
    x = np.array([["a", "b"], ["zz", "c"]], dtype=object)
    check(ml_model("LabelEncoder", [("X", S)], [("Y", I64)], classes_strings=["a", "c", "b", "a"]),
          {"X": x})
    check(ml_model("LabelEncoder", [("X", S)], [("Y", I64)], classes_strings=["a", "c"],
                   default_int64=42), {"X": x})
    check(ml_model("LabelEncoder", [("X", I64)], [("Y", S)], classes_strings=["a", "c", "b"],
                   default_string="?"), {"X": np.array([0, 2, 5, -1], np.int64)})


LISTS = {"strings": (S, lambda rng, n: [f"k{i}" for i in rng.integers(0, 6, size=n)]),
         "int64s": (I64, lambda rng, n: [int(v) for v in rng.integers(-5, 5, size=n)]),
         "floats": (F, lambda rng, n: [float(v) for v in np.round(rng.normal(size=n), 1)])}
DEFAULTS = {"strings": ("default_string", "DEF"), "int64s": ("default_int64", 99),
            "floats": ("default_float", 7.5)}


@pytest.mark.parametrize("opset", [2, 4])
@pytest.mark.parametrize("kk", list(LISTS))
@pytest.mark.parametrize("vk", list(LISTS))
def test_label_encoder_lists_match_onnxruntime(opset, kk, vk):
    rng = np.random.default_rng(opset * 10 + len(kk) + len(vk))
    kt, kgen = LISTS[kk]
    vt, vgen = LISTS[vk]
    for with_default in (False, True):
        n = int(rng.integers(1, 6))
        keys, values = kgen(rng, n), vgen(rng, n)  # keys may repeat: the first one wins
        attrs = {f"keys_{kk}": keys, f"values_{vk}": values}
        if with_default:
            attrs[DEFAULTS[vk][0]] = DEFAULTS[vk][1]
        pool = keys + kgen(rng, 3) + ([0.0, -0.0] if kk == "floats" else [])
        x = np.array([pool[i] for i in rng.integers(0, len(pool), size=7)],
                     dtype=object if kt == S else NP[kt])
        check(ml_model("LabelEncoder", [("X", kt)], [("Y", vt)], ml_opset=opset, **attrs),
              {"X": x})


def test_label_encoder_float_keys_nan_and_signed_zero():
    data = ml_model("LabelEncoder", [("X", F)], [("Y", I64)], ml_opset=4,
                    keys_floats=[1.0, float("nan"), -0.0], values_int64s=[3, 4, 5])
    check(data, {"X": np.array([np.nan, 1, 2, 0.0, -0.0], np.float32)})


def test_label_encoder_v4_tensors():
    t = numpy_helper.from_array
    # Combinations onnxruntime has kernels for.
    for k, v in [(np.int64, np.float64), (np.float64, np.float64), (np.int64, np.int64)]:
        attrs = dict(keys_tensor=t(np.array([1, 2, 3], k), "k"),
                     values_tensor=t(np.array([10, 20, 30], v), "v"))
        x = np.array([1, 3, 4], k)
        kt, vt = (helper.np_dtype_to_tensor_dtype(np.dtype(d)) for d in (k, v))
        check(ml_model("LabelEncoder", [("X", kt)], [("Y", vt)], ml_opset=4, **attrs), {"X": x})
        attrs["default_tensor"] = t(np.array([-7], v), "d")
        check(ml_model("LabelEncoder", [("X", kt)], [("Y", vt)], ml_opset=4, **attrs), {"X": x})
    # int32 / int16 combinations onnxruntime lacks: the ONNX reference.
    for k, v in [(np.int32, np.float64), (np.int16, np.int32), (np.float64, np.int16)]:
        attrs = dict(keys_tensor=t(np.array([1, 2, 3], k), "k"),
                     values_tensor=t(np.array([10, 20, 30], v), "v"),
                     default_tensor=t(np.array([-7], v), "d"))
        kt, vt = (helper.np_dtype_to_tensor_dtype(np.dtype(d)) for d in (k, v))
        data = ml_model("LabelEncoder", [("X", kt)], [("Y", vt)], ml_opset=4, **attrs)
        x = np.array([[1, 3], [4, 2]], k)
        exp = ReferenceEvaluator(data).run(None, {"X": x})
        assert_same(run_lite(data, {"X": x}), exp)


# ---- tree ensembles ------------------------------------------------------------------------

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def random_trees(rng, ntrees, c, depth=3):
    """nodes_* attributes of random trees (ids restart per tree) and their (tree, node)
    leaves."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                         "nodes_values", "nodes_truenodeids", "nodes_falsenodeids",
                         "nodes_missing_value_tracks_true")}
    leaves = []
    mixed = bool(rng.integers(0, 2))
    for t in range(ntrees):
        counter = [0]

        def build(d):
            i = counter[0]
            counter[0] += 1
            idx = len(a["nodes_treeids"])
            for k, v in (("nodes_treeids", t), ("nodes_nodeids", i), ("nodes_featureids", 0),
                         ("nodes_modes", "LEAF"), ("nodes_values", 0.0),
                         ("nodes_truenodeids", 0), ("nodes_falsenodeids", 0),
                         ("nodes_missing_value_tracks_true", 0)):
                a[k].append(v)
            if d == 0 or rng.random() < 0.2:
                leaves.append((t, i))
                return i
            a["nodes_modes"][idx] = MODES[rng.integers(0, 6)] if mixed else "BRANCH_LEQ"
            a["nodes_featureids"][idx] = int(rng.integers(0, c))
            a["nodes_values"][idx] = float(np.round(rng.normal(), 1))
            a["nodes_missing_value_tracks_true"][idx] = int(rng.integers(0, 2))
            a["nodes_truenodeids"][idx] = build(d - 1)
            a["nodes_falsenodeids"][idx] = build(d - 1)
            return i

        build(depth)
    return a, leaves


def tree_input(rng, n, c, xt):
    x = np.round(rng.normal(size=(n, c)), 1)
    if xt in (F, D):
        x[rng.integers(0, n), rng.integers(0, c)] = np.nan
    else:
        x = x * 3
    return x.astype(NP[xt])


def as_tensor(a, keys):
    for k in keys:
        if k in a:
            a[k + "_as_tensor"] = numpy_helper.from_array(np.array(a.pop(k), np.float64), k)


@pytest.mark.parametrize("seed", range(3))
def test_tree_ensemble_regressor_matches_onnxruntime(seed):
    rng = np.random.default_rng(seed)
    for _ in range(16):
        c, nt = int(rng.integers(1, 4)), int(rng.choice([1, 1, 2, 3]))
        a, leaves = random_trees(rng, int(rng.integers(1, 5)), c)
        w = {k: [] for k in ("target_treeids", "target_nodeids", "target_ids", "target_weights")}
        for t, i in leaves:
            for _ in range(int(rng.integers(1, 3)) if nt > 1 else 1):
                w["target_treeids"].append(t)
                w["target_nodeids"].append(i)
                w["target_ids"].append(int(rng.integers(0, nt)))
                w["target_weights"].append(float(np.round(rng.normal(), 2)))
        a.update(w, n_targets=nt, aggregate_function=str(rng.choice(["SUM", "AVERAGE", "MIN",
                                                                      "MAX"])),
                 post_transform=str(rng.choice(["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])))
        nb = int(rng.choice([0, 1, nt]))
        if nb:
            a["base_values"] = np.round(rng.normal(size=nb), 2).tolist()
        xt = int(rng.choice([F, D]))  # onnxruntime has no int kernels for the regressor
        if xt == D and rng.integers(0, 2):
            as_tensor(a, ["nodes_values", "target_weights", "base_values"])
        data = ml_model("TreeEnsembleRegressor", [("X", xt)], [("Y", F)], ml_opset=3, **a)
        check(data, {"X": tree_input(rng, int(rng.integers(1, 7)), c, xt)}, 1e-4, 1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_tree_ensemble_classifier_matches_onnxruntime(seed):
    rng = np.random.default_rng(10 + seed)
    for _ in range(16):
        c, ncls = int(rng.integers(1, 4)), int(rng.choice([2, 2, 2, 3, 4]))
        a, leaves = random_trees(rng, int(rng.integers(1, 5)), c)
        one_class = ncls == 2 and rng.integers(0, 2) == 1  # the binary case
        positive = rng.integers(0, 2) == 1
        w = {k: [] for k in ("class_treeids", "class_nodeids", "class_ids", "class_weights")}
        for t, i in leaves:
            for _ in range(1 if one_class else int(rng.integers(1, 3))):
                v = float(np.round(rng.normal() * 0.5, 2))
                w["class_treeids"].append(t)
                w["class_nodeids"].append(i)
                w["class_ids"].append(1 if one_class else int(rng.integers(0, ncls)))
                w["class_weights"].append(abs(v) if positive else v)
        # The binary case with positive weights and LOGISTIC follows onnxruntime's later fix
        # (test_binary_positive_logistic_scores_are_transformed), not 1.23.
        posts = ["NONE", "SOFTMAX", "SOFTMAX_ZERO"] + ([] if one_class and positive
                                                       else ["LOGISTIC"])
        a.update(w, post_transform=str(rng.choice(posts)))
        strings = bool(rng.integers(0, 2))
        if strings:
            a["classlabels_strings"] = [f"L{i}" for i in range(ncls)]
        else:
            a["classlabels_int64s"] = [10 + 5 * i for i in range(ncls)]
        # One base value for two classes that are not a binary case leaves a score column
        # unwritten in onnxruntime (uninitialized memory): not compared.
        sizes = [0, 2] + ([1] if one_class else []) if ncls == 2 else [0, ncls]
        nb = int(rng.choice(sizes))
        if nb:
            a["base_values"] = np.round(rng.normal(size=nb), 2).tolist()
        xt = int(rng.choice([F, D, I64, I32]))
        if xt == D and rng.integers(0, 2):
            as_tensor(a, ["nodes_values", "class_weights", "base_values"])
        data = ml_model("TreeEnsembleClassifier", [("X", xt)], [("Y", S if strings else I64),
                                                                 ("Z", F)], ml_opset=3, **a)
        check(data, {"X": tree_input(rng, int(rng.integers(1, 7)), c, xt)}, 1e-4, 1e-5)


def v5_model(a, xt):
    return ml_model("TreeEnsemble", [("X", xt)], [("Y", xt)], ml_opset=5, **a)


def random_v5(rng, xt, members):
    c, nt = int(rng.integers(1, 4)), int(rng.choice([1, 2, 3]))
    npt = NP[xt]
    f = {k: [] for k in ("feat", "split", "mode", "tid", "fid", "tl", "fl", "miss")}
    lt, lw, mv, roots = [], [], [], []

    def leaf():
        lt.append(int(rng.integers(0, nt)))
        lw.append(float(np.round(rng.normal(), 2)))
        return len(lt) - 1

    def build(d):
        i = len(f["feat"])
        mode = int(rng.integers(0, 7 if members else 6))
        for k, v in (("feat", int(rng.integers(0, c))), ("split", float(np.round(rng.normal(), 1))),
                     ("mode", mode), ("miss", int(rng.integers(0, 2))), ("tid", 0), ("fid", 0),
                     ("tl", 0), ("fl", 0)):
            f[k].append(v)
        if mode == 6:  # integer members: onnxruntime tests int(x) against them
            mv.extend(rng.integers(-2, 3, size=int(rng.integers(1, 4))).tolist() + [np.nan])
        for side, (ik, lk) in enumerate((("tid", "tl"), ("fid", "fl"))):
            if d == 0 or rng.random() < 0.3:
                f[ik][i], f[lk][i] = leaf(), 1
            else:
                f[ik][i], f[lk][i] = build(d - 1), 0
        return i

    while True:
        r = build(2)
        # onnxruntime takes any root whose true and false ids are equal for a one-leaf tree.
        if f["tid"][r] != f["fid"][r]:
            roots.append(r)
        if len(roots) == 2 or (roots and rng.random() < 0.5):
            break
    a = dict(nodes_featureids=f["feat"], nodes_splits=numpy_helper.from_array(
                 np.array(f["split"], npt), "s"),
             nodes_modes=numpy_helper.from_array(np.array(f["mode"], np.uint8), "m"),
             nodes_truenodeids=f["tid"], nodes_falsenodeids=f["fid"], nodes_trueleafs=f["tl"],
             nodes_falseleafs=f["fl"], nodes_missing_value_tracks_true=f["miss"],
             leaf_targetids=lt, leaf_weights=numpy_helper.from_array(np.array(lw, npt), "w"),
             tree_roots=roots, n_targets=nt)
    if mv:
        a["membership_values"] = numpy_helper.from_array(np.array(mv, npt), "mv")
    return a, c


@pytest.mark.parametrize("xt", [F, D])
def test_tree_ensemble_v5_matches_onnxruntime(xt):
    rng = np.random.default_rng(xt)
    for trial in range(24):
        a, c = random_v5(rng, xt, members=trial % 2 == 1)
        post, agg = int(rng.integers(0, 5)), int(rng.integers(0, 4))
        a.update(aggregate_function=agg, post_transform=post)
        if post == 4:  # one target (the only case onnxruntime applies PROBIT to) in (0, 1)
            nl = len(a["leaf_targetids"])
            a.update(n_targets=1, leaf_targetids=[0] * nl, leaf_weights=numpy_helper.from_array(
                rng.uniform(0.05, 0.45, size=nl).astype(NP[xt]), "w"))
        x = np.round(rng.normal(size=(int(rng.integers(1, 6)), c)) * 2).astype(NP[xt])
        x[0, 0] = np.nan
        # onnxruntime reads post_transform 1 as LOGISTIC and 2 as SOFTMAX; the
        # specification (and ortlite): 1 SOFTMAX, 2 LOGISTIC.
        ort_attrs = dict(a, post_transform={1: 2, 2: 1}.get(post, post))
        exp = run_ort(v5_model(ort_attrs, xt), {"X": x})
        assert_same(run_lite(v5_model(a, xt), {"X": x}), exp, 1e-4, 1e-5)


def test_tree_ensemble_v5_matches_the_reference():
    rng = np.random.default_rng(5)
    for _ in range(8):
        a, c = random_v5(rng, F, members=False)
        a.update(aggregate_function=int(rng.choice([0, 1])), post_transform=0)
        x = np.round(rng.normal(size=(4, c)), 1).astype(np.float32)
        data = v5_model(a, F)
        assert_same(run_lite(data, {"X": x}), ReferenceEvaluator(data).run(None, {"X": x}),
                    1e-5, 1e-6)


def test_tree_ensemble_v5_one_leaf_tree_and_membership():
    # Tree 0 is one leaf (both branches of its root are leaf 1); tree 1 tests membership
    # of 1.5 and 4 (non-integer members, which onnxruntime truncates).
    t = numpy_helper.from_array
    a = dict(nodes_featureids=[0, 0], nodes_splits=t(np.zeros(2, np.float32), "s"),
             nodes_modes=t(np.array([0, 6], np.uint8), "m"), nodes_truenodeids=[1, 2],
             nodes_falsenodeids=[1, 3], nodes_trueleafs=[1, 1], nodes_falseleafs=[1, 1],
             leaf_targetids=[0, 0, 0, 0], leaf_weights=t(np.array([9, 1, 10, 100], np.float32),
                                                         "w"),
             tree_roots=[0, 1], n_targets=1,
             membership_values=t(np.array([1.5, 4, np.nan], np.float32), "mv"))
    x = np.array([[1.5], [1.0], [4.0], [np.nan]], np.float32)
    (y,) = run_lite(v5_model(a, F), {"X": x})
    np.testing.assert_array_equal(y, [[11], [101], [11], [101]])


def test_tree_ensemble_float16_and_double():
    t = numpy_helper.from_array
    for dt, elem in ((np.float16, TensorProto.FLOAT16), (np.float64, D)):
        a = dict(nodes_featureids=[1], nodes_splits=t(np.array([0.5], dt), "s"),
                 nodes_modes=t(np.array([0], np.uint8), "m"), nodes_truenodeids=[0],
                 nodes_falsenodeids=[1], nodes_trueleafs=[1], nodes_falseleafs=[1],
                 leaf_targetids=[0, 1], leaf_weights=t(np.array([1.25, -2.5], dt), "w"),
                 tree_roots=[0], n_targets=2)
        data = ml_model("TreeEnsemble", [("X", elem)], [("Y", elem)], ml_opset=5, **a)
        (y,) = run_lite(data, {"X": np.array([[0, 0.25], [0, 1]], dt)})
        assert y.dtype == dt
        np.testing.assert_array_equal(y, np.array([[1.25, 0], [0, -2.5]], dt))


# ---- errors --------------------------------------------------------------------------------

def load_error(data):
    with pytest.raises(ortlite.OrtliteError) as info:
        ortlite.InferenceSession(data)
    return info


TREE = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[2, 0, 0],
            nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.0, 0.0, 0.0],
            nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0], target_treeids=[0, 0],
            target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[1.0, 2.0])


@pytest.mark.parametrize("op, attrs, exc, match", [
    ("LinearClassifier", dict(coefficients=[1.0]), ortlite.InvalidGraph, "classlabels"),
    ("LinearClassifier", dict(coefficients=[1.0], classlabels_ints=[1], post_transform="X"),
     ortlite.InvalidGraph, "post_transform"),
    ("LinearClassifier", dict(coefficients=[1.0] * 6, intercepts=[0.0] * 3,
                              classlabels_ints=[1, 2]), ortlite.InvalidGraph, "class labels"),
    ("LinearRegressor", dict(coefficients=[1.0], targets=0), ortlite.InvalidGraph, "targets"),
    ("Normalizer", dict(norm="L3"), ortlite.InvalidGraph, "norm"),
    ("Scaler", dict(scale=[1.0, 2.0], offset=[0.0]), ortlite.InvalidGraph, "same length"),
    ("Scaler", dict(offset=[0.0]), ortlite.InvalidGraph, "scale"),
    ("ZipMap", dict(), ortlite.InvalidGraph, "classlabels"),
    ("ZipMap", dict(classlabels_int64s=[1], classlabels_strings=["a"]), ortlite.InvalidGraph,
     "exactly one"),
    ("LabelEncoder", dict(keys_int64s=[1, 2], values_int64s=[1]), ortlite.InvalidGraph,
     "lengths"),
    ("LabelEncoder", dict(keys_int64s=[1], keys_strings=["a"], values_int64s=[1]),
     ortlite.InvalidGraph, "keys_"),
    ("TreeEnsembleRegressor", dict(TREE, nodes_modes=["BRANCH_XX", "LEAF", "LEAF"]),
     ortlite.InvalidGraph, "BRANCH_XX"),
    ("TreeEnsembleRegressor", dict(TREE, nodes_truenodeids=[7, 0, 0]), ortlite.InvalidGraph,
     "points to node 7"),
    ("TreeEnsembleRegressor", dict(TREE, nodes_modes=["BRANCH_LEQ"] * 3,
                                   nodes_truenodeids=[1, 2, 0], nodes_falsenodeids=[2, 0, 1]),
     ortlite.InvalidGraph, "cycle"),
    ("TreeEnsembleRegressor", dict(TREE, target_ids=[0, 3]), ortlite.InvalidGraph, "target_ids"),
    ("TreeEnsembleRegressor", dict(TREE, nodes_values=[0.0]), ortlite.InvalidGraph,
     "nodes_values"),
    ("TreeEnsembleRegressor", dict(TREE, aggregate_function="MEDIAN"), ortlite.InvalidGraph,
     "aggregate_function"),
])
def test_bad_attributes_fail_at_load(op, attrs, exc, match):
    data = ml_model(op, [("X", F)], [("Y", F), ("Z", F)][:2 if "Classifier" in op else 1],
                    ml_opset=2 if op == "LabelEncoder" else 3, **attrs)
    with pytest.raises(exc, match=match):
        ortlite.InferenceSession(data)


def test_tree_ensemble_v5_bad_attributes_fail_at_load():
    t = numpy_helper.from_array
    a = dict(nodes_featureids=[0], nodes_splits=t(np.zeros(1, np.float32), "s"),
             nodes_modes=t(np.array([0], np.uint8), "m"), nodes_truenodeids=[0],
             nodes_falsenodeids=[0], nodes_trueleafs=[1], nodes_falseleafs=[0],
             leaf_targetids=[0], leaf_weights=t(np.ones(1, np.float32), "w"), tree_roots=[0])
    with pytest.raises(ortlite.InvalidGraph, match="cycle"):
        ortlite.InferenceSession(v5_model(a, F))
    with pytest.raises(ortlite.InvalidGraph, match="out of range"):
        ortlite.InferenceSession(v5_model(dict(a, nodes_falseleafs=[1], tree_roots=[3]), F))
    with pytest.raises(ortlite.InvalidGraph, match="membership_values"):
        ortlite.InferenceSession(v5_model(dict(a, nodes_falseleafs=[1],
                                               nodes_modes=t(np.array([6], np.uint8), "m")), F))
    with pytest.raises(ortlite.InvalidGraph, match="post_transform"):
        ortlite.InferenceSession(v5_model(dict(a, nodes_falseleafs=[1], post_transform=9), F))


@pytest.mark.parametrize("data, feeds, match", [
    (ml_model("LinearClassifier", [("X", F)], [("Y", I64), ("Z", F)], coefficients=[1.0] * 4,
              intercepts=[0.0, 0.0], classlabels_ints=[1, 2]),
     {"X": np.ones((2, 3), np.float32)}, "coefficients"),
    (ml_model("LinearClassifier", [("X", TensorProto.UINT8)], [("Y", I64), ("Z", F)],
              coefficients=[1.0], classlabels_ints=[1, 2]),
     {"X": np.ones((2, 1), np.uint8)}, "uint8"),
    (ml_model("Normalizer", [("X", F)], [("Y", F)]), {"X": np.ones((2, 2, 2), np.float32)},
     r"\[N, C\]"),
    (ml_model("Scaler", [("X", F)], [("Y", F)], scale=[1.0, 2.0], offset=[0.0, 0.0]),
     {"X": np.ones((2, 3), np.float32)}, "feature count"),
    (ml_model("ArrayFeatureExtractor", [("X", F), ("I", I64)], [("Y", F)]),
     {"X": np.ones((2, 3), np.float32), "I": np.array([3], np.int64)}, "out of range"),
    (ml_model("ArrayFeatureExtractor", [("X", F), ("I", I64)], [("Y", F)]),
     {"X": np.ones((2, 3), np.float32), "I": np.array([-1], np.int64)}, "out of range"),
    (ml_model("ZipMap", [("X", F)], [("Z", seq_map_type(I64))], classlabels_int64s=[1, 2]),
     {"X": np.ones((2, 3), np.float32)}, "class labels"),
    (ml_model("LabelEncoder", [("X", F)], [("Y", I64)], ml_opset=2, keys_int64s=[1],
              values_int64s=[2]), {"X": np.ones(2, np.float32)}, "keys are int64"),
    (ml_model("TreeEnsembleRegressor", [("X", F)], [("Y", F)], ml_opset=3, **TREE),
     {"X": np.ones((2, 2), np.float32)}, "feature 2"),
    (ml_model("TreeEnsembleRegressor", [("X", TensorProto.BOOL)], [("Y", F)], ml_opset=3, **TREE),
     {"X": np.ones((2, 3), bool)}, "bool"),
])
def test_bad_inputs_fail_at_run(data, feeds, match):
    sess = ortlite.InferenceSession(data)
    with pytest.raises(ortlite.InvalidArgument, match=match):
        sess.run(None, feeds)


def test_ml_opset_above_5_and_unknown_ml_op():
    data = ml_model("SVMClassifier", [("X", F)], [("Y", I64), ("Z", F)], classlabels_ints=[0, 1])
    with pytest.raises(ortlite.NotImplemented, match="SVMClassifier"):
        ortlite.InferenceSession(data)
    # LinearRegressor has one version (1) that every later ai.onnx.ml opset keeps.
    data = ml_model("LinearRegressor", [("X", F)], [("Y", F)], ml_opset=5, coefficients=[2.0])
    (y,) = run_lite(data, {"X": np.array([[3.0]], np.float32)})
    np.testing.assert_array_equal(y, [[6.0]])


# ---- large generated tree ensembles (the traversal layout), 1 and 2 threads ---------------

FAST_MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"]


def ort_threads(data, feeds, threads):
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(
        None, feeds)


def deep_trees(rng, ntrees, c, depth, modes, p_missing):
    """nodes_* attributes of trees up to `depth` deep (a few branches end early), each
    branch mode drawn from `modes`, and their (tree, node) leaves."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                         "nodes_values", "nodes_truenodeids", "nodes_falsenodeids",
                         "nodes_missing_value_tracks_true")}
    leaves = []
    for t in range(ntrees):
        counter = [0]

        def build(d):
            i = counter[0]
            counter[0] += 1
            idx = len(a["nodes_treeids"])
            for k, v in (("nodes_treeids", t), ("nodes_nodeids", i), ("nodes_featureids", 0),
                         ("nodes_modes", "LEAF"), ("nodes_values", 0.0),
                         ("nodes_truenodeids", 0), ("nodes_falsenodeids", 0),
                         ("nodes_missing_value_tracks_true", 0)):
                a[k].append(v)
            if d == 0 or (d < depth and rng.random() < 0.1):
                leaves.append((t, i))
                return i
            a["nodes_modes"][idx] = modes[int(rng.integers(0, len(modes)))]
            a["nodes_featureids"][idx] = int(rng.integers(0, c))
            a["nodes_values"][idx] = float(np.round(rng.normal(), 1))
            a["nodes_missing_value_tracks_true"][idx] = int(rng.random() < p_missing)
            a["nodes_truenodeids"][idx] = build(d - 1)
            a["nodes_falsenodeids"][idx] = build(d - 1)
            return i

        build(depth)
    return a, leaves


def deep_input(rng, n, c, xt):
    # Values on the thresholds' 0.1 grid test the comparisons' edges; a few NaNs the
    # missing tracks.
    x = np.round(rng.normal(size=(n, c)), 1)
    if xt in (F, D):
        x[rng.random(size=x.shape) < 0.02] = np.nan
    else:
        x = x * 3
    return x.astype(NP[xt])


# (depth, trees, rows)
DEEP_SHAPES = [(1, 1, 1), (2, 500, 1), (3, 7, 7), (10, 3, 7), (6, 200, 7), (10, 12, 1000),
               (8, 60, 1000), (4, 500, 1000), (1, 40, 1000)]


def deep_case(rng, kind, depth, ntrees, rows):
    c = int(rng.integers(1, 30))
    uniform = rng.random() < 0.8
    modes = [FAST_MODES[int(rng.integers(0, 4))]] if uniform else FAST_MODES + ["BRANCH_EQ",
                                                                                   "BRANCH_NEQ"]
    a, leaves = deep_trees(rng, ntrees, c, depth, modes, float(rng.choice([0.0, 0.0, 0.5])))
    prefix = "target" if kind == "regressor" else "class"
    if kind == "regressor":
        n = int(rng.choice([1, 1, 3]))
    else:
        n = int(rng.choice([2, 2, 3]))
    one_class = kind == "classifier" and n == 2 and rng.random() < 0.5
    w = {prefix + k: [] for k in ("_treeids", "_nodeids", "_ids", "_weights")}
    for t, i in leaves:
        for _ in range(1 if one_class or n == 1 else int(rng.integers(1, 3))):
            w[prefix + "_treeids"].append(t)
            w[prefix + "_nodeids"].append(i)
            w[prefix + "_ids"].append(1 if one_class else int(rng.integers(0, n)))
            # Unrounded weights: sums on a grid would tie, and ortlite breaks a tie of two
            # classes differently from onnxruntime (a difference these tests leave aside).
            w[prefix + "_weights"].append(float(rng.normal() * 0.1))
    a.update(w)
    xt = int(rng.choice([F, F, D]))
    if kind == "regressor":
        a.update(n_targets=n, aggregate_function=str(rng.choice(["SUM", "AVERAGE", "MIN", "MAX"])),
                 post_transform=str(rng.choice(["NONE", "LOGISTIC", "SOFTMAX"])))
        if rng.random() < 0.5:
            a["base_values"] = np.round(rng.normal(size=n), 2).tolist()
        outs = [("Y", F)]
    else:
        a.update(post_transform=str(rng.choice(["NONE", "LOGISTIC", "SOFTMAX"])),
                 classlabels_int64s=[3 * i for i in range(n)])
        if n == 2:
            a["base_values"] = [0.0, 0.0] if rng.random() < 0.5 else []
        else:
            a["base_values"] = np.round(rng.normal(size=n), 2).tolist()
        if not a["base_values"]:
            del a["base_values"]
        xt = int(rng.choice([F, F, D, I64]))
        outs = [("L", I64), ("P", F)]
    if xt == D and rng.random() < 0.5:
        as_tensor(a, ["nodes_values", prefix + "_weights", "base_values"])
    op = "TreeEnsembleRegressor" if kind == "regressor" else "TreeEnsembleClassifier"
    data = ml_model(op, [("X", xt)], outs, ml_opset=3, **a)
    return data, deep_input(rng, rows, c, xt)


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
@pytest.mark.parametrize("shape", DEEP_SHAPES, ids=lambda s: "d%d-t%d-r%d" % s)
def test_large_tree_ensembles_match_onnxruntime_at_1_and_2_threads(kind, shape):
    depth, ntrees, rows = shape
    rng = np.random.default_rng(depth * 1000 + ntrees + rows + (kind == "classifier"))
    for _ in range(2):
        data, x = deep_case(rng, kind, depth, ntrees, rows)
        one = run_lite(data, {"X": x}, threads=1)
        for threads in (1, 2):
            got = run_lite(data, {"X": x}, threads=threads)
            # ortlite sums each row's trees in order whatever the thread count.
            for g, o in zip(got, one):
                np.testing.assert_array_equal(g, o)
            assert_same(got, ort_threads(data, {"X": x}, threads), 1e-4, 1e-5)


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 300, 1), (8, 40, 7), (10, 8, 1000),
                                   (5, 150, 1000)], ids=lambda s: "d%d-t%d-r%d" % s)
@pytest.mark.parametrize("xt", [F, D])
def test_large_tree_ensemble_v5_matches_onnxruntime_at_1_and_2_threads(shape, xt):
    depth, ntrees, rows = shape
    rng = np.random.default_rng(depth * 100 + ntrees + rows + xt)
    npt = NP[xt]
    c = int(rng.integers(1, 20))
    nt = int(rng.choice([1, 2]))
    mode_set = [int(rng.integers(0, 4))] if rng.random() < 0.8 else list(range(6))
    f = {k: [] for k in ("feat", "split", "mode", "tid", "fid", "tl", "fl", "miss")}
    lt, lw, roots = [], [], []

    def build(d):
        i = len(f["feat"])
        for k, v in (("feat", int(rng.integers(0, c))), ("split", float(np.round(rng.normal(), 1))),
                     ("mode", mode_set[int(rng.integers(0, len(mode_set)))]),
                     ("miss", int(rng.random() < 0.3)), ("tid", 0), ("fid", 0), ("tl", 0),
                     ("fl", 0)):
            f[k].append(v)
        for ik, lk in (("tid", "tl"), ("fid", "fl")):
            if d == 1 or rng.random() < 0.05:
                lt.append(int(rng.integers(0, nt)))
                lw.append(float(np.round(rng.normal() * 0.1, 3)))
                f[ik][i], f[lk][i] = len(lt) - 1, 1
            else:
                f[ik][i], f[lk][i] = build(d - 1), 0
        return i

    for _ in range(ntrees):
        r = build(depth)
        if f["tid"][r] == f["fid"][r] and f["tl"][r] == f["fl"][r]:
            continue  # onnxruntime's one-leaf tree: the specification differs
        roots.append(r)
    if not roots:
        roots.append(build(max(depth, 2)))
    a = dict(nodes_featureids=f["feat"], nodes_splits=numpy_helper.from_array(
                 np.array(f["split"], npt), "s"),
             nodes_modes=numpy_helper.from_array(np.array(f["mode"], np.uint8), "m"),
             nodes_truenodeids=f["tid"], nodes_falsenodeids=f["fid"], nodes_trueleafs=f["tl"],
             nodes_falseleafs=f["fl"], nodes_missing_value_tracks_true=f["miss"],
             leaf_targetids=lt, leaf_weights=numpy_helper.from_array(np.array(lw, npt), "w"),
             tree_roots=roots, n_targets=nt, aggregate_function=int(rng.integers(0, 4)),
             post_transform=0)
    data = v5_model(a, xt)
    x = deep_input(rng, rows, c, xt)
    one = run_lite(data, {"X": x}, threads=1)
    for threads in (1, 2):
        got = run_lite(data, {"X": x}, threads=threads)
        np.testing.assert_array_equal(got[0], one[0])
        assert_same(got, ort_threads(data, {"X": x}, threads), 1e-4, 1e-5)


# One-leaf trees and each post_transform: single-target regressors, binary, two- and
# three-class classifiers, checked against onnxruntime (NaN where it gives NaN).

POSTS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]
ONE_LEAF = dict(nodes_treeids=[0], nodes_nodeids=[0], nodes_featureids=[0], nodes_modes=["LEAF"],
                nodes_values=[0.0], nodes_truenodeids=[0], nodes_falsenodeids=[0],
                nodes_missing_value_tracks_true=[0], nodes_hitrates=[1.0])


def one_leaf_regressor(post, n_targets, leaves, base=None):
    attrs = dict(ONE_LEAF, target_treeids=[0] * len(leaves), target_nodeids=[0] * len(leaves),
                 target_ids=[t for t, _ in leaves], target_weights=[w for _, w in leaves],
                 n_targets=n_targets, post_transform=post, aggregate_function="SUM")
    if base is not None:
        attrs["base_values"] = base
    return ml_model("TreeEnsembleRegressor", [("X", F)], [("Y", F)], ml_opset=3, **attrs)


def one_leaf_classifier(post, n_classes, leaves):
    attrs = dict(ONE_LEAF, class_treeids=[0] * len(leaves), class_nodeids=[0] * len(leaves),
                 class_ids=[t for t, _ in leaves], class_weights=[w for _, w in leaves],
                 classlabels_int64s=list(range(n_classes)), post_transform=post)
    return ml_model("TreeEnsembleClassifier", [("X", F)], [("L", I64), ("P", F)], ml_opset=3,
                    **attrs)


ONE_LEAF_CASES = {
    "reg_single_negative": lambda p: one_leaf_regressor(p, 1, [(0, -0.405)]),
    "reg_single_positive": lambda p: one_leaf_regressor(p, 1, [(0, 0.3)]),
    "reg_single_base": lambda p: one_leaf_regressor(p, 1, [(0, -0.405)], base=[0.1]),
    "reg_two_targets": lambda p: one_leaf_regressor(p, 2, [(0, -0.405), (1, 0.2)]),
    "reg_two_targets_one_weight": lambda p: one_leaf_regressor(p, 2, [(0, -0.405)]),
    "clf_binary": lambda p: one_leaf_classifier(p, 2, [(1, -0.405)]),
    "clf_binary_class0": lambda p: one_leaf_classifier(p, 2, [(0, 0.3)]),
    "clf_two_classes": lambda p: one_leaf_classifier(p, 2, [(0, 0.3), (1, -0.405)]),
    "clf_three_classes": lambda p: one_leaf_classifier(p, 3, [(0, 0.3), (2, -0.405)]),
}


@pytest.mark.parametrize("case", sorted(ONE_LEAF_CASES))
@pytest.mark.parametrize("post", POSTS)
def test_one_leaf_tree_post_transforms_match_onnxruntime(case, post):
    data = ONE_LEAF_CASES[case](post)
    x = np.array([[0.5], [1.0], [-2.0]], np.float32)
    got = run_lite(data, {"X": x})
    exp = run_ort(data, {"X": x})
    if case == "clf_binary_class0" and post == "LOGISTIC":
        return  # test_binary_positive_logistic_scores_are_transformed
    if case == "clf_binary_class0" and post == "PROBIT":
        # onnxruntime leaves the second score unwritten (NaN or whatever its buffer held
        # before); ortlite writes 0 there.
        np.testing.assert_array_equal(got[0], exp[0])
        np.testing.assert_allclose(got[1][:, 0], exp[1][:, 0], rtol=1e-6)
        assert (got[1][:, 1] == 0).all()
        return
    assert len(got) == len(exp)
    for g, e in zip(got, exp):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-6, equal_nan=True)


def _binary_tree(weights, base, split):
    """A two-class TreeEnsembleClassifier whose weights all go to class 0 (the binary case)."""
    if split:
        tree = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                    nodes_modes=["BRANCH_LT", "LEAF", "LEAF"], nodes_values=[0.5, 0.0, 0.0],
                    nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0])
        leaves = [1, 2]
    else:
        tree, leaves = dict(ONE_LEAF), [0]
    tree.pop("nodes_missing_value_tracks_true", None)
    tree.pop("nodes_hitrates", None)
    w = weights[:len(leaves)]
    attrs = dict(tree, class_treeids=[0] * len(w), class_nodeids=leaves, class_ids=[0] * len(w),
                 class_weights=w, classlabels_int64s=[0, 1])
    if base is not None:
        attrs["base_values"] = base
    return lambda post: ml_model("TreeEnsembleClassifier", [("X", F)], [("L", I64), ("P", F)],
                                 ml_opset=3, post_transform=post, **attrs)


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("base", [None, [-0.405], [0.3], [0.1, 0.2]])
@pytest.mark.parametrize("weights", [[0.3, 0.7], [0.0, 0.0], [0.3, -0.3]])
def test_binary_positive_logistic_scores_are_transformed(split, base, weights):
    # microsoft/onnxruntime#27533: with weights that are all positive, onnxruntime 1.23 returns
    # 1 - s / s for LOGISTIC as for NONE; its later releases (and ortlite) return logistic(-s)
    # / logistic(s), the label still decided as a probability (s > 0.5). The raw score s comes
    # from onnxruntime 1.23 with NONE, the transform from numpy.
    make = _binary_tree(weights, base, split)
    x = np.array([[0.1], [0.9], [-2.0]], np.float32)
    got_label, got = run_lite(make("LOGISTIC"), {"X": x})
    ort_label, ort_none = run_ort(make("NONE"), {"X": x})
    np.testing.assert_array_equal(got_label, run_ort(make("LOGISTIC"), {"X": x})[0])
    sig = lambda v: 1 / (1 + np.exp(-v.astype(np.float64)))  # noqa: E731
    positive = min(weights[:2 if split else 1]) >= 0
    if base is not None and len(base) == 2:
        exp = sig(ort_none)  # two scores: each one transformed, as in 1.23
    elif positive:
        s = ort_none[:, 1]
        exp = np.stack([sig(-s), sig(s)], axis=1)
        np.testing.assert_array_equal(got_label, (s > 0.5).astype(np.int64))
    else:
        exp = run_ort(make("LOGISTIC"), {"X": x})[1]
    np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-6)


def test_single_target_logistic_is_not_applied_like_onnxruntime_1_23():
    # The ONNX specification applies the post transform; onnxruntime 1.23 applies only PROBIT
    # to a single target (microsoft/onnxruntime#26596, fix proposed in #26896). ortlite
    # follows onnxruntime, as models converted from scikit-learn / LightGBM are validated
    # against it (docs/compatibility.md); with two targets LOGISTIC is applied.
    x = np.zeros((1, 1), np.float32)
    (y1,) = run_lite(one_leaf_regressor("LOGISTIC", 1, [(0, -0.405)]), {"X": x})
    np.testing.assert_allclose(y1, [[-0.405]], rtol=1e-6)
    (y2,) = run_lite(one_leaf_regressor("LOGISTIC", 2, [(0, -0.405)]), {"X": x})
    np.testing.assert_allclose(y2, [[1 / (1 + np.exp(0.405)), 0.5]], rtol=1e-6)


def test_one_class_classifier_is_refused_at_load():
    # onnxruntime accepts a single class label and returns the raw score; ortlite refuses it.
    with pytest.raises(ortlite.InvalidGraph, match="at least 2 class labels, got 1"):
        ortlite.InferenceSession(one_leaf_classifier("LOGISTIC", 1, [(0, -0.405)]))


# Boosted ensembles as LightGBM / XGBoost write them: each tree adds one weight per leaf to a
# class fixed for the tree (or a single target), trees of very different depths, one-leaf
# trees among them, NaN features with missing_value_tracks_true. ortlite stores such leaves
# inside their parent nodes; these compare that layout with onnxruntime, at 1 and 2 threads
# and at row counts that take the few-rows (trees in parallel) and the row-block paths.
def boosted_case(rng, kind, ntrees, c, ncls, mode, post, base):
    a, leaves = deep_trees(rng, ntrees, c, int(rng.integers(1, 11)), [mode], 0.5)
    for t in range(ntrees):  # a few trees are a single leaf
        if rng.random() < 0.05:
            sel = [i for i, tid in enumerate(a["nodes_treeids"]) if tid == t]
            for k in a:
                a[k] = [v for i, v in enumerate(a[k]) if i not in set(sel[1:])]
            i0 = sel[0]
            a["nodes_modes"][i0], a["nodes_nodeids"][i0] = "LEAF", 0
            a["nodes_truenodeids"][i0] = a["nodes_falsenodeids"][i0] = 0
            leaves = [lf for lf in leaves if lf[0] != t] + [(t, 0)]
    prefix = "target" if kind == "regressor" else "class"
    w = {prefix + k: [] for k in ("_treeids", "_nodeids", "_ids", "_weights")}
    for t, i in sorted(leaves):
        w[prefix + "_treeids"].append(t)
        w[prefix + "_nodeids"].append(i)
        w[prefix + "_ids"].append(t % ncls)
        w[prefix + "_weights"].append(float(rng.normal() * 0.3))
    a.update(w, post_transform=post)
    if base:
        a["base_values"] = np.round(rng.normal(size=ncls), 2).tolist()
    if kind == "regressor":
        a.update(n_targets=ncls, aggregate_function=str(rng.choice(["SUM", "AVERAGE", "MIN",
                                                                      "MAX"])))
        return ml_model("TreeEnsembleRegressor", [("X", F)], [("Y", F)], ml_opset=3, **a)
    a["classlabels_int64s"] = [7 * i for i in range(ncls)]
    return ml_model("TreeEnsembleClassifier", [("X", F)], [("L", I64), ("P", F)], ml_opset=3,
                    **a)


@pytest.mark.parametrize("kind,ncls,post,base", [
    ("classifier", 5, "SOFTMAX", False), ("classifier", 3, "NONE", True),
    ("classifier", 4, "LOGISTIC", False), ("regressor", 1, "NONE", True),
    ("regressor", 3, "NONE", False)])
@pytest.mark.parametrize("rows", [1, 3, 40, 300])
def test_boosted_trees_one_weight_per_leaf_match_onnxruntime(kind, ncls, post, base, rows):
    rng = np.random.default_rng(ncls * 1000 + rows + len(post) + base)
    c = 12
    mode = FAST_MODES[rows % 4]
    data = boosted_case(rng, kind, 60, c, ncls, mode, post, base)
    x = deep_input(rng, rows, c, F)
    one = run_lite(data, {"X": x}, threads=1)
    for threads in (1, 2):
        got = run_lite(data, {"X": x}, threads=threads)
        for g, o in zip(got, one):
            np.testing.assert_array_equal(g, o)
        assert_same(got, ort_threads(data, {"X": x}, threads), 1e-4, 1e-5)


@pytest.mark.parametrize("rows", [1, 40, 300])
def test_tree_ensemble_v5_one_target_per_tree_matches_onnxruntime(rows):
    rng = np.random.default_rng(rows)
    c, nt = 9, 3
    f = {k: [] for k in ("feat", "split", "mode", "tid", "fid", "tl", "fl", "miss")}
    lt, lw, roots = [], [], []

    def build(d, target):
        i = len(f["feat"])
        for k, v in (("feat", int(rng.integers(0, c))), ("split", float(np.round(rng.normal(), 1))),
                     ("mode", 0), ("miss", int(rng.random() < 0.5)), ("tid", 0), ("fid", 0),
                     ("tl", 0), ("fl", 0)):
            f[k].append(v)
        for ik, lk in (("tid", "tl"), ("fid", "fl")):
            if d == 1 or rng.random() < 0.2:
                lt.append(target)
                lw.append(float(rng.normal()))
                f[ik][i], f[lk][i] = len(lt) - 1, 1
            else:
                f[ik][i], f[lk][i] = build(d - 1, target), 0
        return i

    for t in range(80):
        r = build(int(rng.integers(1, 9)), t % nt)
        if f["tid"][r] == f["fid"][r]:
            continue  # onnxruntime 1.23 takes such a root for a one-leaf tree, flags aside
        roots.append(r)
    a = dict(nodes_featureids=f["feat"],
             nodes_splits=numpy_helper.from_array(np.array(f["split"], np.float32), "s"),
             nodes_modes=numpy_helper.from_array(np.array(f["mode"], np.uint8), "m"),
             nodes_truenodeids=f["tid"], nodes_falsenodeids=f["fid"], nodes_trueleafs=f["tl"],
             nodes_falseleafs=f["fl"], nodes_missing_value_tracks_true=f["miss"],
             leaf_targetids=lt, leaf_weights=numpy_helper.from_array(np.array(lw, np.float32),
                                                                     "w"),
             tree_roots=roots, n_targets=nt, aggregate_function=1, post_transform=0)
    data = v5_model(a, F)
    x = deep_input(rng, rows, c, F)
    one = run_lite(data, {"X": x}, threads=1)
    for threads in (1, 2):
        got = run_lite(data, {"X": x}, threads=threads)
        np.testing.assert_array_equal(got[0], one[0])
        assert_same(got, ort_threads(data, {"X": x}, threads), 1e-4, 1e-5)
