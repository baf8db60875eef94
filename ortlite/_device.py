"""OrtDevice: onnxruntime's description of a device (type, memory type, vendor, id)."""

from ortlite._ortlite import InvalidArgument


class OrtDevice:
    """A device as onnxruntime describes it. Make one with OrtDevice.make("cpu", 0) or
    OrtDevice.make("cuda", 0); device_type() is OrtDevice.cpu() or OrtDevice.cuda()."""

    _TYPES = {"cpu": 0, "cuda": 1, "gpu": 1}

    def __init__(self, device_type, memory_type, device_id, vendor_id=0):
        for name, v in (("device_type", device_type), ("memory_type", memory_type),
                        ("device_id", device_id), ("vendor_id", vendor_id)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{name} must be int, not {type(v).__name__}")
        if device_type not in (0, 1):
            raise InvalidArgument(f"device type {device_type} is not one ortlite knows "
                                  "(OrtDevice.cpu() or OrtDevice.cuda())")
        if device_id < 0:
            raise InvalidArgument(f"device_id {device_id} is not valid")
        self._type, self._mem, self._id, self._vendor = device_type, memory_type, device_id, vendor_id

    @staticmethod
    def make(ort_device_name, device_id, vendor_id=-1):
        """OrtDevice.make("cpu" | "cuda" | "gpu", device_id, vendor_id=-1)."""
        if not isinstance(ort_device_name, str):
            raise TypeError(f"ort_device_name must be str, not {type(ort_device_name).__name__}")
        if ort_device_name not in OrtDevice._TYPES:
            raise InvalidArgument(f"Unsupported device type: {ort_device_name}")
        return OrtDevice(OrtDevice._TYPES[ort_device_name], OrtDevice.default_memory(), device_id,
                         vendor_id if vendor_id >= 0 else 0)

    @staticmethod
    def cpu():
        return 0

    @staticmethod
    def cuda():
        return 1

    @staticmethod
    def gpu():
        return 1

    @staticmethod
    def default_memory():
        return 0

    def device_type(self):
        return self._type

    def device_id(self):
        return self._id

    def device_mem_type(self):
        return self._mem

    def device_vendor_id(self):
        return self._vendor

    def __eq__(self, other):
        if not isinstance(other, OrtDevice):
            return NotImplemented
        return (self._type, self._mem, self._id, self._vendor) == (
            other._type, other._mem, other._id, other._vendor)

    def __hash__(self):
        return hash((self._type, self._mem, self._id, self._vendor))

    def __repr__(self):
        name = "cpu" if self._type == 0 else "cuda"
        return f"OrtDevice({name}:{self._id})"
