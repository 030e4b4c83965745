#!/usr/bin/python3
"""gguf_writer — a small, dependency-light writer for GGUF v3 files.

GGUF (llama.cpp's model format) is: a header (magic "GGUF", version, tensor count,
metadata count), typed key-value metadata, tensor descriptors (name, dims in ggml order,
ggml type, offset), then the tensor data, each tensor aligned to `general.alignment`
(32 bytes unless the metadata says otherwise). All numbers are little-endian.

Usage::

    from gguf_writer import GGUFWriter, ValueType, GGMLType

    w = GGUFWriter()
    w.add("general.architecture", "llama")                 # str  -> STRING
    w.add("llama.block_count", 2, ValueType.UINT32)        # explicit type
    w.add("tokenizer.ggml.add_bos_token", True)            # bool -> BOOL
    w.add("tokenizer.ggml.scores", [0.0, -1.5], elem_type=ValueType.FLOAT32)
    w.add_tensor("token_embd.weight", array, GGMLType.Q8_0)  # numpy (rows, cols)
    w.write("model.gguf")

Values without an explicit type are inferred: bool -> BOOL, int -> INT32 (INT64 when it
does not fit), float -> FLOAT32, str -> STRING, list/tuple -> ARRAY (element type
inferred from the first element unless elem_type is given). Arrays of arrays are written
as the GGUF spec describes them, but llama.cpp's reader and cinfer's refuse them.
Tensors: numpy arrays in numpy (row-major) order, the last axis the row; they are
stored as F32, F16, BF16 (round to nearest even, as ggml's fp32_to_bf16) or Q8_0 (blocks
of 32: an f16 scale amax/127 and 32 int8, as ggml's quantize_row_q8_0_ref; the row
length must be a multiple of 32). numpy is only imported when a tensor is added.

Run as a script it prints a GGUF file's metadata (keys, types, short values) and tensor
table, which is handy for checking what a converter wrote:

    /usr/bin/python3 tools/gguf_writer.py dump FILE.gguf
"""
import enum
import struct
import sys

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32


class ValueType(enum.IntEnum):
    """GGUF metadata value types (gguf.h's enum gguf_type)."""
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


class GGMLType(enum.IntEnum):
    """The ggml tensor types this writer can store (ggml's numbers)."""
    F32 = 0
    F16 = 1
    Q8_0 = 8
    BF16 = 30


_SCALAR_FORMATS = {
    ValueType.UINT8: "<B", ValueType.INT8: "<b", ValueType.UINT16: "<H", ValueType.INT16: "<h",
    ValueType.UINT32: "<I", ValueType.INT32: "<i", ValueType.FLOAT32: "<f", ValueType.BOOL: "<?",
    ValueType.UINT64: "<Q", ValueType.INT64: "<q", ValueType.FLOAT64: "<d",
}
Q8_0_BLOCK = 32


def _string_bytes(s):
    data = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(data)) + data


def infer_type(value):
    """The ValueType a Python value gets when the caller names none."""
    if isinstance(value, bool):
        return ValueType.BOOL
    if isinstance(value, int):
        return ValueType.INT32 if -2**31 <= value < 2**31 else ValueType.INT64
    if isinstance(value, float):
        return ValueType.FLOAT32
    if isinstance(value, (str, bytes)):
        return ValueType.STRING
    if isinstance(value, (list, tuple)):
        return ValueType.ARRAY
    raise TypeError(f"gguf_writer: no GGUF type for a value of Python type {type(value).__name__}")


def encode_value(value, vtype=None, elem_type=None):
    """The bytes of one metadata value (without its type tag)."""
    vtype = ValueType(infer_type(value) if vtype is None else vtype)
    if vtype == ValueType.STRING:
        return _string_bytes(value)
    if vtype == ValueType.ARRAY:
        items = list(value)
        if elem_type is None:
            elem_type = infer_type(items[0]) if items else ValueType.INT32
            if elem_type == ValueType.INT32 and any(infer_type(v) == ValueType.INT64 for v in items):
                elem_type = ValueType.INT64
        elem_type = ValueType(elem_type)
        out = [struct.pack("<IQ", elem_type, len(items))]
        if elem_type in _SCALAR_FORMATS:
            out.append(struct.pack("<" + _SCALAR_FORMATS[elem_type][1] * len(items), *items))
        else:
            for item in items:  # strings, or nested arrays (each with its own element type)
                out.append(encode_value(item, elem_type))
        return b"".join(out)
    try:
        return struct.pack(_SCALAR_FORMATS[vtype], value)
    except struct.error as e:
        raise ValueError(f"gguf_writer: value {value!r} does not fit GGUF type {vtype.name}: {e}") from None


