"""LoRA adapters: onnxruntime's AdapterFormat and LoraAdapter over its .onnx_adapter files
(a flatbuffer, file identifier "TORT", schema onnxruntime/lora/adapter_format/
adapter_schema.fbs):

    table Parameter { name: string; dims: [int64]; data_type: TensorDataType (int32);
                      raw_data: [uint8] (force_align: 8); }
    table Adapter { format_version: int; adapter_version: int; model_version: int;
                    parameters: [Parameter]; }

Read and written here with struct, bounds-checked; an active adapter's parameters are
fed to the run by name (RunOptions.add_active_adapter), overriding the initializers (or
inputs) of those names for that run only, as onnxruntime does."""

import struct as _struct

import numpy as _np

from ortlite._ortlite import InvalidArgument, InvalidProtobuf, NoSuchFile, OrtValue

_IDENT = b"TORT"
FORMAT_VERSION = 1

# ONNX TensorProto element types of the numpy dtypes a parameter can hold.
_NP_OF_ONNX = {1: _np.float32, 2: _np.uint8, 3: _np.int8, 4: _np.uint16, 5: _np.int16,
               6: _np.int32, 7: _np.int64, 9: _np.bool_, 10: _np.float16, 11: _np.float64,
               12: _np.uint32, 13: _np.uint64}
_ONNX_OF_NP = {_np.dtype(v): k for k, v in _NP_OF_ONNX.items()}


