"""Models and task functions shared by the tests of tests/distributed (importable by
worker processes: spawn, forkserver and dask workers inherit the parent's sys.path)."""

import os

import numpy as np

import ortlite


def mlp_model(width=256, seed=0):
    """x[batch, 64] -> MatMul/Add/Relu x2 -> MatMul -> y[batch, 10], seeded weights."""
    # Imported here: worker processes that only run tasks need not import onnx.
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    dims = [64, width, width, 10]
    nodes, inits, h = [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((dims[i], dims[i + 1])) / np.sqrt(dims[i])).astype(np.float32)
        b = (rng.standard_normal(dims[i + 1]) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        out = "y" if i == 2 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [h, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [out if i == 2 else f"a{i}"]))
        if i < 2:
            nodes.append(helper.make_node("Relu", [f"a{i}"], [out]))
        h = out
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    m.doc_string = "mlp for the distributed tests"
    m.model_version = 3
    helper.set_model_props(m, {"owner": "tests"})
    return m


def mlp_bytes(width=256, seed=0):
    return mlp_model(width, seed).SerializeToString()


def session(model=None, threads=1, **config):
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    for k, v in config.items():
        so.add_session_config_entry(k, v)
    return ortlite.InferenceSession(model if model is not None else mlp_bytes(), so)


def inputs(n_blocks=4, rows=32, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((rows, 64)).astype(np.float32) for _ in range(n_blocks)]


# --- task functions (module level: pickled by reference) -------------------------------------

def run_block(sess, x):
    return sess.run(None, {"x": np.ascontiguousarray(x, dtype=np.float32)})[0]


def run_block_with_info(sess, x):
    """(outputs, pid, sessions this process created by unpickling)."""
    return run_block(sess, x), os.getpid(), ortlite._pickle.cache_info()["loads"]


_GLOBAL_SESSION = None


def set_global_session(sess):
    global _GLOBAL_SESSION
    _GLOBAL_SESSION = sess


def run_global(x):
    """Runs the session a fork child inherited from its parent (no pickling)."""
    return run_block(_GLOBAL_SESSION, x), os.getpid(), ortlite._pickle.cache_info()["loads"]


def block_fn(x, sess):
    """dask.array.map_blocks: a [rows, 64] block -> [rows, 10]."""
    return run_block(sess, x)


def partition_fn(df, sess):
    """dask.dataframe.map_partitions: 64 float columns -> y0..y9."""
    import pandas as pd
    out = run_block(sess, df.to_numpy(dtype=np.float32))
    return pd.DataFrame(out, index=df.index, columns=[f"y{i}" for i in range(out.shape[1])])


def loads_here():
    return os.getpid(), ortlite._pickle.cache_info()["loads"]
