"""pickle of InferenceSession, SessionOptions, RunOptions, NodeArg, ModelMetadata and CPU
OrtValue, and the process-wide cache of unpickled sessions (ortlite/_pickle.py)."""

import copy
import gc
import os
import pickle

import numpy as np
import pytest

import ortlite
from dist_helpers import inputs, mlp_bytes, mlp_model, session

PROTOCOLS = [2, 3, 4, 5]


@pytest.fixture(autouse=True)
def fresh_cache():
    ortlite._pickle.cache_clear()
    yield
    ortlite._pickle.cache_clear()


def node_arg_tuple(a):
    return (a.name, a.type, a.shape)


def meta_tuple(m):
    return (m.producer_name, m.graph_name, m.domain, m.description, m.graph_description,
            m.version, m.custom_metadata_map)


def options_state(so):
    attrs, entries, overrides, inits = ortlite._pickle._reduce_session_options(so)[1]
    return attrs, entries, overrides, {k: v.numpy().tolist() for k, v in inits.items()}


def full_options():
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ortlite.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.execution_mode = ortlite.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    so.enable_mem_pattern = False
    so.use_deterministic_compute = True
    so.logid = "träger"
    so.profile_file_prefix = "p_"
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("custom.key", "value")
    so.add_free_dimension_override_by_name("batch", 8)
    so.add_free_dimension_override_by_denotation("DATA_BATCH", 8)
    so.add_free_dimension_override_by_name("batch", 9)  # ignored: the first one wins
    return so


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_session_options_round_trip(protocol):
    so = full_options()
    so.add_initializer("b0", ortlite.OrtValue.ortvalue_from_numpy(np.ones(256, np.float32)))
    back = pickle.loads(pickle.dumps(so, protocol=protocol))
    assert type(back) is ortlite.SessionOptions
    assert options_state(back) == options_state(so)
    assert back.graph_optimization_level == ortlite.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert back.get_session_config_entry("custom.key") == "value"
    assert options_state(copy.copy(so)) == options_state(so)
    assert options_state(copy.deepcopy(so)) == options_state(so)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_run_options_round_trip(protocol):
    ro = ortlite.RunOptions()
    ro.logid = "run-7"
    ro.log_severity_level = 1
    ro.log_verbosity_level = 2
    ro.only_execute_path_to_fetches = True
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    back = pickle.loads(pickle.dumps(ro, protocol=protocol))
    for a in ortlite._pickle._RUN_OPTIONS_ATTRS:
        assert getattr(back, a) == getattr(ro, a), a
    assert back._config_entries() == ro._config_entries() == {
        "memory.enable_memory_arena_shrinkage": "cpu:0"}
    ro.terminate = True
    assert pickle.loads(pickle.dumps(ro, protocol=protocol)).terminate is True
    assert type(back) is ortlite.RunOptions


