"""Shared test helpers: build models with onnx.helper, run them on ortlite and on
onnxruntime (the reference oracle), compare."""

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper

import ortlite

# onnxruntime's own limit, not ortlite's (that is ortlite.NEWEST_OPSET): the newest
# default-domain opset the pinned onnxruntime runs.
ORT_MAX_OPSET = 23

NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(object): TensorProto.STRING,
}


def onnx_type(dtype):
    return NP_TO_ONNX[np.dtype(dtype)]


def make_model(nodes, inputs, outputs, initializers=(), opset=17, ir_version=None,
               functions=(), extra_opsets=()):
    """inputs/outputs: lists of (name, np dtype or onnx enum, shape or None)."""

    def vi(spec):
        name, dt, shape = spec
        elem = dt if isinstance(dt, int) else onnx_type(dt)
        return helper.make_tensor_value_info(name, elem, shape)

    graph = helper.make_graph(list(nodes), "g", [vi(i) for i in inputs],
                              [vi(o) for o in outputs], initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    # Keep the IR version within what the pinned onnxruntime reads.
    model.ir_version = ir_version if ir_version is not None else min(model.ir_version, 10)
    return model


def single_node_model(op, feeds, outputs, opset=17, attrs=None, initializers=(),
                      input_names=None, out_dtypes=None):
    """A one-node model. feeds: dict name -> array (graph inputs, in order). outputs:
    list of output names; out_dtypes: their dtypes (default: the first feed's)."""
    names = list(feeds) if input_names is None else input_names
    node = helper.make_node(op, names, outputs, **(attrs or {}))
    first = next(iter(feeds.values())) if feeds else np.zeros(1, np.float32)
    ins = [(n, a.dtype, list(a.shape)) for n, a in feeds.items()]
    out_dtypes = out_dtypes or [first.dtype] * len(outputs)
    outs = [(o, d, None) for o, d in zip(outputs, out_dtypes)]
    return make_model([node], ins, outs, initializers=initializers, opset=opset)


def run_ort(model, feeds, output_names=None):
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxruntime.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return sess.run(output_names, feeds)


def run_ortlite(model, feeds, output_names=None):
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    sess = ortlite.InferenceSession(data)
    return sess.run(output_names, feeds)


def assert_same(actual, expected, rtol=1e-5, atol=1e-6):
    assert len(actual) == len(expected), (len(actual), len(expected))
    for i, (a, e) in enumerate(zip(actual, expected)):
        a = np.asarray(a)
        e = np.asarray(e)
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} != {e.dtype}"
        assert a.shape == e.shape, f"output {i}: shape {a.shape} != {e.shape}"
        if e.dtype == object or e.dtype.kind in "biuU?":
            np.testing.assert_array_equal(a, e, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"output {i}")


def check_against_ort(model, feeds, rtol=1e-5, atol=1e-6, output_names=None):
    """Runs both runtimes and asserts equal outputs; returns ortlite's."""
    expected = run_ort(model, feeds, output_names)
    actual = run_ortlite(model, feeds, output_names)
    assert_same(actual, expected, rtol=rtol, atol=atol)
    return actual
