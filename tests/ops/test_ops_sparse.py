"""Sparse tensors through a run: the com.microsoft SparseToDenseMatMul with a sparse feed
(run_with_ort_values, as onnxruntime's onnxruntime_test_python_sparse_matmul.py), against
onnxruntime."""

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ortlite

CPU = ortlite.OrtDevice.make("cpu", 0)
ORT_CPU = onnxruntime.OrtDevice.make("cpu", 0)


def spmm_model(a_shape, b_shape, y_shape, elem=TensorProto.FLOAT, **attrs):
    node = helper.make_node("SparseToDenseMatMul", ["A", "B"], ["Y"], domain="com.microsoft",
                            **attrs)
    g = helper.make_graph(
        [node], "spmm", [helper.make_sparse_tensor_value_info("A", elem, a_shape),
                         helper.make_tensor_value_info("B", elem, b_shape)],
        [helper.make_tensor_value_info("Y", elem, y_shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString()


def run_both(model, make_sparse, b):
    outs = []
    for lib, dev in ((ortlite, CPU), (onnxruntime, ORT_CPU)):
        sess = lib.InferenceSession(model, providers=["CPUExecutionProvider"])
        a = lib.OrtValue.ort_value_from_sparse_tensor(make_sparse(lib.SparseTensor, dev))
        (y,) = sess.run_with_ort_values(["Y"], {"A": a, "B": lib.OrtValue.ortvalue_from_numpy(b)})
        outs.append(y.numpy())
    return outs


@pytest.mark.parametrize("dtype,elem", [(np.float32, TensorProto.FLOAT),
                                        (np.float64, TensorProto.DOUBLE)])
def test_coo_sparse_feed_matches_onnxruntime(dtype, elem):
    vals = np.array([1, 2, 3, 4], dtype)
    idx = np.array([[0, 1], [1, 0], [1, 2], [2, 3]], np.int64)
    b = np.arange(8, dtype=dtype).reshape(4, 2)
    dense = np.zeros((3, 4), dtype)
    dense[idx[:, 0], idx[:, 1]] = vals
    for alpha in (1.0, 2.0):
        model = spmm_model([3, 4], [4, 2], [3, 2], elem, alpha=alpha)
        ours, ref = run_both(model, lambda S, d: S.sparse_coo_from_numpy([3, 4], vals, idx, d), b)
        assert ours.dtype == ref.dtype
        np.testing.assert_allclose(ours, alpha * dense @ b, rtol=1e-6)
        if dtype == np.float32 or alpha == 1.0:  # onnxruntime 1.23 ignores alpha for double
            np.testing.assert_allclose(ours, ref, rtol=1e-6)


def test_csr_sparse_feed_matches_onnxruntime():
    rng = np.random.default_rng(0)
    dense = rng.standard_normal((9, 7)).astype(np.float32)
    dense[rng.random((9, 7)) < 0.6] = 0
    rows, cols = np.nonzero(dense)
    outer = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=9))]).astype(np.int64)
    vals, inner = dense[rows, cols], cols.astype(np.int64)
    b = rng.standard_normal((7, 5)).astype(np.float32)
    model = spmm_model([9, 7], [7, 5], [9, 5])
    ours, ref = run_both(
        model, lambda S, d: S.sparse_csr_from_numpy([9, 7], vals, inner, outer, d), b)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours, dense @ b, rtol=1e-5, atol=1e-6)


def test_transposes_and_linear_coo_indices():
    # onnxruntime 1.23's shape inference rejects transA / transB and its kernel wants 2-D COO
    # indices: checked against numpy.
    dense = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    lin = np.flatnonzero(dense).astype(np.int64)
    b = np.arange(8, dtype=np.float32).reshape(4, 2)
    model = spmm_model(None, None, None, transA=1, transB=1, alpha=0.5)
    sess = ortlite.InferenceSession(model)
    a = ortlite.OrtValue.ort_value_from_sparse_tensor(
        ortlite.SparseTensor.sparse_coo_from_numpy([2, 3], dense.ravel()[lin], lin, CPU))
    (y,) = sess.run(None, {"A": a, "B": b})
    np.testing.assert_allclose(y, 0.5 * dense.T @ b.T)


def test_sparse_feed_for_a_dense_input_and_bad_shapes_are_refused():
    from helpers import add_model
    st = ortlite.SparseTensor.sparse_coo_from_numpy([2, 3], np.array([1.0], np.float32),
                                                    np.array([4], np.int64), CPU)
    ov = ortlite.OrtValue.ort_value_from_sparse_tensor(st)
    sess = ortlite.InferenceSession(add_model())
    with pytest.raises(ortlite.NotImplemented, match="sparse tensor cannot be a feed"):
        sess.run(None, {"x": ov, "y": np.ones((2, 3), np.float32)})
    model = spmm_model(None, None, None)
    sess = ortlite.InferenceSession(model)
    a3 = ortlite.SparseTensor.sparse_coo_from_numpy([2, 2, 2], np.array([1.0], np.float32),
                                                    np.array([3], np.int64), CPU)
    with pytest.raises(ortlite.InvalidArgument, match="must be 2-D"):
        sess.run(None, {"A": ortlite.OrtValue.ort_value_from_sparse_tensor(a3),
                        "B": np.ones((2, 2), np.float32)})