def test_run_options_keep_their_active_adapters(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = ortlite.AdapterFormat()
    f.set_adapter_version(1)
    f.set_model_version(1)
    f.set_parameters({"w": ortlite.OrtValue.ortvalue_from_numpy(w)})
    f.export_adapter(str(tmp_path / "a.onnx_adapter"))
    ro = ortlite.RunOptions()
    ro.add_active_adapter(ortlite.LoraAdapter.create_lora_adapter(str(tmp_path / "a.onnx_adapter")))
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g",
                          [helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [numpy_helper.from_array(np.zeros((2, 3), np.float32), "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = ortlite.InferenceSession(model.SerializeToString())
    back = pickle.loads(pickle.dumps(ro))
    assert type(back) is ortlite.RunOptions
    np.testing.assert_array_equal(sess.run(None, {}, back)[0], w)
    np.testing.assert_array_equal(sess.run(None, {})[0], np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_node_arg_and_model_metadata_round_trip(protocol):
    sess = session()
    args = sess.get_inputs() + sess.get_outputs()
    for a in args:
        back = pickle.loads(pickle.dumps(a, protocol=protocol))
        assert type(back) is ortlite.NodeArg
        assert node_arg_tuple(back) == node_arg_tuple(a)
        assert str(back) == str(a)
    meta = sess.get_modelmeta()
    back = pickle.loads(pickle.dumps(meta, protocol=protocol))
    assert type(back) is ortlite.ModelMetadata
    assert meta_tuple(back) == meta_tuple(meta)
    assert back.version == 3 and back.custom_metadata_map == {"owner": "tests"}


def test_node_arg_nested_types_round_trip():
    from onnx import TensorProto, helper
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.INT64, ["n", 3])
    opt = helper.make_value_info("o", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [None, "k", 2])))
    node = helper.make_node("SequenceLength", ["s"], ["len"])
    node2 = helper.make_node("OptionalHasElement", ["o"], ["has"])
    graph = helper.make_graph(
        [node, node2], "g", [seq, opt],
        [helper.make_tensor_value_info("len", TensorProto.INT64, []),
         helper.make_tensor_value_info("has", TensorProto.BOOL, [])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    sess = ortlite.InferenceSession(m.SerializeToString())
    for a in sess.get_inputs() + sess.get_outputs():
        back = pickle.loads(pickle.dumps(a))
        assert node_arg_tuple(back) == node_arg_tuple(a), a


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16, np.uint8])
def test_cpu_ortvalue_round_trip(protocol, dtype):
    arr = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    v = ortlite.OrtValue.ortvalue_from_numpy(arr)
    back = pickle.loads(pickle.dumps(v, protocol=protocol))
    assert type(back) is ortlite.OrtValue
    assert back.shape() == v.shape() and back.data_type() == v.data_type()
    assert back.device_name() == v.device_name() == "cpu"
    np.testing.assert_array_equal(back.numpy(), arr)


def test_string_ortvalue_round_trip():
    arr = np.array(["a", "bé", ""], dtype=object)
    back = pickle.loads(pickle.dumps(ortlite.OrtValue.ortvalue_from_numpy(arr)))
    assert back.numpy().tolist() == ["a", "bé", ""]


def test_device_ortvalue_raises_a_typed_error():
    class OnDevice:
        def device_name(self):
            return "cuda"
    with pytest.raises(ortlite.InvalidArgument, match="only CPU OrtValues pickle"):
        ortlite._pickle._reduce_ortvalue(OnDevice())


def test_cuda_ortvalue_raises_a_typed_error():
    try:
        v = ortlite.OrtValue.ortvalue_from_numpy(np.ones(3, np.float32), "cuda", 0)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CUDA device here ({type(e).__name__}: {str(e)[:80]})")
    with pytest.raises(ortlite.InvalidArgument, match="cannot pickle an OrtValue on 'cuda"):
        pickle.dumps(v)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_session_round_trip_runs_the_same(protocol):
    so = full_options()
    w = np.full(10, 0.5, np.float32)
    so.add_initializer("b2", ortlite.OrtValue.ortvalue_from_numpy(w))
    sess = ortlite.InferenceSession(mlp_bytes(), so)
    blob = pickle.dumps(sess, protocol=protocol)
    x = inputs(1, rows=8)[0]  # batch fixed to 8 by the override
    expected = sess.run(None, {"x": x})[0]
    del sess
    gc.collect()
    back = pickle.loads(blob)
    np.testing.assert_array_equal(back.run(None, {"x": x})[0], expected)
    assert [node_arg_tuple(a) for a in back.get_inputs()] == [("x", "tensor(float)", [8, 64])]
    assert back.get_providers() == ["CPUExecutionProvider"]
    assert options_state(back.get_session_options()) == options_state(so)
    assert ortlite._pickle.cache_info()["loads"] == 1


def test_added_initializer_travels():
    so = ortlite.SessionOptions()
    so.add_initializer("b2", ortlite.OrtValue.ortvalue_from_numpy(np.full(10, 100.0, np.float32)))
    plain = session()
    sess = ortlite.InferenceSession(mlp_bytes(), so)
    x = inputs(1)[0]
    a = sess.run(None, {"x": x})[0]
    assert not np.allclose(a, plain.run(None, {"x": x})[0])
    blob = pickle.dumps(sess)
    del sess
    gc.collect()
    np.testing.assert_array_equal(pickle.loads(blob).run(None, {"x": x})[0], a)


def test_unpickling_many_times_loads_once():
    sess = session()
    blob = pickle.dumps(sess)
    assert pickle.loads(blob) is sess  # the pickling process gets its own session back
    del sess
    ortlite._pickle.cache_clear()  # drops the strong hold on the last sessions unpickled
    gc.collect()
    got = [pickle.loads(blob) for _ in range(10)]
    assert all(g is got[0] for g in got)
    info = ortlite._pickle.cache_info()
    assert (info["loads"], info["hits"]) == (1, 9), info
    # Other options (here: threads) make another session; the same model bytes still hash alike.
    other = pickle.loads(pickle.dumps(session(threads=2)))
    assert other is not got[0]
    # The cache is weak beyond the KEEP_RECENT last sessions: dropping them frees them.
    ortlite._pickle.cache_clear()
    del got, other
    gc.collect()
    assert ortlite._pickle.cache_info()["size"] == 0


def test_recent_sessions_survive_between_tasks():
    blob = pickle.dumps(session())
    gc.collect()
    for _ in range(5):  # a worker: unpickle, run, drop
        s = pickle.loads(blob)
        s.run(None, {"x": inputs(1)[0]})
        del s
        gc.collect()
    assert ortlite._pickle.cache_info()["loads"] == 1


@pytest.fixture
def model_file(tmp_path):
    p = tmp_path / "mlp.onnx"
    p.write_bytes(mlp_bytes())
    return p


def test_session_from_path_pickles_the_bytes_by_default(model_file):
    sess = ortlite.InferenceSession(str(model_file))
    blob = pickle.dumps(sess)
    assert len(blob) > model_file.stat().st_size
    x = inputs(1)[0]
    expected = sess.run(None, {"x": x})[0]
    del sess
    gc.collect()
    os.remove(model_file)  # the pickle needs no file
    ortlite._pickle.cache_clear()
    np.testing.assert_array_equal(pickle.loads(blob).run(None, {"x": x})[0], expected)


def path_session(model_file):
    so = ortlite.SessionOptions()
    so.add_session_config_entry(ortlite._pickle.PICKLE_MODEL_ENTRY, "path")
    return ortlite.InferenceSession(str(model_file), so)


def test_path_mode_pickle_is_small_and_loads_the_file(model_file):
    sess = path_session(model_file)
    blob = pickle.dumps(sess)
    assert len(blob) < 2000
    x = inputs(1)[0]
    expected = sess.run(None, {"x": x})[0]
    del sess
    gc.collect()
    ortlite._pickle.cache_clear()
    back = pickle.loads(blob)
    np.testing.assert_array_equal(back.run(None, {"x": x})[0], expected)
    assert back._model_source()[0] == str(model_file)


def test_path_mode_missing_file_raises_no_such_file(model_file):
    blob = pickle.dumps(path_session(model_file))
    gc.collect()
    ortlite._pickle.cache_clear()
    os.remove(model_file)
    with pytest.raises(ortlite.NoSuchFile, match="is not readable here"):
        pickle.loads(blob)


def test_path_mode_changed_file_raises_invalid_argument(model_file):
    blob = pickle.dumps(path_session(model_file))
    gc.collect()
    ortlite._pickle.cache_clear()
    model_file.write_bytes(mlp_bytes(seed=5))  # same size, other weights
    with pytest.raises(ortlite.InvalidArgument, match="differs from the one pickled"):
        pickle.loads(blob)


def test_file_changed_since_load_refuses_to_pickle(model_file):
    sess = ortlite.InferenceSession(str(model_file))
    model_file.write_bytes(mlp_bytes(seed=5))
    with pytest.raises(ortlite.InvalidArgument, match="changed, moved or removed"):
        pickle.dumps(sess)


def test_bad_pickle_mode_entry():
    sess = session(**{ortlite._pickle.PICKLE_MODEL_ENTRY: "inline"})
    with pytest.raises(ortlite.InvalidArgument, match="must be 'bytes' or 'path'"):
        pickle.dumps(sess)


def test_protocol5_sends_the_model_out_of_band():
    sess = session()
    buffers = []
    blob = pickle.dumps(sess, protocol=5, buffer_callback=buffers.append)
    assert len(blob) < 4000 and sum(b.raw().nbytes for b in buffers) == len(mlp_bytes())
    del sess
    gc.collect()
    ortlite._pickle.cache_clear()
    back = pickle.loads(blob, buffers=buffers)
    x = inputs(1)[0]
    np.testing.assert_array_equal(back.run(None, {"x": x})[0], session().run(None, {"x": x})[0])


def test_refcounts_unchanged_by_pickling():
    import sys
    sess = session()
    so = full_options()
    before = (sys.getrefcount(sess), sys.getrefcount(so))
    for _ in range(50):
        pickle.loads(pickle.dumps(sess))
        pickle.loads(pickle.dumps(so))
        pickle.loads(pickle.dumps(sess.get_inputs()[0]))
    ortlite._pickle.cache_clear()  # it held the session unpickled last
    gc.collect()
    assert (sys.getrefcount(sess), sys.getrefcount(so)) == before


def test_external_data_model(tmp_path):
    import onnx
    path = tmp_path / "ext.onnx"
    onnx.save(mlp_model(), str(path), save_as_external_data=True,
              all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    x = inputs(1)[0]
    sess = ortlite.InferenceSession(str(path))
    expected = sess.run(None, {"x": x})[0]
    bytes_blob = pickle.dumps(sess)
    path_blob = pickle.dumps(path_session(path))
    del sess
    ortlite._pickle.cache_clear()
    gc.collect()
    with pytest.raises(ortlite.Fail, match="pickles by path"):
        pickle.loads(bytes_blob)
    np.testing.assert_array_equal(pickle.loads(path_blob).run(None, {"x": x})[0], expected)


def external_model(tmp_path, seed=0, location="w.bin"):
    import onnx
    path = tmp_path / "ext.onnx"
    onnx.save(mlp_model(seed=seed) if seed else mlp_model(), str(path), save_as_external_data=True,
              all_tensors_to_one_file=True, location=location, size_threshold=0)
    return path


def test_path_mode_changed_external_data_raises_invalid_argument(tmp_path):
    """The path-mode digest covers the external data files: a worker whose weights file
    differs (same model file, same size) refuses to run it."""
    path = external_model(tmp_path)
    blob = pickle.dumps(path_session(path))
    gc.collect()
    ortlite._pickle.cache_clear()
    data = tmp_path / "w.bin"
    arr = np.frombuffer(data.read_bytes(), np.uint8).copy()
    arr[:64] ^= 0x55  # other weights, same length
    data.write_bytes(arr.tobytes())
    with pytest.raises(ortlite.InvalidArgument, match="external data files .* differ"):
        pickle.loads(blob)


def test_path_mode_external_data_changed_since_load_refuses_to_pickle(tmp_path):
    path = external_model(tmp_path)
    sess = path_session(path)
    data = tmp_path / "w.bin"
    data.write_bytes(data.read_bytes()[::-1])
    with pytest.raises(ortlite.InvalidArgument, match="external data file .* was changed"):
        pickle.dumps(sess)


def test_path_mode_external_data_missing_on_the_worker(tmp_path):
    path = external_model(tmp_path)
    blob = pickle.dumps(path_session(path))
    gc.collect()
    ortlite._pickle.cache_clear()
    os.remove(tmp_path / "w.bin")
    with pytest.raises(ortlite.NoSuchFile, match="w.bin"):
        pickle.loads(blob)


def test_model_source_lists_the_external_data_files(tmp_path):
    path = external_model(tmp_path)
    sess = ortlite.InferenceSession(str(path))
    files = sess._model_source()[3]
    assert [os.path.basename(p) for p, _ in files] == ["w.bin"]
    st = os.stat(tmp_path / "w.bin")
    assert files[0][1] == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert ortlite.InferenceSession(mlp_bytes())._model_source()[3] is None
