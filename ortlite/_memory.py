"""onnxruntime's memory and allocator descriptions (OrtMemoryInfo, OrtArenaCfg and their
enums), create_and_register_allocator, and the records of
InferenceSession.get_provider_graph_assignment_info. Plain Python: ortlite's sessions plan
their own memory (a per-run arena on the CPU, the CUDA provider's allocator on a GPU), so
these describe and validate; they do not configure an allocator (docs/compatibility.md)."""

import enum as _enum
import threading as _threading


class OrtMemType(_enum.IntEnum):
    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0


class OrtAllocatorType(_enum.IntEnum):
    INVALID = -1
    ORT_DEVICE_ALLOCATOR = 0
    ORT_ARENA_ALLOCATOR = 1


class OrtMemoryInfoDeviceType(_enum.IntEnum):
    CPU = 0
    GPU = 1
    FPGA = 2
    NPU = 3


class OrtDeviceMemoryType(_enum.IntEnum):
    DEFAULT = 0
    HOST_ACCESSIBLE = 5


# onnxruntime's allocator names, and the device each names.
_NAMES = {"Cpu": OrtMemoryInfoDeviceType.CPU, "Cuda": OrtMemoryInfoDeviceType.GPU,
          "CudaPinned": OrtMemoryInfoDeviceType.CPU}


