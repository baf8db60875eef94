"""The execution-provider devices of onnxruntime's EP-device API: get_ep_devices() and
InferenceSession.get_input_epdevices() / get_output_epdevices(). ortlite's providers are
built in (no plugin libraries), so the devices are those of get_available_providers():
the CPU, and each visible GPU for CUDAExecutionProvider."""

import enum as _enum

from ortlite._memory import (OrtAllocatorType, OrtDeviceMemoryType, OrtMemoryInfo,
                             OrtMemType)


class OrtHardwareDeviceType(_enum.IntEnum):
    """OrtHardwareDevice.type, numbered as onnxruntime's."""

    CPU = 0
    GPU = 1
    NPU = 2


# /proc/cpuinfo vendor strings -> (vendor, PCI vendor id), as onnxruntime reports the CPU
_CPU_VENDORS = {"GenuineIntel": ("Intel", 0x8086), "AuthenticAMD": ("AMD", 0x1022)}


def _cpu_vendor():
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return _CPU_VENDORS.get(line.split(":", 1)[1].strip(), ("", 0))
    except OSError:
        pass
    return ("", 0)


class OrtHardwareDevice:
    """A device an execution provider runs on: type, vendor, vendor_id, device_id, metadata."""

    __slots__ = ("_type", "_vendor", "_vendor_id", "_device_id", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise TypeError("OrtHardwareDevice cannot be created directly; use get_ep_devices()")

    @classmethod
    def _make(cls, type_, vendor, vendor_id, device_id):
        self = cls.__new__(cls)
        self._type, self._vendor, self._vendor_id, self._device_id = (
            type_, vendor, vendor_id, device_id)
        return self

    type = property(lambda self: self._type)
    vendor = property(lambda self: self._vendor)
    vendor_id = property(lambda self: self._vendor_id)
    device_id = property(lambda self: self._device_id)
    metadata = property(lambda self: {})

    def __repr__(self):
        return (f"OrtHardwareDevice(type={self._type.name}, vendor={self._vendor!r}, "
                f"device_id={self._device_id})")


class OrtEpDevice:
    """An (execution provider, hardware device) pair: ep_name, ep_vendor, ep_metadata,
    ep_options, device, memory_info(mem_type)."""

    __slots__ = ("_ep_name", "_device", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise TypeError("OrtEpDevice cannot be created directly; use get_ep_devices()")

    @classmethod
    def _make(cls, ep_name, device):
        self = cls.__new__(cls)
        self._ep_name, self._device = ep_name, device
        return self

    ep_name = property(lambda self: self._ep_name)
    ep_vendor = property(lambda self: "ortlite")
    device = property(lambda self: self._device)
    ep_options = property(lambda self: {})

    @property
    def ep_metadata(self):
        from ortlite import __version__
        return {"version": __version__}

    def memory_info(self, mem_type):
        """The OrtMemoryInfo this provider allocates `mem_type` (an OrtDeviceMemoryType)
        memory with; None where it has no allocator of its own for it (the CPU provider,
        as onnxruntime's)."""
        if not isinstance(mem_type, OrtDeviceMemoryType):
            raise TypeError("memory_info expects an OrtDeviceMemoryType, not "
                            f"{type(mem_type).__name__}")
        if self._device.type != OrtHardwareDeviceType.GPU:
            return None
        name = "Cuda" if mem_type == OrtDeviceMemoryType.DEFAULT else "CudaPinned"
        return OrtMemoryInfo(name, OrtAllocatorType.ORT_ARENA_ALLOCATOR,
                             self._device.device_id, OrtMemType.DEFAULT)

    def __repr__(self):
        return f"OrtEpDevice(ep_name={self._ep_name!r}, device={self._device!r})"


_cache = {}


def _ep_device_for(device_name, device_id):
    """The OrtEpDevice of a session input or output placed on `device_name` ("cpu" or
    "cuda") with `device_id`; one object per device for the life of the process."""
    key = (device_name, device_id)
    dev = _cache.get(key)
    if dev is None:
        if device_name == "cuda":
            hw = OrtHardwareDevice._make(OrtHardwareDeviceType.GPU, "NVIDIA", 0x10DE, device_id)
            dev = OrtEpDevice._make("CUDAExecutionProvider", hw)
        else:
            vendor, vendor_id = _cpu_vendor()
            hw = OrtHardwareDevice._make(OrtHardwareDeviceType.CPU, vendor, vendor_id, 0)
            dev = OrtEpDevice._make("CPUExecutionProvider", hw)
        dev = _cache.setdefault(key, dev)
    return dev


def get_ep_devices():
    """The OrtEpDevices this build can run on, in get_available_providers() order:
    CUDAExecutionProvider on GPU 0 (where the provider is available), then the CPU."""
    import ortlite
    out = []
    if "CUDAExecutionProvider" in ortlite.get_available_providers():
        out.append(_ep_device_for("cuda", 0))
    out.append(_ep_device_for("cpu", 0))
    return out