def _bf16_bits(np, a):
    """float32 -> bfloat16 bit patterns, round to nearest even; NaN stays a quiet NaN."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(a, dtype=np.float32))
    return np.where(nan, ((u >> 16) | 64).astype(np.uint16), rounded)


def _q8_0_bytes(np, a):
    """Q8_0 blocks: per 32 values an f16 scale d = amax / 127 and int8 round(x / d)."""
    rows = np.ascontiguousarray(a, dtype=np.float32).reshape(-1, Q8_0_BLOCK)
    amax = np.abs(rows).max(axis=1)
    d = amax / 127.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    scaled = rows * inv[:, None]
    qs = (np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)).astype(np.int8)  # C roundf
    blocks = np.empty(rows.shape[0], dtype=[("d", "<f2"), ("qs", "i1", Q8_0_BLOCK)])
    blocks["d"] = d.astype(np.float16)
    blocks["qs"] = qs
    return blocks.tobytes()


def tensor_bytes(array, ggml_type):
    """The stored bytes of a numpy array as the given ggml type."""
    import numpy as np
    ggml_type = GGMLType(ggml_type)
    a = np.asarray(array)
    if ggml_type == GGMLType.F32:
        return np.ascontiguousarray(a, dtype="<f4").tobytes()
    if ggml_type == GGMLType.F16:
        return np.ascontiguousarray(a, dtype="<f2").tobytes()
    if ggml_type == GGMLType.BF16:
        return _bf16_bits(np, a).astype("<u2").tobytes()
    if a.shape[-1] % Q8_0_BLOCK != 0:
        raise ValueError(f"gguf_writer: Q8_0 needs rows that are a multiple of {Q8_0_BLOCK} "
                         f"values, found a row of {a.shape[-1]}")
    return _q8_0_bytes(np, a)


class GGUFWriter:
    """Collects metadata and tensors, then writes one GGUF v3 file."""

    def __init__(self, alignment=DEFAULT_ALIGNMENT):
        self.alignment = alignment
        self._kv = {}        # key -> (ValueType, payload bytes), insertion-ordered
        self._tensors = []   # (name, ne in ggml order, GGMLType, data bytes)

    def add(self, key, value, vtype=None, elem_type=None):
        """Adds (or replaces) one metadata key."""
        vtype = ValueType(infer_type(value) if vtype is None else vtype)
        self._kv[key] = (vtype, encode_value(value, vtype, elem_type))
        if key == "general.alignment":
            self.alignment = int(value)

    def add_tensor(self, name, array, ggml_type=GGMLType.F32):
        """Adds a tensor from a numpy array shaped (..., row); stored as ggml_type."""
        import numpy as np
        a = np.asarray(array)
        if not 1 <= a.ndim <= 4:
            raise ValueError(f"gguf_writer: tensor {name}: expected 1 to 4 dimensions, found {a.ndim}")
        if any(t[0] == name for t in self._tensors):
            raise ValueError(f"gguf_writer: tensor {name} added twice")
        ne = tuple(reversed(a.shape))  # ggml order: ne[0] is the row length
        self._tensors.append((name, ne, GGMLType(ggml_type), tensor_bytes(a, ggml_type)))

    def to_bytes(self):
        """The whole file as bytes."""
        if self.alignment <= 0 or self.alignment % 8:
            raise ValueError(f"gguf_writer: alignment must be a positive multiple of 8, found {self.alignment}")
        out = bytearray(GGUF_MAGIC)
        out += struct.pack("<IQQ", GGUF_VERSION, len(self._tensors), len(self._kv))
        for key, (vtype, payload) in self._kv.items():
            out += _string_bytes(key) + struct.pack("<I", vtype) + payload
        offset = 0
        offsets = []
        for name, ne, gtype, data in self._tensors:
            offsets.append(offset)
            out += _string_bytes(name) + struct.pack("<I", len(ne))
            out += struct.pack("<" + "Q" * len(ne), *ne)
            out += struct.pack("<IQ", gtype, offset)
            offset += _pad(len(data), self.alignment)
        out += bytes(_pad(len(out), self.alignment) - len(out))
        for (name, ne, gtype, data), off in zip(self._tensors, offsets):
            out += data + bytes(_pad(len(data), self.alignment) - len(data))
        return bytes(out)

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.to_bytes())


def _pad(n, alignment):
    return (n + alignment - 1) // alignment * alignment


# ---- reading back, for the dump command and for tests of the writer -------------------

def read_metadata(data):
    """Parses a GGUF file's header: (version, {key: value}, [(name, ne, type, offset)]).

    Strings come back as str, arrays as lists; tensor data is not read."""
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return vals

    def string():
        nonlocal pos
        (n,) = take("<Q")
        s = data[pos:pos + n]
        if len(s) != n:
            raise ValueError("gguf: string runs past the end of the file")
        pos += n
        return s.decode("utf-8", errors="replace")

    def value(vtype):
        if vtype == ValueType.STRING:
            return string()
        if vtype == ValueType.ARRAY:
            etype, n = take("<IQ")
            return [value(ValueType(etype)) for _ in range(n)]
        return take(_SCALAR_FORMATS[ValueType(vtype)])[0]

    if data[:4] != GGUF_MAGIC:
        raise ValueError(f"gguf: expected magic GGUF, found {data[:4]!r}")
    pos = len(GGUF_MAGIC)
    version, n_tensors, n_kv = take("<IQQ")
    kv = {}
    for _ in range(n_kv):
        key = string()
        (vtype,) = take("<I")
        kv[key] = value(ValueType(vtype))
    tensors = []
    for _ in range(n_tensors):
        name = string()
        (n_dims,) = take("<I")
        ne = take("<" + "Q" * n_dims)
        gtype, offset = take("<IQ")
        tensors.append((name, ne, gtype, offset))
    return version, kv, tensors


def _dump(path):
    with open(path, "rb") as f:
        version, kv, tensors = read_metadata(f.read())
    print(f"{path}: GGUF v{version}, {len(kv)} keys, {len(tensors)} tensors")
    for key, val in kv.items():
        shown = f"[{len(val)} items] {val[:5]!r}..." if isinstance(val, list) else repr(val)
        print(f"  {key} = {shown[:160]}")
    for name, ne, gtype, offset in tensors:
        print(f"  tensor {name} ne={list(ne)} type={GGMLType(gtype).name if gtype in GGMLType._value2member_map_ else gtype} offset={offset}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        _dump(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)
