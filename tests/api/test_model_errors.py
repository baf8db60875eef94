"""Malformed models: every one gives a typed ortlite error naming what is wrong, never a
crash, a hang or an unbounded allocation."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortlite
from helpers import pb_encode as pb
from helpers import make_model

load = ortlite.InferenceSession  # every source as given: a path, a Path or bytes

F32 = np.float32


def good_model():
    w = numpy_helper.from_array(np.arange(6, dtype=F32).reshape(2, 3), "w")
    nodes = [helper.make_node("Add", ["x", "w"], ["t"], name="add"),
             helper.make_node("Relu", ["t"], ["y"], name="relu")]
    model = make_model(nodes, [("x", F32, [2, 3])], [("y", F32, [2, 3])], initializers=[w])
    onnx.helper.set_model_props(model, {"k": "v"})
    return model


def model_with_initializer(t):
    """Identity(w) where w is the given TensorProto."""
    node = helper.make_node("Identity", ["w"], ["y"])
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", 1, None)],
                              initializer=[t])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def tensor(name="w", **fields):
    t = TensorProto()
    t.name = name
    for k, v in fields.items():
        if isinstance(v, list):
            getattr(t, k).extend(v)
        else:
            setattr(t, k, v)
    return t


# ---------------------------------------------------------------------------------------
# Files and bytes


def test_missing_file(tmp_path):
    with pytest.raises(ortlite.NoSuchFile, match="nope.onnx"):
        load(str(tmp_path / "nope.onnx"))
    with pytest.raises(ortlite.NoSuchFile):
        load(tmp_path / "nope.onnx")
    with pytest.raises(ortlite.NoSuchFile):
        load(str(tmp_path / "not_a_dir" / "m.onnx"))


def test_directory_instead_of_file(tmp_path):
    with pytest.raises((ortlite.NoSuchFile, ortlite.Fail)):
        load(str(tmp_path))


def test_empty_file_and_empty_bytes(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ortlite.InvalidProtobuf):
        load(str(path))
    with pytest.raises(ortlite.InvalidProtobuf):
        load(b"")


@pytest.mark.parametrize("seed", range(20))
def test_random_bytes(seed, tmp_path):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=int(rng.integers(1, 4000)), dtype=np.uint8).tobytes()
    with pytest.raises(ortlite.InvalidProtobuf):
        load(data)
    path = tmp_path / "r.onnx"
    path.write_bytes(data)
    with pytest.raises(ortlite.InvalidProtobuf):
        load(str(path))


def test_text_file_is_not_a_model(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_text("this is not an onnx model\n")
    with pytest.raises(ortlite.InvalidProtobuf):
        load(str(path))


def test_model_without_graph():
    model = onnx.ModelProto()
    model.ir_version = 8
    model.opset_import.add().version = 17
    with pytest.raises((ortlite.InvalidProtobuf, ortlite.NoModel), match="graph"):
        load(model.SerializeToString())


def test_truncated_model_never_crashes(tmp_path):
    data = good_model().SerializeToString()
    cuts = sorted(set(list(range(0, 40)) + list(range(0, len(data), 3))))
    path = tmp_path / "cut.onnx"
    outcomes = set()
    for cut in cuts:
        piece = data[:cut]
        for source in (piece, None):
            if source is None:
                path.write_bytes(piece)
                source = str(path)
            try:
                sess = load(source)
            except ortlite.OrtliteError as e:
                outcomes.add(type(e).__name__)
                continue
            # A cut on a field boundary can still be a valid (smaller) model.
            outcomes.add("loaded")
            assert sess is not None
    assert "InvalidProtobuf" in outcomes


def test_corrupted_bytes_never_crash():
    data = bytearray(good_model().SerializeToString())
    rng = np.random.default_rng(0)
    for _ in range(300):
        d = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            d[int(rng.integers(0, len(d)))] = int(rng.integers(0, 256))
        try:
            load(bytes(d))
        except ortlite.OrtliteError:
            pass


# ---------------------------------------------------------------------------------------
# Wire-format errors


def test_varint_longer_than_10_bytes():
    data = pb.key(1, 0) + b"\xff" * 10 + b"\x01"
    with pytest.raises(ortlite.InvalidProtobuf, match="varint"):
        load(data)


def test_length_beyond_end():
    data = pb.key(7, 2) + pb.varint(1000) + b"\x00" * 10
    with pytest.raises(ortlite.InvalidProtobuf, match="exceeds"):
        load(data)
    huge = pb.key(7, 2) + pb.varint(2**63) + b"\x00" * 10
    with pytest.raises(ortlite.InvalidProtobuf):
        load(huge)


def test_bad_wire_types_and_tags():
    base = good_model().SerializeToString()
    for bad in [pb.varint(1000 << 3 | 6) + b"\x00",     # wire type 6
                pb.varint(1000 << 3 | 7) + b"\x00",     # wire type 7
                pb.varint(1000 << 3 | 4),               # stray end-group
                pb.varint(1000 << 3 | 3) + pb.vint(1, 1),  # unterminated group
                pb.varint(1000 << 3 | 3) + pb.key(1001, 4),  # group closed by another field
                pb.varint(0 << 3 | 0) + b"\x00",        # field number 0
                pb.key(7, 0) + b"\x01"]:                # graph as a varint
        with pytest.raises(ortlite.InvalidProtobuf):
            load(base + bad)


def test_deeply_nested_groups_are_bounded():
    data = good_model().SerializeToString()
    nested = pb.key(1000, 3) * 5000 + pb.key(1000, 4) * 5000
    with pytest.raises(ortlite.InvalidProtobuf, match="nested"):
        load(data + nested)


def test_deeply_nested_subgraphs_are_bounded():
    # If nodes inside then_branch graphs, 200 levels deep (GraphProto bytes built inside out).
    graph = pb.ln(1, pb.ln(4, "Identity") + pb.ln(1, "c") + pb.ln(2, "o"))
    for _ in range(200):
        attr = pb.ln(1, "then_branch") + pb.vint(20, 5) + pb.ln(6, graph)
        node = pb.ln(1, "c") + pb.ln(2, "o") + pb.ln(4, "If") + pb.ln(5, attr)
        graph = pb.ln(1, node)
    model = pb.vint(1, 8) + pb.ln(8, pb.vint(2, 17)) + pb.ln(pb.M_GRAPH, graph)
    with pytest.raises(ortlite.InvalidProtobuf, match="nested deeper"):
        load(model)


def test_deeply_nested_types_are_bounded():
    t = pb.ln(1, pb.vint(1, 1))  # TypeProto: tensor(float)
    for _ in range(500):
        t = pb.ln(4, pb.ln(1, t))  # TypeProto: seq(t)
    value_info = pb.ln(1, "v") + pb.ln(2, t)
    model = pb.append_to_graph(good_model().SerializeToString(), pb.ln(13, value_info))
    with pytest.raises(ortlite.InvalidProtobuf, match="nested deeper"):
        load(model)


# ---------------------------------------------------------------------------------------
# Tensor errors


def test_negative_dims():
    t = tensor(dims=[2, -3], data_type=TensorProto.FLOAT, raw_data=b"\0" * 24)
    with pytest.raises(ortlite.InvalidGraph, match="'w'.*negative"):
        load(model_with_initializer(t))


def test_dims_product_overflow():
    t = tensor(dims=[2**32, 2**32, 4], data_type=TensorProto.FLOAT, raw_data=b"")
    with pytest.raises(ortlite.InvalidGraph, match="'w'.*overflow"):
        load(model_with_initializer(t))
    # the product fits in int64, the byte count does not
    t = tensor(dims=[2**31, 2**31], data_type=TensorProto.DOUBLE, raw_data=b"")
    with pytest.raises(ortlite.InvalidGraph, match="'w'"):
        load(model_with_initializer(t))


@pytest.mark.parametrize("nbytes", [0, 20, 23, 25, 48])
def test_raw_data_size_mismatch(nbytes):
    t = tensor(dims=[2, 3], data_type=TensorProto.FLOAT, raw_data=b"\0" * nbytes)
    with pytest.raises(ortlite.InvalidGraph, match=f"'w'.*raw_data holds {nbytes} bytes"):
        load(model_with_initializer(t))


def test_typed_field_count_mismatch():
    for t in [tensor(dims=[3], data_type=TensorProto.FLOAT, float_data=[1.0, 2.0]),
              tensor(dims=[1], data_type=TensorProto.INT64, int64_data=[1, 2]),
              tensor(dims=[2], data_type=TensorProto.INT8, int32_data=[1]),
              tensor(dims=[2], data_type=TensorProto.STRING, string_data=[b"a"]),
              tensor(dims=[2], data_type=TensorProto.FLOAT)]:
        with pytest.raises(ortlite.InvalidGraph, match="'w'"):
            load(model_with_initializer(t))


def test_typed_field_of_the_wrong_kind():
    t = tensor(dims=[2], data_type=TensorProto.FLOAT, int64_data=[1, 2])
    with pytest.raises(ortlite.InvalidGraph, match="int64_data"):
        load(model_with_initializer(t))
    t = tensor(dims=[1], data_type=TensorProto.FLOAT, float_data=[1.0], raw_data=b"\0" * 4)
    with pytest.raises(ortlite.InvalidGraph, match="both"):
        load(model_with_initializer(t))


@pytest.mark.parametrize("data_type", [0, 99, -1, 1000])
def test_unknown_data_type(data_type):
    t = tensor(dims=[1], data_type=data_type, raw_data=b"\0" * 4)
    with pytest.raises(ortlite.OrtliteError, match="'w'.*data_type"):
        load(model_with_initializer(t))


def test_unsupported_data_type():
    t = tensor(dims=[1], data_type=TensorProto.COMPLEX64, float_data=[1.0, 2.0])
    with pytest.raises(ortlite.NotImplemented, match="'w'.*COMPLEX64"):
        load(model_with_initializer(t))


def test_segmented_tensor_is_refused():
    t = tensor(dims=[1], data_type=TensorProto.FLOAT, float_data=[1.0])
    t.segment.begin = 0
    t.segment.end = 1
    with pytest.raises(ortlite.NotImplemented, match="segment"):
        load(model_with_initializer(t))


def test_string_tensor_with_raw_data():
    t = tensor(dims=[1], data_type=TensorProto.STRING, raw_data=b"abc")
    with pytest.raises(ortlite.InvalidGraph, match="string"):
        load(model_with_initializer(t))


def test_duplicate_initializer():
    w = numpy_helper.from_array(np.ones(3, F32), "w")
    model = make_model([helper.make_node("Identity", ["w"], ["y"])], [], [("y", F32, None)],
                       initializers=[w, w])
    with pytest.raises(ortlite.InvalidGraph, match="'w'.*twice"):
        load(model.SerializeToString())


# ---------------------------------------------------------------------------------------
# Attribute errors


def _transpose_with(attr):
    node = helper.make_node("Transpose", ["x"], ["y"], name="tr")
    node.attribute.append(attr)
    return make_model([node], [("x", F32, [2, 3])], [("y", F32, None)]).SerializeToString()


def test_attribute_of_the_wrong_type():
    # perm given as floats: the kernel refuses it, naming the node and the attribute
    with pytest.raises(ortlite.InvalidGraph, match="perm"):
        load(_transpose_with(helper.make_attribute("perm", [1.0, 0.0])))


def test_attribute_declared_type_disagrees_with_value():
    a = helper.make_attribute("perm", [1, 0])
    a.type = onnx.AttributeProto.FLOAT
    with pytest.raises(ortlite.InvalidGraph, match="'perm'.*FLOAT.*INTS"):
        load(_transpose_with(a))


def test_graph_attribute_without_graph():
    a = onnx.AttributeProto()
    a.name = "then_branch"
    a.type = onnx.AttributeProto.GRAPH
    node = helper.make_node("If", ["c"], ["y"], name="if1")
    node.attribute.append(a)
    model = make_model([node], [("c", np.bool_, [])], [("y", F32, None)]).SerializeToString()
    with pytest.raises(ortlite.InvalidGraph, match="if1.*'then_branch'.*no value"):
        load(model)


def test_attribute_unknown_type():
    # AttributeProto.type = 77 (onnx's Python protobuf refuses to write it: encode by hand)
    attr = pb.ln(pb.A_NAME, "perm") + pb.vint(pb.A_TYPE, 77) + pb.packed_varints(pb.A_INTS, [1, 0])
    node = (pb.ln(pb.N_INPUT, "x") + pb.ln(pb.N_OUTPUT, "y") + pb.ln(pb.N_OP_TYPE, "Transpose")
            + pb.ln(pb.N_ATTRIBUTE, attr))
    base = make_model([], [("x", F32, [2, 3])], [("y", F32, None)]).SerializeToString()
    with pytest.raises(ortlite.InvalidGraph, match="'perm'.*unknown attribute type"):
        load(pb.append_to_graph(base, pb.ln(pb.G_NODE, node)))


def test_invalid_utf8_name():
    node = pb.ln(pb.N_INPUT, "x") + pb.ln(pb.N_OUTPUT, b"y\xff") + pb.ln(pb.N_OP_TYPE, "Relu")
    base = make_model([], [("x", F32, [2, 3])], [("y", F32, None)]).SerializeToString()
    with pytest.raises(ortlite.InvalidProtobuf, match="UTF-8"):
        load(pb.append_to_graph(base, pb.ln(pb.G_NODE, node)))


def test_attribute_bad_tensor_names_node_and_attribute():
    node = helper.make_node("Constant", [], ["y"], name="const")
    node.attribute.append(helper.make_attribute(
        "value", tensor("", dims=[2], data_type=TensorProto.FLOAT, raw_data=b"\0" * 4)))
    model = make_model([node], [], [("y", F32, None)]).SerializeToString()
    with pytest.raises(ortlite.InvalidGraph, match="const.*'value'.*raw_data"):
        load(model)


def test_node_without_op_type():
    node = helper.make_node("Relu", ["x"], ["y"], name="n1")
    node.op_type = ""
    model = make_model([node], [("x", F32, [2])], [("y", F32, None)]).SerializeToString()
    with pytest.raises(ortlite.InvalidGraph, match="op_type"):
        load(model)


@pytest.mark.parametrize("case", ["output", "value_info", "cast", "compare", "topk_indices",
                                  "chain"])
def test_declared_output_type_disagrees_with_the_op(case):
    """A node output declared (graph output or value_info) with another element type than its
    op gives from its inputs is refused at load, naming the value, the node and both types;
    onnxruntime refuses the same models. The same models with the right declarations load."""
    import onnxruntime

    def build(declared):
        vi = []
        if case == "output":
            nodes = [helper.make_node("ArgMax", ["x"], ["y"], name="am")]
            out, bad = ("y", declared), "y"
        elif case == "value_info":
            nodes = [helper.make_node("ArgMax", ["x"], ["a"], name="am"),
                     helper.make_node("Cast", ["a"], ["y"], to=TensorProto.FLOAT)]
            vi = [("a", declared)]
            out, bad = ("y", F32), "a"
        elif case == "cast":
            nodes = [helper.make_node("Cast", ["x"], ["y"], name="c", to=TensorProto.INT32)]
            out, bad = ("y", declared), "y"
        elif case == "compare":
            nodes = [helper.make_node("Less", ["x", "x"], ["y"], name="lt")]
            out, bad = ("y", declared), "y"
        elif case == "topk_indices":
            k = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
                np.array([2], np.int64)))
            nodes = [k, helper.make_node("TopK", ["x", "k"], ["v", "y"], name="tk")]
            out, bad = ("y", declared), "y"
        else:  # the declared type of an intermediate value feeds the next node's rule
            nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                     helper.make_node("Neg", ["r"], ["y"], name="neg")]
            vi = [("r", F32)]
            out, bad = ("y", declared), "y"
        graph = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor_value_info(out[0], helper.np_dtype_to_tensor_dtype(
                np.dtype(out[1])), None)],
            value_info=[helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(
                np.dtype(t)), None) for n, t in vi])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m.SerializeToString(), bad

    right = {"output": np.int64, "value_info": np.int64, "cast": np.int32,
             "compare": np.bool_, "topk_indices": np.int64, "chain": F32}[case]
    wrong = np.float64 if right is F32 else F32
    good, _ = build(right)
    x = np.arange(6, dtype=F32).reshape(2, 3)
    got = load(good).run(None, {"x": x})
    want = onnxruntime.InferenceSession(good, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    assert [g.dtype for g in got] == [w.dtype for w in want]
    bad, name = build(wrong)
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.Fail, match="Type Error"):
        onnxruntime.InferenceSession(bad, providers=["CPUExecutionProvider"])
    onnx_name = {np.dtype(F32): "float", np.dtype(np.float64): "double", np.dtype(np.int64):
                 "int64", np.dtype(np.int32): "int32", np.dtype(np.bool_): "bool"}
    with pytest.raises(ortlite.InvalidGraph,
                       match=f"output '{name}' of .* is {onnx_name[np.dtype(right)]}, "
                             f"but the model declares it {onnx_name[np.dtype(wrong)]}"):
        load(bad)
