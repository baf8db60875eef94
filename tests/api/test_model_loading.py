"""Model loading: paths and bytes, initializers of every dtype (raw_data and typed fields,
packed and unpacked), external data, model-local functions, per-model opsets. Every
model is also run by onnxruntime and the outputs compared."""

import os
import pathlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import pb_encode as pb
from helpers import add_model, assert_same, check_against_ort, make_model, run_ort

F32 = np.float32
# add_model(**X_PLUS_W): y = x + w, where w is an initializer (added by the test).
X_PLUS_W = dict(inputs=("x", "w"), output="y", graph_inputs=["x"], serialize=False)

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


def sample(dtype, shape=(2, 3), seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return (rng.standard_normal(shape) * 10).astype(dtype)


def identity_of_initializer(tensor, out_name="y"):
    """A model whose output is Identity(initializer)."""
    node = helper.make_node("Identity", [tensor.name], [out_name])
    graph = helper.make_graph([node], "g", [],
                              [helper.make_tensor_value_info(out_name, tensor.data_type, None)],
                              initializer=[tensor])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


# ---------------------------------------------------------------------------------------
# Where the model comes from


def test_load_from_str_path_pathlib_and_bytes(tmp_path):
    w = sample(np.float32, seed=1)
    model = add_model(**X_PLUS_W)
    model.graph.initializer.append(numpy_helper.from_array(w, "w"))
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    x = sample(np.float32, seed=2)
    expected = run_ort(model, {"x": x})
    for source in (str(path), path, model.SerializeToString()):
        sess = ortlite.InferenceSession(source)
        assert_same(sess.run(None, {"x": x}), expected)
    np.testing.assert_allclose(expected[0], x + w, rtol=1e-6)


def test_outputs_do_not_alias_model_bytes(tmp_path):
    # An initializer passed straight through comes from the (read-only) mapping: the
    # returned array must stay valid after the session and the file are gone.
    w = sample(np.float32, (64,), seed=3)
    model = identity_of_initializer(numpy_helper.from_array(w, "w"))
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    sess = ortlite.InferenceSession(str(path))
    (y,) = sess.run(None, {})
    del sess
    os.remove(path)
    np.testing.assert_array_equal(y, w)
    y[0] = 1.0  # writable and ours


def test_metadata_and_unknown_fields_are_ignored():
    model = add_model(**X_PLUS_W)
    model.graph.initializer.append(numpy_helper.from_array(sample(np.float32), "w"))
    onnx.helper.set_model_props(model, {"author": "me", "k": "v"})
    model.graph.doc_string = "doc"
    data = model.SerializeToString()
    # Unknown fields of every wire type (field numbers onnx.proto does not use), a group.
    data += (pb.vint(1000, 7) + pb.f32(1001, 1.5) + pb.f64(1002, 2.5) + pb.ln(1003, b"xyz")
             + pb.key(1004, 3) + pb.vint(1, 5) + pb.ln(2, b"ab") + pb.key(1004, 4))
    x = sample(np.float32, seed=4)
    check_against_ort(data, {"x": x})


# ---------------------------------------------------------------------------------------
# Initializers of every dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_initializer_raw_data(dtype):
    a = sample(dtype, (3, 4))
    t = numpy_helper.from_array(a, "w")
    assert t.HasField("raw_data")
    (y,) = check_against_ort(identity_of_initializer(t), {})
    np.testing.assert_array_equal(y, a)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_initializer_typed_fields(dtype):
    a = sample(dtype, (3, 4), seed=5)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    vals = a.flatten() if dtype == np.float16 else a.flatten().tolist()
    t = helper.make_tensor("w", elem, a.shape, vals, raw=False)
    assert not t.HasField("raw_data")
    (y,) = check_against_ort(identity_of_initializer(t), {})
    np.testing.assert_array_equal(y, a)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_initializer_scalar_and_empty(dtype):
    a = sample(dtype, ())
    check_against_ort(identity_of_initializer(numpy_helper.from_array(a, "w")), {})
    e = np.zeros((0, 3), dtype)
    (y,) = check_against_ort(identity_of_initializer(numpy_helper.from_array(e, "w")), {})
    assert y.shape == (0, 3)


def test_string_initializer():
    vals = np.array([["a", "", "héllo"], ["x" * 100, "\u4e2d", "z"]], dtype=object)
    t = helper.make_tensor("w", TensorProto.STRING, vals.shape,
                           [s.encode() for s in vals.flatten()])
    (y,) = check_against_ort(identity_of_initializer(t), {})
    assert y.dtype == object
    assert y.tolist() == vals.tolist()


def test_unaligned_raw_data_in_place_or_copied():
    # Initializers of several element sizes one after another: their raw_data lands at
    # arbitrary offsets in the file, so some are unaligned and must be copied.
    inits, nodes, outs = [], [], []
    for i, dtype in enumerate([np.int8, np.float64, np.int16, np.float32, np.int64, np.uint8,
                               np.float16, np.uint32] * 2):
        a = sample(dtype, (i + 1,), seed=i)
        inits.append(numpy_helper.from_array(a, f"w{i}"))
        nodes.append(helper.make_node("Identity", [f"w{i}"], [f"y{i}"]))
        outs.append(helper.make_tensor_value_info(f"y{i}", inits[-1].data_type, None))
    graph = helper.make_graph(nodes, "g", [], outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    check_against_ort(model, {})


def _rss_file_kib():
    for line in open("/proc/self/status"):
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    pytest.skip("no RssFile in /proc/self/status")


@pytest.mark.parametrize("pad", [0, 1, 2, 3])
def test_model_file_pages_are_dropped_after_load_and_results_kept(tmp_path, pad):
    """A model loaded from a file: after the session is made, the mapped file no longer sits
    in memory (its initializers are packed, copied, or read back when a run touches them),
    and the results are those of the data in the file. `pad` shifts the raw data in the file
    so that the weights are in place (aligned) or copied (unaligned)."""
    rng = np.random.default_rng(pad)
    k = 512
    w = rng.standard_normal((k, k)).astype(F32)       # MatMul B: packed at load
    w2 = rng.standard_normal((k, k)).astype(F32)      # Add operand: read by every run
    b = rng.standard_normal((k,)).astype(F32)
    inits = [numpy_helper.from_array(np.arange(pad, dtype=np.uint8), "pad"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["y"]),
             helper.make_node("Add", ["x", "w2"], ["z"]),
             helper.make_node("Identity", ["pad"], ["p"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [k, k])],
        [helper.make_tensor_value_info(n, t, None)
         for n, t in (("y", TensorProto.FLOAT), ("z", TensorProto.FLOAT), ("p", TensorProto.UINT8))],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "big.onnx"
    onnx.save(model, str(path))
    size_kib = path.stat().st_size // 1024
    x = rng.standard_normal((k, k)).astype(F32)
    # The same model from bytes first: the library code it runs is then mapped already.
    ortlite.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    before = _rss_file_kib()
    sess = ortlite.InferenceSession(str(path))
    grown = _rss_file_kib() - before
    # 2 MiB of weights in the file; what stays mapped is far less than one of them.
    assert grown < size_kib // 4, f"RssFile grew {grown} KiB for a {size_kib} KiB model"
    for _ in range(2):  # the second run reads the pages the first one mapped back
        y, z, p = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, x @ w + b, rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(z, x + w2)
        np.testing.assert_array_equal(p, np.arange(pad, dtype=np.uint8))


# ---------------------------------------------------------------------------------------
# Packed and unpacked repeated fields


def _tensor_bytes(name, dims, data_type, data_fields, packed_dims=False):
    dims_b = pb.packed_varints(pb.T_DIMS, dims) if packed_dims else pb.unpacked_varints(
        pb.T_DIMS, dims)
    return dims_b + pb.vint(pb.T_DATA_TYPE, data_type) + pb.ln(pb.T_NAME, name) + data_fields


UNPACKED_CASES = {
    # name: (numpy dtype, onnx enum, encoder of the flat values)
    "float": (np.float32, TensorProto.FLOAT, lambda v: pb.unpacked_f32(pb.T_FLOAT, v)),
    "double": (np.float64, TensorProto.DOUBLE, lambda v: pb.unpacked_f64(pb.T_DOUBLE, v)),
    "int64": (np.int64, TensorProto.INT64, lambda v: pb.unpacked_varints(pb.T_INT64, v)),
    "int32": (np.int32, TensorProto.INT32, lambda v: pb.unpacked_varints(pb.T_INT32, v)),
    "int8": (np.int8, TensorProto.INT8, lambda v: pb.unpacked_varints(pb.T_INT32, v)),
    "uint16": (np.uint16, TensorProto.UINT16, lambda v: pb.unpacked_varints(pb.T_INT32, v)),
    "bool": (np.bool_, TensorProto.BOOL, lambda v: pb.unpacked_varints(pb.T_INT32, v)),
    "float16": (np.float16, TensorProto.FLOAT16,
                lambda v: pb.unpacked_varints(pb.T_INT32, v)),
    "uint32": (np.uint32, TensorProto.UINT32, lambda v: pb.unpacked_varints(pb.T_UINT64, v)),
    "uint64": (np.uint64, TensorProto.UINT64, lambda v: pb.unpacked_varints(pb.T_UINT64, v)),
}


def _flat_values(a):
    if a.dtype == np.float16:
        return a.view(np.uint16).flatten().tolist()
    return a.flatten().tolist()


@pytest.mark.parametrize("case", list(UNPACKED_CASES))
def test_unpacked_vs_packed_typed_fields(case):
    dtype, elem, encode = UNPACKED_CASES[case]
    a = sample(dtype, (2, 3), seed=7)
    values = [int(v) if not isinstance(v, float) else v for v in _flat_values(a)]
    # The model without its initializer, then the initializer appended through a second
    # `graph` field (protobuf merges it into the first).
    base = identity_of_initializer(numpy_helper.from_array(a, "w"))
    del base.graph.initializer[:]
    base_bytes = base.SerializeToString()
    unpacked = pb.append_to_graph(
        base_bytes, pb.ln(pb.G_INITIALIZER, _tensor_bytes("w", a.shape, elem, encode(values))))
    packed_t = helper.make_tensor("w", elem, a.shape,
                                  a.flatten() if dtype == np.float16 else a.flatten().tolist())
    packed = pb.append_to_graph(base_bytes, pb.ln(pb.G_INITIALIZER, packed_t.SerializeToString()))
    (y_unpacked,) = check_against_ort(unpacked, {})
    (y_packed,) = check_against_ort(packed, {})
    np.testing.assert_array_equal(y_unpacked, a)
    np.testing.assert_array_equal(y_packed, a)


def test_mixed_packed_and_unpacked_runs():
    # One repeated field written as a packed run, then single elements, then a packed run.
    a = np.arange(10, dtype=np.int64) * -3
    vals = a.tolist()
    data = (pb.packed_varints(pb.T_INT64, vals[:4]) + pb.unpacked_varints(pb.T_INT64, vals[4:6])
            + pb.packed_varints(pb.T_INT64, vals[6:]))
    base = identity_of_initializer(numpy_helper.from_array(a, "w"))
    del base.graph.initializer[:]
    model = pb.append_to_graph(
        base.SerializeToString(),
        pb.ln(pb.G_INITIALIZER, _tensor_bytes("w", [10], TensorProto.INT64, data, True)))
    (y,) = check_against_ort(model, {})
    np.testing.assert_array_equal(y, a)


def test_unpacked_attribute_ints_and_floats():
    # Transpose with perm written unpacked; LeakyRelu alpha as a fixed32 field.
    x = sample(np.float32, (2, 3, 4), seed=8)
    base = make_model([], [("x", F32, [2, 3, 4])], [("y", F32, None)])
    perm = pb.ln(pb.A_NAME, "perm") + pb.vint(pb.A_TYPE, 7) + pb.unpacked_varints(pb.A_INTS,
                                                                                  [2, 0, 1])
    node = (pb.ln(pb.N_INPUT, "x") + pb.ln(pb.N_OUTPUT, "t") + pb.ln(pb.N_OP_TYPE, "Transpose")
            + pb.ln(pb.N_ATTRIBUTE, perm))
    alpha = pb.ln(pb.A_NAME, "alpha") + pb.vint(pb.A_TYPE, 1) + pb.f32(pb.A_F, 0.25)
    node2 = (pb.ln(pb.N_INPUT, "t") + pb.ln(pb.N_OUTPUT, "y") + pb.ln(pb.N_OP_TYPE, "LeakyRelu")
             + pb.ln(pb.N_ATTRIBUTE, alpha))
    model = pb.append_to_graph(base.SerializeToString(), pb.ln(pb.G_NODE, node),
                               pb.ln(pb.G_NODE, node2))
    (y,) = check_against_ort(model, {"x": x})
    t = np.transpose(x, (2, 0, 1))
    np.testing.assert_allclose(y, np.where(t > 0, t, 0.25 * t), rtol=1e-6)


# ---------------------------------------------------------------------------------------
# External data


def _save_external(model, directory, location="weights.bin"):
    path = os.path.join(directory, "model.onnx")
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=0)
    return path


def test_external_data_matches_onnxruntime(tmp_path):
    w = sample(np.float32, (2, 3), seed=9)
    model = add_model(**X_PLUS_W)
    model.graph.initializer.append(numpy_helper.from_array(w, "w"))
    path = _save_external(model, str(tmp_path))
    loaded = onnx.load(path, load_external_data=False)
    assert loaded.graph.initializer[0].data_location == TensorProto.EXTERNAL
    x = sample(np.float32, seed=10)
    import onnxruntime

    expected = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    for source in (path, pathlib.Path(path)):
        assert_same(ortlite.InferenceSession(source).run(None, {"x": x}), expected)


def test_external_data_many_tensors_one_file_and_subdir(tmp_path):
    inits, nodes, outs = [], [], []
    for i, dtype in enumerate([np.float32, np.int64, np.int8, np.float64, np.float16, np.uint16]):
        a = sample(dtype, (i + 2, 3), seed=i)
        inits.append(numpy_helper.from_array(a, f"w{i}"))
        nodes.append(helper.make_node("Identity", [f"w{i}"], [f"y{i}"]))
        outs.append(helper.make_tensor_value_info(f"y{i}", inits[-1].data_type, None))
    graph = helper.make_graph(nodes, "g", [], outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    os.makedirs(tmp_path / "data")
    path = _save_external(model, str(tmp_path), location="data/all.bin")
    import onnxruntime

    expected = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {})
    actual = ortlite.InferenceSession(path).run(None, {})
    assert_same(actual, expected)
    for a, t in zip(actual, inits):
        np.testing.assert_array_equal(a, numpy_helper.to_array(t))


def test_external_data_from_bytes_is_refused(tmp_path):
    model = add_model(**X_PLUS_W)
    model.graph.initializer.append(numpy_helper.from_array(sample(np.float32), "w"))
    path = _save_external(model, str(tmp_path))
    with open(path, "rb") as f:
        data = f.read()
    with pytest.raises(ortlite.OrtliteError, match="external"):
        ortlite.InferenceSession(data)


def _external_tensor_model(directory, location, offset=None, length=None, name="model.onnx"):
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([2, 3])
    t.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    if offset is not None:
        entries.append(("offset", str(offset)))
    if length is not None:
        entries.append(("length", str(length)))
    for k, v in entries:
        e = t.external_data.add()
        e.key, e.value = k, v
    model = add_model(**X_PLUS_W)
    model.graph.initializer.append(t)
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def test_external_data_offset_and_length(tmp_path):
    w = sample(np.float32, (2, 3), seed=11)
    _write(tmp_path / "w.bin", b"\x01" * 10 + w.tobytes() + b"\x02" * 7)
    x = sample(np.float32, seed=12)
    # offset 10 is not 4-aligned: the data is copied, still correct
    for off in (10,):
        path = _external_tensor_model(str(tmp_path), "w.bin", offset=off, length=24)
        (y,) = ortlite.InferenceSession(path).run(None, {"x": x})
        np.testing.assert_allclose(y, x + w, rtol=1e-6)
    _write(tmp_path / "a.bin", b"\x00" * 16 + w.tobytes())
    path = _external_tensor_model(str(tmp_path), "a.bin", offset=16)  # length: to the end
    (y,) = ortlite.InferenceSession(path).run(None, {"x": x})
    np.testing.assert_allclose(y, x + w, rtol=1e-6)


def test_external_data_symlink_inside_dir_is_allowed(tmp_path):
    w = sample(np.float32, (2, 3), seed=13)
    _write(tmp_path / "real.bin", w.tobytes())
    os.symlink("real.bin", tmp_path / "link.bin")
    path = _external_tensor_model(str(tmp_path), "link.bin")
    x = sample(np.float32, seed=14)
    (y,) = ortlite.InferenceSession(path).run(None, {"x": x})
    np.testing.assert_allclose(y, x + w, rtol=1e-6)


def test_external_data_escapes_are_refused(tmp_path):
    w = sample(np.float32, (2, 3))
    model_dir = tmp_path / "model"
    os.makedirs(model_dir / "sub")
    _write(tmp_path / "secret.bin", w.tobytes())
    _write(model_dir / "w.bin", w.tobytes())
    os.symlink(str(tmp_path / "secret.bin"), model_dir / "escape.bin")
    os.symlink(str(tmp_path), model_dir / "sub" / "up")
    cases = {
        "../secret.bin": "'\\.\\.'",
        "sub/../w.bin": "'\\.\\.'",
        str(tmp_path / "secret.bin"): "absolute",
        "escape.bin": "outside the model directory",
        "sub/up/secret.bin": "outside the model directory",
    }
    for location, message in cases.items():
        path = _external_tensor_model(str(model_dir), location)
        with pytest.raises(ortlite.OrtliteError, match=message):
            ortlite.InferenceSession(path)


def test_external_data_bad_offset_length_are_refused(tmp_path):
    w = sample(np.float32, (2, 3))
    _write(tmp_path / "w.bin", w.tobytes())  # 24 bytes
    cases = [
        (dict(offset=100), "past the end"),
        (dict(offset=8, length=24), "past the end"),
        (dict(offset=0, length=20), "length"),
        (dict(offset=4), "holds 20 bytes"),
        (dict(offset="-4", length=24), "not a non-negative integer"),
        (dict(offset="99999999999999999999999", length=24), "integer|overflows"),
    ]
    for kw, message in cases:
        path = _external_tensor_model(str(tmp_path), "w.bin", **kw)
        with pytest.raises(ortlite.OrtliteError, match=message):
            ortlite.InferenceSession(path)
    path = _external_tensor_model(str(tmp_path), "missing.bin")
    with pytest.raises(ortlite.NoSuchFile, match="missing.bin"):
        ortlite.InferenceSession(path)


# ---------------------------------------------------------------------------------------
# Model-local functions


def _attr_ref(name, ref, attr_type):
    a = onnx.AttributeProto()
    a.name = name
    a.ref_attr_name = ref
    a.type = attr_type
    return a


def _fn_model(nodes, functions, inputs=(("X", F32, [2, 3, 4]),), outputs=(("Y", F32, None),),
              opset=17):
    return make_model(nodes, list(inputs), list(outputs), opset=opset, functions=functions,
                      extra_opsets=[("local", 1)])


def test_function_with_attribute_refs_and_defaults():
    # LeakyRelu(alpha=ref 'slope') then Mul by a Constant(value_float=ref 'scale').
    lr = helper.make_node("LeakyRelu", ["a"], ["t"])
    lr.attribute.append(_attr_ref("alpha", "slope", onnx.AttributeProto.FLOAT))
    const = helper.make_node("Constant", [], ["c"])
    const.attribute.append(_attr_ref("value_float", "scale", onnx.AttributeProto.FLOAT))
    mul = helper.make_node("Mul", ["t", "c"], ["b"])
    fn = helper.make_function("local", "ScaledLeaky", ["a"], ["b"], [lr, const, mul],
                              [helper.make_opsetid("", 17)], attributes=["slope"])
    fn.attribute_proto.append(helper.make_attribute("scale", 3.0))
    nodes = [
        helper.make_node("ScaledLeaky", ["X"], ["U"], domain="local", name="f1", slope=0.1),
        helper.make_node("ScaledLeaky", ["U"], ["Y"], domain="local", slope=0.5, scale=-2.0),
    ]
    x = sample(np.float32, (2, 3, 4), seed=15)
    (y,) = check_against_ort(_fn_model(nodes, [fn]), {"X": x})
    u = np.where(x > 0, x, 0.1 * x) * 3.0
    np.testing.assert_allclose(y, np.where(u > 0, u, 0.5 * u) * -2.0, rtol=1e-5)


def test_function_missing_attribute_is_dropped():
    # alpha refers to an attribute the call does not give and that has no default: the
    # attribute is dropped, LeakyRelu's own default (0.01) applies.
    lr = helper.make_node("LeakyRelu", ["a"], ["b"])
    lr.attribute.append(_attr_ref("alpha", "slope", onnx.AttributeProto.FLOAT))
    fn = helper.make_function("local", "Leaky", ["a"], ["b"], [lr],
                              [helper.make_opsetid("", 17)], attributes=["slope"])
    nodes = [helper.make_node("Leaky", ["X"], ["Y"], domain="local")]
    x = sample(np.float32, (2, 3, 4), seed=16)
    (y,) = check_against_ort(_fn_model(nodes, [fn]), {"X": x})
    np.testing.assert_allclose(y, np.where(x > 0, x, 0.01 * x), rtol=1e-5)


def test_nested_functions_and_name_collisions():
    # Inner's internal value is called 't', and so is a value of the main graph and of
    # Outer: the inlined names must not collide.
    inner = helper.make_function(
        "local", "Inner", ["a"], ["b"],
        [helper.make_node("Neg", ["a"], ["t"]), helper.make_node("Relu", ["t"], ["b"])],
        [helper.make_opsetid("", 17)])
    outer = helper.make_function(
        "local", "Outer", ["a", "w"], ["b", "extra"],
        [helper.make_node("Inner", ["a"], ["t"], domain="local"),
         helper.make_node("Add", ["t", "w"], ["b"]),
         helper.make_node("Identity", ["t"], ["extra"])],
        [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    nodes = [
        helper.make_node("Abs", ["X"], ["t"]),
        helper.make_node("Outer", ["t", "W"], ["u", "E"], domain="local", name="call"),
        helper.make_node("Outer", ["u", "t"], ["Y", "Z"], domain="local"),
    ]
    # (Every call binds every function output: onnxruntime 1.23 aborts on fewer.)
    model = _fn_model(nodes, [inner, outer],
                      inputs=(("X", F32, [2, 3]), ("W", F32, [2, 3])),
                      outputs=(("Y", F32, None), ("Z", F32, None), ("E", F32, None)))
    x = sample(np.float32, (2, 3), seed=17)
    w = sample(np.float32, (2, 3), seed=18)
    check_against_ort(model, {"X": x, "W": w})


def test_function_with_omitted_optional_input():
    # Clip inside a function; the call omits the optional 'hi' input.
    fn = helper.make_function("local", "MyClip", ["a", "lo", "hi"], ["b"],
                              [helper.make_node("Clip", ["a", "lo", "hi"], ["b"])],
                              [helper.make_opsetid("", 17)])
    lo = numpy_helper.from_array(np.array(-0.5, np.float32), "lo")
    nodes = [helper.make_node("MyClip", ["X", "lo"], ["Y"], domain="local")]
    model = make_model(nodes, [("X", F32, [2, 3, 4])], [("Y", F32, None)], opset=17,
                       initializers=[lo], functions=[fn], extra_opsets=[("local", 1)])
    x = sample(np.float32, (2, 3, 4), seed=19)
    (y,) = check_against_ort(model, {"X": x})
    np.testing.assert_allclose(y, np.maximum(x, -0.5), rtol=1e-6)


def test_recursive_function_is_refused():
    f = helper.make_function("local", "F", ["a"], ["b"],
                             [helper.make_node("G", ["a"], ["b"], domain="local")],
                             [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    g = helper.make_function("local", "G", ["a"], ["b"],
                             [helper.make_node("F", ["a"], ["b"], domain="local")],
                             [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    model = _fn_model([helper.make_node("F", ["X"], ["Y"], domain="local")], [f, g])
    with pytest.raises(ortlite.InvalidGraph, match="recursive"):
        ortlite.InferenceSession(model.SerializeToString())


def test_exponential_function_expansion_is_refused():
    fns = []
    for i in range(40):
        body = ([helper.make_node(f"F{i + 1}", ["a"], ["t"], domain="local"),
                 helper.make_node(f"F{i + 1}", ["t"], ["b"], domain="local")] if i < 39
                else [helper.make_node("Relu", ["a"], ["b"])])
        fns.append(helper.make_function("local", f"F{i}", ["a"], ["b"], body,
                                        [helper.make_opsetid("", 17),
                                         helper.make_opsetid("local", 1)]))
    model = _fn_model([helper.make_node("F0", ["X"], ["Y"], domain="local")], fns)
    with pytest.raises(ortlite.InvalidGraph, match="nodes"):
        ortlite.InferenceSession(model.SerializeToString())


# ---------------------------------------------------------------------------------------
# Opsets


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_semantics_follow_the_model_opset(opset):
    # Softmax-11 flattens to 2-D at `axis`; Softmax-13 normalizes along `axis` only.
    x = sample(np.float32, (2, 3, 4), seed=20)
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    model = make_model([node], [("x", F32, [2, 3, 4])], [("y", F32, None)], opset=opset)
    (y,) = check_against_ort(model, {"x": x})
    if opset == 11:
        np.testing.assert_allclose(y.reshape(2, 12).sum(axis=1), 1.0, rtol=1e-5)
    else:
        np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-5)


def test_function_call_binding_fewer_outputs():
    # The call binds only the first of two outputs; the second becomes an internal value.
    fn = helper.make_function(
        "local", "Two", ["a"], ["b", "c"],
        [helper.make_node("Neg", ["a"], ["b"]), helper.make_node("Abs", ["a"], ["c"])],
        [helper.make_opsetid("", 17)])
    nodes = [helper.make_node("Two", ["X"], ["U"], domain="local"),
             helper.make_node("Two", ["U"], ["", "Y"], domain="local")]
    model = _fn_model(nodes, [fn])
    x = sample(np.float32, (2, 3, 4), seed=21)
    (y,) = ortlite.InferenceSession(model.SerializeToString()).run(None, {"X": x})
    np.testing.assert_array_equal(y, np.abs(-x))


def test_sparse_initializer_is_densified():
    dense = np.zeros((3, 4), np.float32)
    dense[0, 1], dense[2, 3], dense[1, 0] = 1.5, -2.0, 7.0
    flat = np.flatnonzero(dense)
    for indices in (flat.astype(np.int64),                                      # linear
                    np.stack(np.unravel_index(flat, dense.shape), 1).astype(np.int64)):  # 2-D
        values = numpy_helper.from_array(dense.flatten()[flat], "w")
        sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(indices, "i"),
                                           dense.shape)
        model = add_model((3, 4), **X_PLUS_W)
        model.graph.sparse_initializer.append(sparse)
        x = sample(np.float32, (3, 4), seed=22)
        (y,) = check_against_ort(model, {"x": x})
        np.testing.assert_allclose(y, x + dense, rtol=1e-6)


def test_sparse_initializer_index_out_of_range():
    values = numpy_helper.from_array(np.array([1.0], np.float32), "w")
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([12], np.int64),
                                                                       "i"), [3, 4])
    model = add_model((3, 4), **X_PLUS_W)
    model.graph.sparse_initializer.append(sparse)
    with pytest.raises(ortlite.InvalidGraph, match="'w'.*out of range"):
        ortlite.InferenceSession(model.SerializeToString())
