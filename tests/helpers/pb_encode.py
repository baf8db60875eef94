"""A tiny protobuf wire-format encoder for tests that need encodings onnx's Python
protobuf never writes (unpacked repeated scalars, unknown fields, groups, malformed
bytes). Field numbers follow onnx/onnx.proto."""

import struct


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def vint(field, value):
    """A varint field (int32/int64/uint64/enum/bool)."""
    return key(field, 0) + varint(value)


def f32(field, value):
    return key(field, 5) + struct.pack("<f", value)


def f64(field, value):
    return key(field, 1) + struct.pack("<d", value)


def ln(field, payload):
    """A length-delimited field (bytes, string, sub-message, packed run)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return key(field, 2) + varint(len(payload)) + payload


def packed_varints(field, values):
    return ln(field, b"".join(varint(v) for v in values))


def unpacked_varints(field, values):
    return b"".join(vint(field, v) for v in values)


def unpacked_f32(field, values):
    return b"".join(f32(field, v) for v in values)


def unpacked_f64(field, values):
    return b"".join(f64(field, v) for v in values)


# TensorProto fields
T_DIMS, T_DATA_TYPE, T_FLOAT, T_INT32, T_STRING, T_INT64, T_NAME, T_RAW = 1, 2, 4, 5, 6, 7, 8, 9
T_DOUBLE, T_UINT64, T_EXTERNAL, T_LOCATION = 10, 11, 13, 14
# GraphProto fields
G_NODE, G_INITIALIZER = 1, 5
# ModelProto fields
M_GRAPH = 7
# NodeProto / AttributeProto fields
N_INPUT, N_OUTPUT, N_NAME, N_OP_TYPE, N_ATTRIBUTE = 1, 2, 3, 4, 5
A_NAME, A_F, A_I, A_FLOATS, A_INTS, A_TYPE = 1, 2, 3, 7, 8, 20


def append_to_graph(model_bytes, *graph_fields):
    """Appends fields to the model's graph: protobuf merges a repeated singular message
    field, so a second `graph` field adds its nodes/initializers to the first."""
    return model_bytes + ln(M_GRAPH, b"".join(graph_fields))
