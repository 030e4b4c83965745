#!/usr/bin/python3
"""Checks tools/gguf_writer.py against cinfer's own GGUF reader (libcinfer, via ctypes).

    /usr/bin/python3 check_gguf_writer.py LIBCINFER_SO WORK_DIR

Writes GGUF files with every metadata value type, arrays (numbers, strings),
the default and a custom alignment, and tensors of each supported type and several
shapes; then opens them with cinfer_gguf_open (which validates every count, offset,
alignment and type) and reads everything back through the C getters. Tensor payloads
are decoded here from the raw bytes the reader points at and compared with the source
arrays: F32 exactly, F16 within half a unit in the last place, BF16 within 2^-8
relative, Q8_0 within half a quantization step (amax / 254) per 32-value block.
An array of arrays (valid GGUF, refused by llama.cpp and by cinfer) must be refused
with a message naming its key. Exits 0 when everything matches; prints each difference and exits 1 otherwise (77,
ctest's skip code, without numpy).
"""
import ctypes
import os
import sys

try:
    import numpy as np
except ImportError:
    print("check_gguf_writer: SKIP: /usr/bin/python3 has no numpy (Debian: apt-get install python3-numpy)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from gguf_writer import GGMLType, GGUFWriter, ValueType  # noqa: E402


class GgufStr(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_uint64)]

    def text(self):
        return ctypes.string_at(self.data, self.len).decode("utf-8") if self.len else ""


class GgufTensor(ctypes.Structure):
    _fields_ = [("name", GgufStr), ("type", ctypes.c_uint32), ("n_dims", ctypes.c_uint32),
                ("ne", ctypes.c_uint64 * 4), ("data", ctypes.c_void_p), ("nbytes", ctypes.c_uint64)]


class CinferError(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 1024)]


class Reader:
    """The few libcinfer GGUF calls this check needs, typed."""

    def __init__(self, lib_path):
        lib = ctypes.CDLL(lib_path)
        p, cp, u64p = ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)
        err = ctypes.POINTER(CinferError)
        sigs = {
            "cinfer_gguf_open": ([cp, ctypes.POINTER(p), err], ctypes.c_int),
            "cinfer_gguf_close": ([ctypes.POINTER(p)], None),
            "cinfer_gguf_key_count": ([p], ctypes.c_int64),
            "cinfer_gguf_get_u64": ([p, cp, u64p, err], ctypes.c_int),
            "cinfer_gguf_get_i32": ([p, cp, ctypes.POINTER(ctypes.c_int32), err], ctypes.c_int),
            "cinfer_gguf_get_f32": ([p, cp, ctypes.POINTER(ctypes.c_float), err], ctypes.c_int),
            "cinfer_gguf_get_bool": ([p, cp, ctypes.POINTER(ctypes.c_int), err], ctypes.c_int),
            "cinfer_gguf_get_str": ([p, cp, ctypes.POINTER(GgufStr), err], ctypes.c_int),
            "cinfer_gguf_get_array": ([p, cp, ctypes.POINTER(ctypes.c_int), u64p, err], ctypes.c_int),
            "cinfer_gguf_array_str": ([p, cp, ctypes.c_uint64, ctypes.POINTER(GgufStr)], ctypes.c_int),
            "cinfer_gguf_array_f32": ([p, cp, ctypes.c_uint64, ctypes.POINTER(ctypes.c_float)], ctypes.c_int),
            "cinfer_gguf_array_i64": ([p, cp, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int64)], ctypes.c_int),
            "cinfer_gguf_tensor_count": ([p], ctypes.c_uint64),
            "cinfer_gguf_find_tensor": ([p, cp], ctypes.POINTER(GgufTensor)),
        }
        for name, (args, res) in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        self.lib = lib

    def open(self, path):
        g, e = ctypes.c_void_p(), CinferError()
        if self.lib.cinfer_gguf_open(path.encode(), ctypes.byref(g), ctypes.byref(e)) != 0:
            raise AssertionError(f"cinfer_gguf_open refused {path}: {e.message.decode()}")
        return g

    def get(self, g, getter, key, ctype):
        out, e = ctype(), CinferError()
        rc = getattr(self.lib, f"cinfer_gguf_get_{getter}")(g, key.encode(), ctypes.byref(out), ctypes.byref(e))
        if rc != 0:
            raise AssertionError(f"get_{getter}({key}): {e.message.decode()}")
        return out.text() if isinstance(out, GgufStr) else out.value

    def array(self, g, key):
        etype, count, e = ctypes.c_int(), ctypes.c_uint64(), CinferError()
        if self.lib.cinfer_gguf_get_array(g, key.encode(), ctypes.byref(etype), ctypes.byref(count), ctypes.byref(e)):
            raise AssertionError(f"get_array({key}): {e.message.decode()}")
        items = []
        for i in range(count.value):
            if etype.value == ValueType.STRING:
                s = GgufStr()
                assert self.lib.cinfer_gguf_array_str(g, key.encode(), i, ctypes.byref(s)) == 0
                items.append(s.text())
            elif etype.value == ValueType.FLOAT32:
                f = ctypes.c_float()
                assert self.lib.cinfer_gguf_array_f32(g, key.encode(), i, ctypes.byref(f)) == 0
                items.append(f.value)
            else:
                v = ctypes.c_int64()
                assert self.lib.cinfer_gguf_array_i64(g, key.encode(), i, ctypes.byref(v)) == 0
                items.append(v.value)
        return ValueType(etype.value), items


