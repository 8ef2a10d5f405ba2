"""The stand-in libnrt's "device" (libnrt.c runs it): a stand-in NEFF (JSON: the kernel's source, entry point,
constant arguments, array parameters with shapes and dtypes, platform and LNC) executed with numpy.

  standin_device.py info NEFF        "lnc N", then a line per tensor: "in|out NAME DTYPE_CODE NDIM D0 D1 ..."
                                      (nrt dtype codes); the outputs' shapes come from a run on zero inputs
  standin_device.py run NEFF DIR     DIR/in_<name>.bin (the tensors' raw bytes) -> DIR/out_<name>.bin
The kernel's imports (nki, neuronxcc.nki) resolve to stubs: the source is the kernel's numpy body."""
import json
import sys
import types

import numpy as np

# nrt.h's nrt_dtype_t codes
CODES = {"float32": 0xA, "float16": 0x7, "bfloat16": 0x6, "int32": 0x8, "int8": 0x2, "uint8": 0x3}
STORAGE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16, "int32": np.int32, "int8": np.int8,
           "uint8": np.uint8}


def stubs():
    identity = lambda fn=None, **kw: fn if fn is not None else (lambda f: f)  # noqa: E731
    mods = {}
    for name in ("nki", "nki.language", "nki.isa", "neuronxcc", "neuronxcc.nki", "neuronxcc.nki.language",
                 "neuronxcc.nki.isa"):
        mods[name] = types.ModuleType(name)
    for root in ("nki", "neuronxcc.nki"):
        mods[root].jit = mods[root].baremetal = identity
        mods[root].language, mods[root].isa = mods[root + ".language"], mods[root + ".isa"]
        lang = mods[root + ".language"]
        lang.bfloat16, lang.float32, lang.float16, lang.shared_hbm = "bfloat16", "float32", "float16", "shared_hbm"
    mods["neuronxcc"].nki = mods["neuronxcc.nki"]
    return mods


def tuples(value):
    return tuple(tuples(v) for v in value) if isinstance(value, list) else value


def execute(neff, arrays):
    sys.modules.update(stubs())
    scope = {"__name__": "neff"}
    exec(compile(neff["source"], "kernel.neff", "exec"), scope)
    constants = {k: tuples(v) for k, v in neff["constants"].items()}
    out = scope[neff["entry"]](**arrays, **constants)
    return [np.asarray(o, np.float32) for o in (out if isinstance(out, (tuple, list)) else (out,))]


def to_float(raw, dtype, shape):
    array = np.frombuffer(raw, dtype=STORAGE[dtype]).reshape(shape)
    if dtype == "bfloat16":
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float32) if array.dtype.kind == "f" else array


def main():
    mode, path = sys.argv[1], sys.argv[2]
    with open(path) as fh:
        neff = json.load(fh)
    inputs = neff["inputs"]
    if mode == "info":
        outs = execute(neff, {k: np.zeros(s, np.float32) for k, (s, _) in inputs.items()})
        lines = ["lnc %d" % neff["lnc"]]
        lines += ["in %s %d %d %s" % (k, CODES[d], len(s), " ".join(map(str, s))) for k, (s, d) in inputs.items()]
        lines += ["out output_%d %d %d %s" % (i, CODES["float32"], o.ndim, " ".join(map(str, o.shape)))
                  for i, o in enumerate(outs)]
        print("\n".join(lines))
        return
    directory = sys.argv[3]
    arrays = {}
    for name, (shape, dtype) in inputs.items():
        with open("%s/in_%s.bin" % (directory, name), "rb") as fh:
            arrays[name] = to_float(fh.read(), dtype, shape)
    for i, out in enumerate(execute(neff, arrays)):
        with open("%s/out_output_%d.bin" % (directory, i), "wb") as fh:
            fh.write(np.ascontiguousarray(out, np.float32).tobytes())


if __name__ == "__main__":
    main()
