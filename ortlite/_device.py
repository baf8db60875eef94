"""OrtDevice: onnxruntime's description of a device (type, memory type, vendor, id)."""

import enum

from ortlite._ortlite import InvalidArgument


class OrtDeviceVendorId(enum.IntEnum):
    """PCI vendor ids of OrtDevice.device_vendor_id(), as onnxruntime numbers them."""

    NONE = 0
    AMD = 0x1002
    NVIDIA = 0x10DE
    ARM = 0x13B5
    MICROSOFT = 0x1414
    HUAWEI = 0x19E5
    QUALCOMM = 0x5143
    INTEL = 0x8086


class OrtDevice:
    """A device as onnxruntime describes it. Make one with OrtDevice.make("cpu", 0) or
    OrtDevice.make("cuda", 0); device_type() is OrtDevice.cpu() or OrtDevice.cuda()."""

    _TYPES = {"cpu": 0, "cuda": 1, "gpu": 1}
    # The vendor a device name implies when make() is given none (onnxruntime's aliases).
    _VENDORS = {"cuda": OrtDeviceVendorId.NVIDIA}

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
        """OrtDevice.make("cpu" | "cuda" | "gpu", device_id, vendor_id=-1). Without a
        vendor_id, "cuda" is NVIDIA's and the others have none (0), as in onnxruntime."""
        if not isinstance(ort_device_name, str):
            raise TypeError(f"ort_device_name must be str, not {type(ort_device_name).__name__}")
        if ort_device_name not in OrtDevice._TYPES:
            raise InvalidArgument(f"Unsupported device type: {ort_device_name}")
        if vendor_id < 0:
            vendor_id = int(OrtDevice._VENDORS.get(ort_device_name, OrtDeviceVendorId.NONE))
        return OrtDevice(OrtDevice._TYPES[ort_device_name], OrtDevice.default_memory(), device_id,
                         int(vendor_id))

    @staticmethod
    def cpu():
        return 0

    @staticmethod
    def cuda():
        return 1

    @staticmethod
    def gpu():
        return 1

    # Device types of onnxruntime's other providers: named so that code written for them
    # reads, but an OrtDevice of these types is refused (ortlite runs none of them).
    @staticmethod
    def fpga():
        return 2

    @staticmethod
    def npu():
        return 3

    @staticmethod
    def cann():
        return 3

    @staticmethod
    def dml():
        return 4

    @staticmethod
    def webgpu():
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