def decode_tensor(t):
    """A float32 numpy array, shaped as numpy sees it, from the reader's view of a tensor."""
    n = 1
    for d in range(t.n_dims):
        n *= t.ne[d]
    raw = ctypes.string_at(t.data, t.nbytes)
    shape = tuple(reversed([t.ne[d] for d in range(t.n_dims)]))
    if t.type == GGMLType.F32:
        a = np.frombuffer(raw, "<f4", n)
    elif t.type == GGMLType.F16:
        a = np.frombuffer(raw, "<f2", n).astype(np.float32)
    elif t.type == GGMLType.BF16:
        a = (np.frombuffer(raw, "<u2", n).astype(np.uint32) << 16).view(np.float32)
    elif t.type == GGMLType.Q8_0:
        blocks = np.frombuffer(raw, [("d", "<f2"), ("qs", "i1", 32)], n // 32)
        a = (blocks["d"].astype(np.float32)[:, None] * blocks["qs"].astype(np.float32)).ravel()
    else:
        raise AssertionError(f"unexpected tensor type {t.type}")
    return a.reshape(shape)


def tolerance(ggml_type, src):
    if ggml_type == GGMLType.F32:
        return np.zeros_like(src)
    if ggml_type == GGMLType.F16:
        return np.abs(src) * 2.0**-11 + 2.0**-25
    if ggml_type == GGMLType.BF16:
        return np.abs(src) * 2.0**-8
    blocks = src.reshape(-1, 32)
    step = np.abs(blocks).max(axis=1, keepdims=True) / 127.0
    # half a step from rounding, plus the f16 rounding of the scale times |q| <= 127
    return np.broadcast_to(step * 0.5 + step * 127 * 2.0**-11, blocks.shape).reshape(src.shape) + 1e-7


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    reader = Reader(argv[0])
    os.makedirs(argv[1], exist_ok=True)
    failures = []
    rng = np.random.default_rng(7)
    tensors = {
        "f32.matrix": (rng.standard_normal((3, 64)).astype(np.float32), GGMLType.F32),
        "f16.matrix": (rng.standard_normal((5, 32)).astype(np.float32) * 100, GGMLType.F16),
        "bf16.cube": (rng.standard_normal((2, 3, 32)).astype(np.float32) * 1e-3, GGMLType.BF16),
        "q8_0.matrix": (rng.standard_normal((4, 96)).astype(np.float32), GGMLType.Q8_0),
        "q8_0.zeros": (np.zeros((1, 32), np.float32), GGMLType.Q8_0),
        "f32.vector": (np.arange(7, dtype=np.float32), GGMLType.F32),
        "f16.4d": (rng.standard_normal((2, 2, 2, 3)).astype(np.float32), GGMLType.F16),
    }
    for alignment in (None, 64):
        w = GGUFWriter()
        if alignment:
            w.add("general.alignment", alignment, ValueType.UINT32)
        w.add("general.architecture", "llama")
        w.add("t.u8", 200, ValueType.UINT8)
        w.add("t.i8", -100, ValueType.INT8)
        w.add("t.u16", 60000, ValueType.UINT16)
        w.add("t.i16", -30000, ValueType.INT16)
        w.add("t.u32", 4000000000, ValueType.UINT32)
        w.add("t.i32", -2000000000)
        w.add("t.u64", 2**63 + 5, ValueType.UINT64)
        w.add("t.i64", -2**40)
        w.add("t.f32", 0.15625)
        w.add("t.f64", 2.5, ValueType.FLOAT64)
        w.add("t.bool", True)
        w.add("t.str", "héllo ▁wörld 😀")
        w.add("t.empty", "")
        w.add("a.str", ["<unk>", "▁the", "", "Ġ"])
        w.add("a.f32", [0.0, -1.5, 3.25], elem_type=ValueType.FLOAT32)
        w.add("a.i32", [1, -2, 3])
        w.add("a.u8", [0, 255], elem_type=ValueType.UINT8)
        w.add("a.i64", [-2**40, 2**40])
        w.add("a.empty", [], elem_type=ValueType.INT32)
        for name, (array, gtype) in tensors.items():
            w.add_tensor(name, array, gtype)
        path = os.path.join(argv[1], f"writer-check-align{alignment or 32}.gguf")
        w.write(path)
        g = reader.open(path)
        try:
            def expect(what, got, want):
                if got != want:
                    failures.append(f"{path}: {what}: wrote {want!r}, reader gives {got!r}")

            expect("key count", reader.lib.cinfer_gguf_key_count(g), len(w._kv))
            expect("t.u8", reader.get(g, "u64", "t.u8", ctypes.c_uint64), 200)
            expect("t.i8", reader.get(g, "i32", "t.i8", ctypes.c_int32), -100)
            expect("t.u16", reader.get(g, "u64", "t.u16", ctypes.c_uint64), 60000)
            expect("t.i16", reader.get(g, "i32", "t.i16", ctypes.c_int32), -30000)
            expect("t.u32", reader.get(g, "u64", "t.u32", ctypes.c_uint64), 4000000000)
            expect("t.i32", reader.get(g, "i32", "t.i32", ctypes.c_int32), -2000000000)
            expect("t.u64", reader.get(g, "u64", "t.u64", ctypes.c_uint64), 2**63 + 5)
            expect("t.f32", reader.get(g, "f32", "t.f32", ctypes.c_float), 0.15625)
            expect("t.bool", reader.get(g, "bool", "t.bool", ctypes.c_int), 1)
            expect("t.str", reader.get(g, "str", "t.str", GgufStr), "héllo ▁wörld 😀")
            expect("t.empty", reader.get(g, "str", "t.empty", GgufStr), "")
            expect("a.str", reader.array(g, "a.str"), (ValueType.STRING, ["<unk>", "▁the", "", "Ġ"]))
            expect("a.f32", reader.array(g, "a.f32"), (ValueType.FLOAT32, [0.0, -1.5, 3.25]))
            expect("a.i32", reader.array(g, "a.i32"), (ValueType.INT32, [1, -2, 3]))
            expect("a.u8", reader.array(g, "a.u8"), (ValueType.UINT8, [0, 255]))
            expect("a.i64", reader.array(g, "a.i64"), (ValueType.INT64, [-2**40, 2**40]))
            expect("a.empty", reader.array(g, "a.empty"), (ValueType.INT32, []))
            expect("tensor count", reader.lib.cinfer_gguf_tensor_count(g), len(tensors))
            for name, (array, gtype) in tensors.items():
                tp = reader.lib.cinfer_gguf_find_tensor(g, name.encode())
                if not tp:
                    failures.append(f"{path}: tensor {name} not found")
                    continue
                t = tp.contents
                expect(f"{name} type", t.type, int(gtype))
                expect(f"{name} ne", [t.ne[d] for d in range(t.n_dims)], list(reversed(array.shape)))
                expect(f"{name} alignment", t.data % (alignment or 32), 0)
                got = decode_tensor(t)
                err = np.abs(got - array) - tolerance(gtype, array)
                if got.shape != array.shape or (err > 0).any():
                    failures.append(f"{path}: tensor {name} ({gtype.name}): values differ beyond rounding, "
                                    f"worst excess {float(err.max()):.3g}")
        finally:
            reader.lib.cinfer_gguf_close(ctypes.byref(g))
    # Arrays of arrays are valid GGUF, but llama.cpp's reader and cinfer's refuse them;
    # the refusal must name the key.
    w = GGUFWriter()
    w.add("a.nested", [[1, 2], [3]])
    path = os.path.join(argv[1], "writer-check-nested.gguf")
    w.write(path)
    g, e = ctypes.c_void_p(), CinferError()
    if reader.lib.cinfer_gguf_open(path.encode(), ctypes.byref(g), ctypes.byref(e)) == 0:
        reader.lib.cinfer_gguf_close(ctypes.byref(g))
        failures.append(f"{path}: an array of arrays was accepted; cinfer documents a refusal")
    elif "a.nested" not in e.message.decode():
        failures.append(f"{path}: the refusal does not name the key: {e.message.decode()}")
    for f in failures:
        print(f"check_gguf_writer: {f}")
    print(f"check_gguf_writer: 2 files, {len(tensors)} tensors each (F32, F16, BF16, Q8_0), "
          f"every metadata type: {len(failures)} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