def _check_int(what, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be int, not {type(value).__name__}")
    return value


def _check_enum(what, cls, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an {cls.__name__}, not {type(value).__name__}")
    try:
        return cls(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a valid {cls.__name__}") from None


class OrtMemoryInfo:
    """OrtMemoryInfo(name, allocator_type, device_id, mem_type): where a value lives.
    `name` is one of onnxruntime's allocator names: "Cpu", "Cuda", "CudaPinned"."""

    __slots__ = ("_name", "_allocator_type", "_device_id", "_mem_type", "_device_type",
                 "_device_mem_type", "_vendor_id", "__weakref__")

    def __init__(self, name, allocator_type, device_id, mem_type):
        if not isinstance(name, str):
            raise TypeError(f"name must be str, not {type(name).__name__}")
        if not isinstance(allocator_type, OrtAllocatorType):
            raise TypeError("allocator_type must be an OrtAllocatorType, not "
                            f"{type(allocator_type).__name__}")
        if not isinstance(mem_type, OrtMemType):
            raise TypeError(f"mem_type must be an OrtMemType, not {type(mem_type).__name__}")
        _check_int("device_id", device_id)
        if name not in _NAMES:
            from ortlite import InvalidArgument
            raise InvalidArgument(f"Specified device is not supported: '{name}' (known: "
                                  f"{', '.join(_NAMES)}). Try OrtMemoryInfo.create_v2.")
        self._init(name, allocator_type, device_id, mem_type, _NAMES[name],
                   OrtDeviceMemoryType.HOST_ACCESSIBLE if name == "CudaPinned"
                   else OrtDeviceMemoryType.DEFAULT, 0x10DE if name == "Cuda" else 0)

    def _init(self, name, allocator_type, device_id, mem_type, device_type, device_mem_type,
              vendor_id):
        self._name = name
        self._allocator_type = allocator_type
        self._device_id = device_id
        self._mem_type = mem_type
        self._device_type = device_type
        self._device_mem_type = device_mem_type
        self._vendor_id = vendor_id

    @classmethod
    def create_v2(cls, name, device_type, vendor_id, device_id, mem_type, alignment,
                  allocator_type):
        """create_v2(name, device_type, vendor_id, device_id, mem_type, alignment,
        allocator_type): onnxruntime's CreateMemoryInfo_V2 (any name; mem_type an
        OrtDeviceMemoryType)."""
        if not isinstance(name, str):
            raise TypeError(f"name must be str, not {type(name).__name__}")
        device_type = _check_enum("device_type", OrtMemoryInfoDeviceType, device_type)
        mem_type = _check_enum("mem_type", OrtDeviceMemoryType, mem_type)
        allocator_type = _check_enum("allocator_type", OrtAllocatorType, allocator_type)
        for what, v in (("vendor_id", vendor_id), ("device_id", device_id),
                        ("alignment", alignment)):
            if _check_int(what, v) < 0:
                raise ValueError(f"{what} must be >= 0, got {v}")
        self = cls.__new__(cls)
        self._init(name, allocator_type, device_id, OrtMemType.DEFAULT, device_type, mem_type,
                   vendor_id)
        return self

    name = property(lambda self: self._name)
    allocator_type = property(lambda self: self._allocator_type)
    device_id = property(lambda self: self._device_id)
    mem_type = property(lambda self: self._mem_type)
    device_mem_type = property(lambda self: self._device_mem_type)
    device_vendor_id = property(lambda self: self._vendor_id)

    def __repr__(self):
        return (f"OrtMemoryInfo(name={self._name!r}, device_id={self._device_id}, "
                f"mem_type={self._mem_type.name}, allocator_type={self._allocator_type.name})")


def _memory_info_for(device_name, device_id):
    """The OrtMemoryInfo of a session input or output placed on `device_name` ("cpu" or
    "cuda"), as onnxruntime reports it: the arena allocator of the device, mem_type DEFAULT."""
    name = "Cuda" if device_name == "cuda" else "Cpu"
    return OrtMemoryInfo(name, OrtAllocatorType.ORT_ARENA_ALLOCATOR, device_id,
                         OrtMemType.DEFAULT)


_ARENA_KEYS = ("max_mem", "arena_extend_strategy", "initial_chunk_size_bytes",
               "max_dead_bytes_per_chunk", "initial_growth_chunk_size_bytes",
               "max_power_of_two_extend_bytes")


class OrtArenaCfg:
    """OrtArenaCfg(max_mem, arena_extend_strategy, initial_chunk_size_bytes,
    max_dead_bytes_per_chunk) or OrtArenaCfg(dict of those keys and
    initial_growth_chunk_size_bytes, max_power_of_two_extend_bytes); -1 (0 for max_mem)
    means onnxruntime's default. Accepted and kept; ortlite's arenas are not configured by
    it."""

    __slots__ = _ARENA_KEYS + ("__weakref__",)

    def __init__(self, *args):
        for k in _ARENA_KEYS:
            object.__setattr__(self, k, 0 if k == "max_mem" else -1)
        if len(args) == 1 and isinstance(args[0], dict):
            for k, v in args[0].items():
                if k not in _ARENA_KEYS:
                    from ortlite import InvalidArgument
                    raise InvalidArgument(f"Invalid OrtArenaCfg option: '{k}' (known: "
                                          f"{', '.join(_ARENA_KEYS)})")
                setattr(self, k, v)
        elif len(args) == 4:
            for k, v in zip(_ARENA_KEYS[:4], args):
                setattr(self, k, v)
        else:
            raise TypeError("OrtArenaCfg takes (max_mem, arena_extend_strategy, "
                            "initial_chunk_size_bytes, max_dead_bytes_per_chunk) or a dict, "
                            f"not {len(args)} arguments")

    def __setattr__(self, key, value):
        if key in _ARENA_KEYS:
            _check_int(key, value)
        object.__setattr__(self, key, value)

    def __repr__(self):
        return "OrtArenaCfg(" + ", ".join(f"{k}={getattr(self, k)}" for k in _ARENA_KEYS) + ")"


_registered = {}
_registered_lock = _threading.Lock()


def create_and_register_allocator(mem_info, arena_cfg):
    """create_and_register_allocator(mem_info, arena_cfg): onnxruntime registers a shared
    allocator that sessions with session.use_env_allocators = "1" use. ortlite checks the
    arguments and records them (registering the same device again replaces the record), but
    its sessions keep their own per-run arenas: nothing else changes."""
    if not isinstance(mem_info, OrtMemoryInfo):
        raise TypeError(f"mem_info must be an OrtMemoryInfo, not {type(mem_info).__name__}")
    if arena_cfg is not None and not isinstance(arena_cfg, OrtArenaCfg):
        raise TypeError(f"arena_cfg must be an OrtArenaCfg or None, not "
                        f"{type(arena_cfg).__name__}")
    with _registered_lock:
        _registered[(mem_info.name, mem_info.device_id)] = (mem_info, arena_cfg)


def create_and_register_allocator_v2(provider_type, mem_info, provider_options, arena_cfg):
    """create_and_register_allocator_v2(provider_type, mem_info, provider_options,
    arena_cfg): as create_and_register_allocator, for a provider by name."""
    if not isinstance(provider_type, str):
        raise TypeError(f"provider_type must be str, not {type(provider_type).__name__}")
    if not isinstance(provider_options, dict):
        raise TypeError("provider_options must be a dict, not "
                        f"{type(provider_options).__name__}")
    from ortlite import get_all_providers, InvalidArgument
    if provider_type not in get_all_providers():
        raise InvalidArgument(f"Unknown Provider Type: {provider_type}")
    create_and_register_allocator(mem_info, arena_cfg)


class OrtEpAssignedNode:
    """A node of an OrtEpAssignedSubgraph: name, op_type, domain."""

    __slots__ = ("name", "op_type", "domain")

    def __init__(self, name, op_type, domain):
        self.name, self.op_type, self.domain = name, op_type, domain

    def __repr__(self):
        return f"OrtEpAssignedNode(name={self.name!r}, op_type={self.op_type!r})"


class OrtEpAssignedSubgraph:
    """Nodes that one execution provider runs together: ep_name and get_nodes(). ortlite's
    providers run node by node, so each subgraph holds one node (as onnxruntime's CPU and
    CUDA providers report it)."""

    __slots__ = ("ep_name", "_nodes")

    def __init__(self, ep_name, nodes):
        self.ep_name = ep_name
        self._nodes = list(nodes)

    def get_nodes(self):
        return list(self._nodes)

    def __repr__(self):
        return f"OrtEpAssignedSubgraph(ep_name={self.ep_name!r}, nodes={len(self._nodes)})"


_RECORD_ENTRY = "session.record_ep_graph_assignment_info"


def _graph_assignment(rows, options):
    """[(name, op_type, domain, provider)] in plan order -> [OrtEpAssignedSubgraph], one a
    node; only for sessions made with the config entry session.record_ep_graph_assignment_info
    = "1", as onnxruntime."""
    from ortlite import Fail

    try:
        recorded = options.get_session_config_entry(_RECORD_ENTRY) == "1"
    except RuntimeError:
        recorded = False
    if not recorded:
        raise Fail(f"Session configuration entry '{_RECORD_ENTRY}' must be set to \"1\" to "
                   "retrieve EP graph assignment information.")
    return [OrtEpAssignedSubgraph(provider, [OrtEpAssignedNode(name, op_type, domain)])
            for name, op_type, domain, provider in rows]