class _Reader:
    def __init__(self, data):
        self.b = memoryview(data)
        self.n = len(data)

    def _check(self, pos, size, what):
        if pos < 0 or size < 0 or pos + size > self.n:
            raise InvalidProtobuf(f"adapter file: {what} at offset {pos} (+{size} bytes) is "
                                  f"outside the {self.n}-byte file")

    def u32(self, pos, what="uint32"):
        self._check(pos, 4, what)
        return _struct.unpack_from("<I", self.b, pos)[0]

    def i32(self, pos, what="int32"):
        self._check(pos, 4, what)
        return _struct.unpack_from("<i", self.b, pos)[0]

    def table(self, pos, what):
        """{field index: absolute position} of the table at pos."""
        vt = pos - self.i32(pos, what)
        vsize = self.u32(vt, what + " vtable") & 0xFFFF
        self._check(vt, vsize, what + " vtable")
        fields = {}
        for i in range((vsize - 4) // 2):
            off = _struct.unpack_from("<H", self.b, vt + 4 + 2 * i)[0]
            if off:
                fields[i] = pos + off
        return fields

    def ref(self, pos, what):
        return pos + self.u32(pos, what)

    def vector(self, pos, elem_size, what):
        start = self.ref(pos, what)
        count = self.u32(start, what + " length")
        self._check(start + 4, count * elem_size, what)
        return start + 4, count


def _parse(data):
    r = _Reader(data)
    if len(data) < 8 or bytes(data[4:8]) != _IDENT:
        raise InvalidProtobuf("not an onnxruntime adapter file (no 'TORT' file identifier)")
    root = r.ref(0, "root table")
    f = r.table(root, "Adapter")
    versions = [r.i32(f[i], "version") if i in f else 0 for i in range(3)]
    params = {}
    if 3 in f:
        start, count = r.vector(f[3], 4, "parameters")
        for k in range(count):
            p = r.table(r.ref(start + 4 * k, "parameter"), f"parameter #{k}")
            if 0 not in p:
                raise InvalidProtobuf(f"adapter file: parameter #{k} has no name")
            s, n = r.vector(p[0], 1, f"parameter #{k} name")
            try:
                name = bytes(r.b[s:s + n]).decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidProtobuf(f"adapter file: parameter #{k}'s name is not UTF-8") from None
            dims = []
            if 1 in p:
                s, n = r.vector(p[1], 8, f"parameter '{name}' dims")
                dims = list(_struct.unpack_from(f"<{n}q", r.b, s))
            dtype = r.i32(p[2], "data_type") if 2 in p else 0
            if dtype not in _NP_OF_ONNX:
                raise InvalidArgument(f"adapter parameter '{name}' has element type {dtype}, "
                                      "which ortlite does not read")
            raw = b""
            if 3 in p:
                s, n = r.vector(p[3], 1, f"parameter '{name}' raw_data")
                raw = bytes(r.b[s:s + n])
            if any(d < 0 for d in dims):
                raise InvalidArgument(f"adapter parameter '{name}' has a negative dim {dims}")
            np_type = _np.dtype(_NP_OF_ONNX[dtype])
            if int(_np.prod(dims, dtype=_np.int64)) * np_type.itemsize != len(raw):
                raise InvalidArgument(f"adapter parameter '{name}': {len(raw)} bytes of data for "
                                      f"dims {dims} of {np_type}")
            arr = _np.frombuffer(raw, dtype=np_type).reshape(dims).copy()
            params[name] = OrtValue.ortvalue_from_numpy(arr)
    return versions, params


class _Builder:
    """Writes a flatbuffer front to back: every uoffset points forward."""

    def __init__(self):
        self.buf = bytearray()
        self.fixups = []  # (position of a uoffset, key of its target)
        self.targets = {}

    def align(self, n):
        self.buf += b"\0" * (-len(self.buf) % n)

    def u32(self, v):
        self.buf += _struct.pack("<I", v)

    def ref(self, key):
        self.fixups.append((len(self.buf), key))
        self.u32(0)

    def mark(self, key):
        self.targets[key] = len(self.buf)

    def table(self, key, fields):
        """fields: list of (kind, value): ("i32", int) or ("ref", key)."""
        self.align(4)
        vt = len(self.buf)
        n = len(fields)
        vsize = 4 + 2 * n
        self.buf += _struct.pack("<HH", vsize, 4 + 4 * n)
        self.buf += b"".join(_struct.pack("<H", 4 + 4 * i) for i in range(n))
        self.align(4)
        self.mark(key)
        self.buf += _struct.pack("<i", len(self.buf) - vt)
        for kind, value in fields:
            if kind == "i32":
                self.buf += _struct.pack("<i", value)
            else:
                self.ref(value)

    def vector(self, key, payload, count, elem_align=4):
        # The length sits right before the elements, which start elem_align-aligned.
        while (len(self.buf) + 4) % max(elem_align, 4):
            self.buf += b"\0"
        self.mark(key)
        self.u32(count)
        self.buf += payload

    def finish(self):
        for pos, key in self.fixups:
            _struct.pack_into("<I", self.buf, pos, self.targets[key] - pos)
        return bytes(self.buf)


def _serialize(versions, params):
    b = _Builder()
    b.ref("root")
    b.buf += _IDENT
    b.table("root", [("i32", versions[0]), ("i32", versions[1]), ("i32", versions[2]),
                     ("ref", "params")])
    names = list(params)
    b.align(4)
    b.mark("params")
    b.u32(len(names))
    for k in range(len(names)):
        b.ref(("p", k))
    for k, name in enumerate(names):
        arr = params[name]
        if arr.dtype not in _ONNX_OF_NP:
            raise InvalidArgument(f"adapter parameter '{name}' of dtype {arr.dtype} cannot be "
                                  "written")
        b.table(("p", k), [("ref", ("n", k)), ("ref", ("d", k)),
                           ("i32", _ONNX_OF_NP[arr.dtype]), ("ref", ("r", k))])
        enc = name.encode("utf-8")
        b.vector(("n", k), enc + b"\0", len(enc))
        b.vector(("d", k), _struct.pack(f"<{arr.ndim}q", *arr.shape), arr.ndim, 8)
        raw = _np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        b.vector(("r", k), raw, len(raw), 8)
    return b.finish()


def _as_array(value, name):
    if isinstance(value, OrtValue):
        return value.numpy()
    if isinstance(value, _np.ndarray):
        return value
    raise TypeError(f"adapter parameter '{name}' must be an OrtValue or a numpy array, not "
                    f"{type(value).__name__}")


class AdapterFormat:
    """Reads and writes onnxruntime's .onnx_adapter files (LoRA parameters)."""

    def __init__(self):
        self._versions = [FORMAT_VERSION, 0, 0]
        self._params = {}

    @staticmethod
    def read_adapter(file_path):
        try:
            with open(file_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise NoSuchFile(f"adapter file '{file_path}' does not exist") from None
        return AdapterFormat._from_bytes(data)

    @staticmethod
    def _from_bytes(data):
        fmt = AdapterFormat()
        fmt._versions, fmt._params = _parse(data)
        return fmt

    def export_adapter(self, file_path):
        """Writes the adapter to file_path in onnxruntime's adapter format."""
        data = _serialize(self._versions, {k: _as_array(v, k) for k, v in self._params.items()})
        with open(file_path, "wb") as f:
            f.write(data)

    def get_format_version(self):
        return self._versions[0]

    def get_adapter_version(self):
        return self._versions[1]

    def get_model_version(self):
        return self._versions[2]

    def set_adapter_version(self, adapter_version):
        self._versions[1] = int(adapter_version)

    def set_model_version(self, model_version):
        self._versions[2] = int(model_version)

    def set_parameters(self, params):
        """params: dict of name -> OrtValue (or numpy array)."""
        if not isinstance(params, dict):
            raise TypeError("set_parameters expects a dict of name -> OrtValue")
        for k, v in params.items():
            _as_array(v, k)
        self._params = dict(params)

    def get_parameters(self):
        return dict(self._params)


class LoraAdapter:
    """A loaded adapter; RunOptions.add_active_adapter(adapter) feeds its parameters to a run."""

    def __init__(self):
        self._parameters = {}
        self._format = None

    def Load(self, adapter_file_path):  # noqa: N802  (onnxruntime's name)
        """Reads an .onnx_adapter file."""
        self._format = AdapterFormat.read_adapter(adapter_file_path)
        self._parameters = self._format.get_parameters()

    @classmethod
    def create_lora_adapter(cls, adapter_file_path, allocator=None):
        """onnxruntime's C API CreateLoraAdapter: `allocator` None or the CPU (parameters stay
        on the host)."""
        _check_allocator(allocator)
        a = cls()
        a.Load(adapter_file_path)
        return a

    @classmethod
    def create_lora_adapter_from_bytes(cls, data, allocator=None):
        _check_allocator(allocator)
        a = cls()
        a._format = AdapterFormat._from_bytes(bytes(data))
        a._parameters = a._format.get_parameters()
        return a


def _check_allocator(allocator):
    if allocator is None:
        return
    dev = getattr(allocator, "device_type", None)
    if callable(dev) and dev() != 0:
        raise InvalidArgument("ortlite's LoRA adapters live on the CPU: allocator must be None "
                              "or a CPU one")
