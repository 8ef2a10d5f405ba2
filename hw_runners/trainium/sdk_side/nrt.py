"""The Neuron runtime's C library (libnrt) through ctypes, for hosts without nrtpy (Neuron SDK <= 2.31): load a
NEFF on the NeuronCore this process may use, write its inputs, execute it, read its outputs. Copied into the
evaluation's directory as harness_nrt.py; Python 3.8, the standard library and numpy only.

Every declaration below is AWS's published header (src/libnrt/include/nrt/nrt.h and nrt_experimental.h in
github.com/aws-neuron/aws-neuron-sdk; https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/
nrt.html): nrt_init(framework, fw_version, fal_version); nrt_load(neff, size, vnc, vnc_count, &model) with
vnc_count "DEPRECATED: always use -1"; nrt_get_model_tensor_info / nrt_free_model_tensor_info; tensors allocated
on the model's VNC, gathered by name into an input and an output tensor set; nrt_execute(model, in, out).
The data-type codes are the header's (NRT_DTYPE_FLOAT32 is 0xA, not a running count).
"""
import ctypes

import numpy as np

NRT_SUCCESS = 0
NRT_FRAMEWORK_TYPE_NO_FW = 1
NRT_TENSOR_PLACEMENT_DEVICE = 0
NRT_TENSOR_USAGE_INPUT = 0
NRT_TENSOR_NAME_MAX = 256
# nrt_dtype_t -> (numpy dtype of its bytes, the name problem files use); bf16 travels as its 16-bit patterns
DTYPES = {0xA: (np.float32, "float32"), 0x7: (np.float16, "float16"), 0x6: (np.uint16, "bfloat16"),
          0x8: (np.int32, "int32"), 0x2: (np.int8, "int8"), 0x3: (np.uint8, "uint8"), 0x4: (np.int16, "int16"),
          0x5: (np.uint16, "uint16"), 0x9: (np.uint32, "uint32"), 0xC: (np.int64, "int64"),
          0x1: (np.uint64, "uint64"), 0xE: (np.uint8, "float8_e4m3"), 0xF: (np.uint8, "float8_e5m2")}


class NrtError(RuntimeError):
    pass


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * NRT_TENSOR_NAME_MAX), ("usage", ctypes.c_int), ("size", ctypes.c_size_t),
                ("dtype", ctypes.c_int), ("shape", ctypes.POINTER(ctypes.c_uint32)), ("ndim", ctypes.c_uint32)]


class _TensorInfoArray(ctypes.Structure):
    _fields_ = [("tensor_count", ctypes.c_uint64), ("tensor_array", _TensorInfo * 0)]


class Tensor(object):
    """One of the NEFF's inputs or outputs: its name, bytes, dtype code and shape."""

    def __init__(self, info):
        self.name = info.name.decode()
        self.input = info.usage == NRT_TENSOR_USAGE_INPUT
        self.size, self.dtype_code = int(info.size), int(info.dtype)
        self.shape = tuple(int(info.shape[i]) for i in range(info.ndim)) if info.shape else ()
        self.handle = ctypes.c_void_p()

    @property
    def dtype_name(self):
        return DTYPES.get(self.dtype_code, (None, "nrt dtype 0x%x" % self.dtype_code))[1]

    def numpy(self, raw):
        np_dtype = DTYPES.get(self.dtype_code, (np.uint8,))[0]
        array = np.frombuffer(raw, dtype=np_dtype)
        n = int(np.prod(self.shape)) if self.shape else array.size
        return array[:n].reshape(self.shape or (array.size,)).copy()


