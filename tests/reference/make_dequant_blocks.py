#!/usr/bin/python3
"""Random blocks of every ggml block-quantized type and their values as the numpy
implementation (ggml_quants.py) dequantizes them, for tests/test_dequant.c to check
cinfer's C definition (kernels/quant.c) against, bit for bit.

Per type: 4096 blocks of uniformly random bytes (every bit pattern of scales and quants
can occur: subnormal, infinite and NaN f16 scales included), then blocks whose scale
fields are set to extremes (±0, the smallest and largest subnormal, the smallest
normal, ±65504, ±inf, NaN, 1; for MXFP4 the exponents 0, 1, 2, 127, 128, 254, 255)
with random quants.

usage: make_dequant_blocks.py OUT_FILE
OUT_FILE: "CINFDQ01", u32 type count, then per type: u8 name length, name, u32 block
values, u32 block bytes, u32 block count, the raw blocks, then the values as float32
(block values * block count of them), little-endian.
"""

import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_quants  # noqa: E402

SEED = 20261201
RANDOM_BLOCKS = 4096
EXTREME_F16 = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x3C00]
EXTREME_E8M0 = [0, 1, 2, 127, 128, 254, 255]
# byte offsets of each type's f16 scale fields (MXFP4: its E8M0 byte at 0)
SCALE_FIELDS = {
    "q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0], "q2_K": [80, 82],
    "q3_K": [108], "q4_K": [0, 2], "q5_K": [0, 2], "q6_K": [208], "iq4_nl": [0], "iq4_xs": [0],
    "mxfp4": [0],
}
BLOCKS_PER_EXTREME = 8


def blocks_of(name, rng):
    _, bv, bb = ggml_quants.TYPES[name]
    blocks = [rng.integers(0, 256, size=(RANDOM_BLOCKS, bb), dtype=np.uint8)]
    extremes = EXTREME_E8M0 if name == "mxfp4" else EXTREME_F16
    for off in SCALE_FIELDS[name]:
        for value in extremes:
            b = rng.integers(0, 256, size=(BLOCKS_PER_EXTREME, bb), dtype=np.uint8)
            if name == "mxfp4":
                b[:, off] = value
            else:
                b[:, off:off + 2] = np.frombuffer(struct.pack("<H", value), dtype=np.uint8)
            blocks.append(b)
    # every scale field extreme at once (both f16 fields of a type with two)
    for value in extremes:
        b = rng.integers(0, 256, size=(BLOCKS_PER_EXTREME, bb), dtype=np.uint8)
        for off in SCALE_FIELDS[name]:
            if name == "mxfp4":
                b[:, off] = value
            else:
                b[:, off:off + 2] = np.frombuffer(struct.pack("<H", value), dtype=np.uint8)
        blocks.append(b)
    return np.concatenate(blocks)


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rng = np.random.default_rng(SEED)
    names = [n for n in ggml_quants.TYPES]
    with np.errstate(all="ignore"), open(argv[1] + ".tmp", "wb") as f:
        f.write(b"CINFDQ01")
        f.write(struct.pack("<I", len(names)))
        for name in names:
            _, bv, bb = ggml_quants.TYPES[name]
            blocks = blocks_of(name, rng)
            raw = blocks.tobytes()
            values = ggml_quants.dequantize(name, raw, blocks.shape[0] * bv)
            f.write(struct.pack("<B", len(name)) + name.encode())
            f.write(struct.pack("<III", bv, bb, blocks.shape[0]))
            f.write(raw)
            f.write(values.astype("<f4").tobytes())
            print(f"{name}: {blocks.shape[0]} blocks, {np.isnan(values).sum()} NaN and "
                  f"{np.isinf(values).sum()} infinite values among {values.size}")
    os.replace(argv[1] + ".tmp", argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
