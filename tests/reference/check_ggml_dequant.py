#!/usr/bin/python3
"""The numpy block formats (ggml_quants.py) against llama.cpp's own C: ggml's
to_float of every type (libggml-base.so of the llama.cpp that scripts/build-llama-cpp.sh
built, through ctypes) on the same random blocks tests/test_dequant.c uses, and
ggml's from_float_ref quantizer's output read back by ggml_quants.dequantize.

ggml is built with -O3 for the native CPU, so its compiler may fuse a multiply and an add
(Q4_1's d * q + m, the K-quants' dl * q - ml) into one rounding where the format's
formula has two: values are required equal except for such one-rounding differences
(at most 1 ulp of the larger term), and the count is printed.

usage: check_ggml_dequant.py LIBGGML_BASE_SO BLOCKS_FILE
(BLOCKS_FILE as tests/reference/make_dequant_blocks.py writes it.) Exit 0 when every type
agrees.
"""

import ctypes
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_quants  # noqa: E402


class TypeTraits(ctypes.Structure):
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
FROM_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def read_blocks(path):
    with open(path, "rb") as f:
        blob = f.read()
    assert blob[:8] == b"CINFDQ01"
    (n_types,) = struct.unpack_from("<I", blob, 8)
    at = 12
    out = {}
    for _ in range(n_types):
        n = blob[at]
        name = blob[at + 1:at + 1 + n].decode()
        at += 1 + n
        bv, bb, nb = struct.unpack_from("<III", blob, at)
        at += 12
        raw = blob[at:at + nb * bb]
        at += nb * bb
        at += nb * bv * 4
        out[name] = (raw, nb * bv)
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    lib = ctypes.CDLL(argv[1])
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    blocks = read_blocks(argv[2])
    bad = 0
    rng = np.random.default_rng(7)
    for name, (tid, bv, bb) in ggml_quants.TYPES.items():
        traits = lib.ggml_get_type_traits(tid).contents
        assert traits.type_name.decode() == name and traits.blck_size == bv and traits.type_size == bb, name
        raw, n = blocks[name]
        ours = ggml_quants.dequantize(name, raw, n).view(np.uint32)
        theirs = np.zeros(n, dtype=np.float32)
        src = ctypes.create_string_buffer(raw, len(raw))
        TO_FLOAT(traits.to_float)(ctypes.addressof(src), theirs.ctypes.data, n)
        theirs = theirs.view(np.uint32)
        nan_ours = (ours & 0x7F800000 == 0x7F800000) & (ours & 0x7FFFFF != 0)
        nan_theirs = (theirs & 0x7F800000 == 0x7F800000) & (theirs & 0x7FFFFF != 0)
        differ = (ours != theirs) & ~(nan_ours & nan_theirs)
        # a fused multiply-add in ggml's build: one ulp of the result
        a, b = ours.view(np.float32).astype(np.float64), theirs.view(np.float32).astype(np.float64)
        with np.errstate(all="ignore"):
            close = differ & ~nan_ours & ~nan_theirs & (np.abs(a - b) <= np.spacing(np.abs(a).astype(np.float32)) * 2)
        wrong = differ & ~close
        # ggml's own quantizer on random floats, read back by numpy
        x = rng.standard_normal(bv * 64).astype(np.float32)
        q = ctypes.create_string_buffer(bb * 64)
        FROM_FLOAT(traits.from_float_ref)(x.ctypes.data, ctypes.addressof(q), x.size)
        back = np.zeros(x.size, dtype=np.float32)
        TO_FLOAT(traits.to_float)(ctypes.addressof(q), back.ctypes.data, x.size)
        ours_back = ggml_quants.dequantize(name, q.raw, x.size)
        back_err = np.abs(ours_back.astype(np.float64) - back).max()
        print(f"{name:7s} {n:8d} values: {int(differ.sum())} differ from ggml's to_float "
              f"({int(close.sum())} by one rounding, {int(wrong.sum())} otherwise, "
              f"{int((nan_ours & nan_theirs).sum())} NaN in both); ggml-quantized blocks read back "
              f"within {back_err:.3g} of ggml's values")
        if wrong.any() or back_err > 1e-6:
            i = int(np.argmax(wrong))
            print(f"  first: value {i}: numpy 0x{int(ours[i]):08x}, ggml 0x{int(theirs[i]):08x}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