def _bind(lib):
    c_int, c_size, vp = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
    sigs = {"nrt_init": (c_int, [c_int, ctypes.c_char_p, ctypes.c_char_p]),
            "nrt_load": (c_int, [vp, c_size, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(vp)]),
            "nrt_unload": (c_int, [vp]),
            "nrt_get_model_tensor_info": (c_int, [vp, ctypes.POINTER(ctypes.POINTER(_TensorInfoArray))]),
            "nrt_free_model_tensor_info": (c_int, [ctypes.POINTER(_TensorInfoArray)]),
            "nrt_allocate_tensor_set": (c_int, [ctypes.POINTER(vp)]),
            "nrt_destroy_tensor_set": (None, [ctypes.POINTER(vp)]),
            "nrt_tensor_allocate": (c_int, [c_int, c_int, c_size, ctypes.c_char_p, ctypes.POINTER(vp)]),
            "nrt_tensor_free": (None, [ctypes.POINTER(vp)]),
            "nrt_tensor_write": (c_int, [vp, vp, c_size, c_size]),
            "nrt_tensor_read": (c_int, [vp, vp, c_size, c_size]),
            "nrt_add_tensor_to_tensor_set": (c_int, [vp, ctypes.c_char_p, vp]),
            "nrt_execute": (c_int, [vp, vp, vp]),
            "nrt_close": (None, [])}
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class Model(object):
    """A NEFF loaded on VNC 0 of the cores NEURON_RT_VISIBLE_CORES gives this process."""

    def __init__(self, libnrt, neff_path):
        self.lib = _bind(ctypes.CDLL(libnrt))
        self._check("nrt_init", self.lib.nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, b"", b""))
        with open(neff_path, "rb") as fh:
            self._neff = fh.read()
        self.model = ctypes.c_void_p()
        self._check("nrt_load", self.lib.nrt_load(self._neff, len(self._neff), 0, -1, ctypes.byref(self.model)))
        info = ctypes.POINTER(_TensorInfoArray)()
        self._check("nrt_get_model_tensor_info", self.lib.nrt_get_model_tensor_info(self.model, ctypes.byref(info)))
        try:
            count = info.contents.tensor_count
            array = ctypes.cast(ctypes.addressof(info.contents.tensor_array), ctypes.POINTER(_TensorInfo))
            self.tensors = [Tensor(array[i]) for i in range(count)]
        finally:
            self.lib.nrt_free_model_tensor_info(info)
        self.inputs = [t for t in self.tensors if t.input]
        self.outputs = [t for t in self.tensors if not t.input]
        self.sets = {}
        for kind, tensors in (("in", self.inputs), ("out", self.outputs)):
            tset = ctypes.c_void_p()
            self._check("nrt_allocate_tensor_set", self.lib.nrt_allocate_tensor_set(ctypes.byref(tset)))
            self.sets[kind] = tset
            for t in tensors:
                self._check("nrt_tensor_allocate", self.lib.nrt_tensor_allocate(
                    NRT_TENSOR_PLACEMENT_DEVICE, 0, t.size, t.name.encode(), ctypes.byref(t.handle)))
                self._check("nrt_add_tensor_to_tensor_set",
                            self.lib.nrt_add_tensor_to_tensor_set(tset, t.name.encode(), t.handle))

    def _check(self, call, status):
        if status != NRT_SUCCESS:
            raise NrtError("%s returned NRT status %d" % (call, status))

    def write(self, tensor, array):
        data = np.ascontiguousarray(array)
        if data.nbytes != tensor.size:
            raise NrtError("input %s takes %d bytes, not %d (%s %s)" % (tensor.name, tensor.size, data.nbytes,
                                                                      data.shape, data.dtype))
        self._check("nrt_tensor_write", self.lib.nrt_tensor_write(tensor.handle, data.ctypes.data, 0, data.nbytes))

    def execute(self):
        self._check("nrt_execute", self.lib.nrt_execute(self.model, self.sets["in"], self.sets["out"]))

    def read(self, tensor):
        buf = ctypes.create_string_buffer(tensor.size)
        self._check("nrt_tensor_read", self.lib.nrt_tensor_read(tensor.handle, buf, 0, tensor.size))
        return tensor.numpy(buf.raw)

    def close(self):
        for t in self.tensors:
            if t.handle:
                self.lib.nrt_tensor_free(ctypes.byref(t.handle))
        for tset in self.sets.values():
            self.lib.nrt_destroy_tensor_set(ctypes.byref(tset))
        self.lib.nrt_unload(self.model)
        self.lib.nrt_close()
