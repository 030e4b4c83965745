#!/usr/bin/python3
"""ggml's block-quantized tensor types in numpy, written from the block layouts
(ggml-common.h: block_q4_0 ... block_iq4_xs, block_mxfp4; the GGUF specification's type
table), independently of cinfer's C: dequantization of every type, and simple
quantizers that write valid blocks of every type (for test models; they are not
llama.cpp's error-minimizing quantizers, only correct encodings).

Dequantization computes in float32, one operation at a time in the order of each type's
formula, so it gives the same bits as cinfer's scalar reference (kernels/quant.c);
tests/test_dequant.c checks that on random blocks of every type.

    dequantize(type_name, raw_bytes, n_values) -> float32 array (n_values,)
    quantize(type_name, float array (rows, cols)) -> bytes of rows * cols / block values
    TYPES[name] = (ggml type id, values per block, bytes per block)

Layouts (offsets in bytes inside a block; f16 and u16/u32 little-endian):
    q4_0   32 / 18   d f16 @0, qs[16] @2          nibble j: value j (low), j + 16 (high)
    q4_1   32 / 20   d @0, m @2, qs[16] @4
    q5_0   32 / 22   d @0, qh u32 @2, qs @6        bit j of qh: 5th bit of value j
    q5_1   32 / 24   d @0, m @2, qh @4, qs @8
    q8_0   32 / 34   d @0, qs int8[32] @2
    q2_K  256 / 84   scales[16] @0, qs[64] @16, d @80, dmin @82
    q3_K  256 / 110  hmask[32] @0, qs[64] @32, scales[12] @96, d @108
    q4_K  256 / 144  d @0, dmin @2, scales[12] @4, qs[128] @16
    q5_K  256 / 176  d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48
    q6_K  256 / 210  ql[128] @0, qh[64] @128, scales int8[16] @192, d @208
    iq4_nl 32 / 18   d @0, qs[16] @2               nibbles index KVALUES_IQ4NL
    iq4_xs 256 / 136 d @0, scales_h u16 @2, scales_l[4] @4, qs[128] @8
    mxfp4  32 / 17   e u8 @0, qs[16] @1            nibbles index e2m1 (doubled), scale 2^(e-128)
"""

import numpy as np

F32 = np.float32

TYPES = {
    "q4_0": (2, 32, 18), "q4_1": (3, 32, 20), "q5_0": (6, 32, 22), "q5_1": (7, 32, 24),
    "q8_0": (8, 32, 34), "q2_K": (10, 256, 84), "q3_K": (11, 256, 110), "q4_K": (12, 256, 144),
    "q5_K": (13, 256, 176), "q6_K": (14, 256, 210), "iq4_nl": (20, 32, 18), "iq4_xs": (23, 256, 136),
    "mxfp4": (39, 32, 17),
}
TYPE_BY_ID = {tid: name for name, (tid, _, _) in TYPES.items()}

KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                         dtype=np.int32)
# e2m1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives, doubled to integers
KVALUES_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.int32)


def _blocks(raw, n_values, name):
    _, bv, bb = TYPES[name]
    if n_values % bv:
        raise ValueError(f"{name}: {n_values} values is not a multiple of the block of {bv}")
    nb = n_values // bv
    a = np.frombuffer(raw, dtype=np.uint8, count=nb * bb).reshape(nb, bb)
    return a


def _f16(a, off):
    """(nb, 1) float32 of the f16 at byte offset off of each block."""
    return a[:, off:off + 2].copy().view("<f2").astype(F32)


def _f(x):
    return np.asarray(x).astype(F32)


def _nibbles16(qs):
    """(nb, 16) bytes -> (nb, 32) ints: low nibbles are values 0..15, high 16..31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int32)


def _qh_bits32(qh_u32):
    """(nb,) u32 -> (nb, 32) bits: bit j is the 5th bit of value j."""
    return ((qh_u32[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int32)


def scale_min_k4(s):
    """Q4_K/Q5_K: (nb, 12) scale bytes -> (nb, 8) scales, (nb, 8) mins (6 bits each)."""
    s = s.astype(np.int32)
    sc = np.empty((s.shape[0], 8), np.int32)
    mn = np.empty((s.shape[0], 8), np.int32)
    for j in range(4):
        sc[:, j] = s[:, j] & 63
        mn[:, j] = s[:, j + 4] & 63
    for j in range(4, 8):
        sc[:, j] = (s[:, j + 4] & 0x0F) | ((s[:, j - 4] >> 6) << 4)
        mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc, mn


def scales_q3k(s):
    """Q3_K: (nb, 12) bytes -> (nb, 16) 6-bit scales (the value's scale is this - 32)."""
    s = s.astype(np.int32)
    out = np.empty((s.shape[0], 16), np.int32)
    for j in range(16):
        low = s[:, j] & 0x0F if j < 8 else s[:, j - 8] >> 4
        high = (s[:, 8 + j % 4] >> (2 * (j // 4))) & 3
        out[:, j] = low | (high << 4)
    return out


def _k_positions():
    """For the 2-bit layouts of Q2_K/Q3_K (and Q6_K's quarters): per value i of a
    super-block, (byte index within a 128-value half's 32 bytes + 32 * half, shift)."""
    i = np.arange(256)
    return 32 * (i // 128) + i % 32, 2 * ((i % 128) // 32)


def e8m0_half(e):
    """2^(e - 128) as float32 (e = 0, 1 subnormal), exactly."""
    e = e.astype(np.uint32)
    bits = np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << 23).astype(np.uint32)
    return bits.view(F32)


def dequantize(name, raw, n_values):
    with np.errstate(all="ignore"):  # infinite and NaN scales are valid inputs
        return _dequantize(name, raw, n_values)


def _dequantize(name, raw, n_values):
    a = _blocks(raw, n_values, name)
    if name == "q8_0":
        y = _f16(a, 0) * _f(a[:, 2:].view(np.int8))
    elif name == "q4_0":
        y = _f16(a, 0) * _f(_nibbles16(a[:, 2:18]) - 8)
    elif name == "q4_1":
        y = _f16(a, 0) * _f(_nibbles16(a[:, 4:20])) + _f16(a, 2)
    elif name in ("q5_0", "q5_1"):
        off = 2 if name == "q5_0" else 4
        qh = a[:, off:off + 4].copy().view("<u4")[:, 0]
        q = _nibbles16(a[:, off + 4:off + 20]) | (_qh_bits32(qh) << 4)
        if name == "q5_0":
            y = _f16(a, 0) * _f(q - 16)
        else:
            y = _f16(a, 0) * _f(q) + _f16(a, 2)
    elif name == "q2_K":
        byte_at, shift = _k_positions()
        q = (a[:, 16:80][:, byte_at].astype(np.int32) >> shift) & 3
        sc = a[:, 0:16].astype(np.int32)
        sub = np.arange(256) // 16
        dl = _f16(a, 80) * _f(sc & 0x0F)[:, sub]
        ml = _f16(a, 82) * _f(sc >> 4)[:, sub]
        y = dl * _f(q) - ml
    elif name == "q3_K":
        byte_at, shift = _k_positions()
        i = np.arange(256)
        q = (a[:, 32:96][:, byte_at].astype(np.int32) >> shift) & 3
        high = (a[:, 0:32][:, i % 32].astype(np.int32) >> (shift // 2 + 4 * (i // 128))) & 1
        sc = scales_q3k(a[:, 96:108])
        dl = _f16(a, 108) * _f(sc - 32)[:, i // 16]
        y = dl * _f(q - np.where(high == 1, 0, 4))
    elif name in ("q4_K", "q5_K"):
        i = np.arange(256)
        qs_off = 16 if name == "q4_K" else 48
        byte = a[:, qs_off:qs_off + 128][:, 32 * (i // 64) + i % 32].astype(np.int32)
        q = np.where((i // 32) % 2 == 1, byte >> 4, byte & 0x0F)
        if name == "q5_K":
            q = q | (((a[:, 16:48][:, i % 32].astype(np.int32) >> (i // 32)) & 1) << 4)
        sc, mn = scale_min_k4(a[:, 4:16])
        dl = _f16(a, 0) * _f(sc)[:, i // 32]
        ml = _f16(a, 2) * _f(mn)[:, i // 32]
        y = dl * _f(q) - ml
    elif name == "q6_K":
        i = np.arange(256)
        h, quarter, l = i // 128, (i % 128) // 32, i % 32
        low_byte = a[:, 0:128][:, 64 * h + 32 * (quarter % 2) + l].astype(np.int32)
        low = np.where(quarter < 2, low_byte & 0x0F, low_byte >> 4)
        top = (a[:, 128:192][:, 32 * h + l].astype(np.int32) >> (2 * quarter)) & 3
        sc = a[:, 192:208].view(np.int8).astype(np.int32)
        dl = _f16(a, 208) * _f(sc)[:, i // 16]
        y = dl * _f((low | (top << 4)) - 32)
    elif name == "iq4_nl":
        y = _f16(a, 0) * _f(KVALUES_IQ4NL[_nibbles16(a[:, 2:18])])
    elif name == "iq4_xs":
        i = np.arange(256)
        sub, l = i // 32, i % 32
        sh = a[:, 2:4].copy().view("<u2")[:, 0].astype(np.int32)
        sl = a[:, 4:8].astype(np.int32)
        ls = ((sl[:, sub // 2] >> (4 * (sub % 2))) & 0x0F) | (((sh[:, None] >> (2 * sub)) & 3) << 4)
        byte = a[:, 8:136][:, 16 * sub + l % 16].astype(np.int32)
        q = np.where(l < 16, byte & 0x0F, byte >> 4)
        dl = _f16(a, 0) * _f(ls - 32)
        y = dl * _f(KVALUES_IQ4NL[q])
    elif name == "mxfp4":
        y = _f(KVALUES_MXFP4[_nibbles16(a[:, 1:17])]) * e8m0_half(a[:, 0])[:, None]
    else:
        raise ValueError(f"no dequantization for {name}")
    return np.asarray(y, dtype=F32).reshape(-1)


# --------------------------------------------------------------------------------------
# quantizers: valid blocks of every type (simple rounding, not llama.cpp's search)


def _round(x):
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5)


def _to_f16(x):
    return np.asarray(x, dtype=np.float64).astype("<f2")


def _safe_div(x, d):
    d = np.asarray(d, dtype=np.float64)
    return np.divide(x, d, out=np.zeros(np.broadcast(x, d).shape), where=d != 0)


def _pack_nibbles16(q):
    """(nb, 32) 0..15 -> (nb, 16) bytes (value j low, j + 16 high)."""
    q = q.astype(np.uint8)
    return q[:, :16] | (q[:, 16:] << 4)


def _pack_scales_k4(sc, mn):
    """Q4_K/Q5_K: (nb, 8) 6-bit scales and mins -> (nb, 12) bytes."""
    sc = sc.astype(np.uint8)
    mn = mn.astype(np.uint8)
    s = np.zeros((sc.shape[0], 12), np.uint8)
    for j in range(4):
        s[:, j] = (sc[:, j] & 63) | ((sc[:, j + 4] >> 4) << 6)
        s[:, j + 4] = (mn[:, j] & 63) | ((mn[:, j + 4] >> 4) << 6)
        s[:, j + 8] = (sc[:, j + 4] & 0x0F) | ((mn[:, j + 4] & 0x0F) << 4)
    return s


def _pack_scales_q3k(sc):
    """Q3_K: (nb, 16) 6-bit scales -> (nb, 12) bytes."""
    sc = sc.astype(np.uint8)
    s = np.zeros((sc.shape[0], 12), np.uint8)
    for j in range(16):
        if j < 8:
            s[:, j] |= sc[:, j] & 0x0F
        else:
            s[:, j - 8] |= (sc[:, j] & 0x0F) << 4
        s[:, 8 + j % 4] |= ((sc[:, j] >> 4) & 3) << (2 * (j // 4))
    return s


def _pack_2bit(q):
    """(nb, 256) 0..3 -> (nb, 64) bytes in the Q2_K/Q3_K arrangement."""
    byte_at, shift = _k_positions()
    out = np.zeros((q.shape[0], 64), np.uint8)
    for i in range(256):
        out[:, byte_at[i]] |= (q[:, i].astype(np.uint8) & 3) << shift[i]
    return out


def _nearest_codebook(x, d, values):
    """Index of the codebook value nearest x / d (d broadcast), 0 where d == 0."""
    t = _safe_div(x, d)
    return np.abs(t[..., None] - values[None, None, :]).argmin(axis=-1)


def quantize(name, x):
    """x (rows, cols) -> bytes of the rows in type name (cols a multiple of its block)."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    _, bv, bb = TYPES[name]
    if x.shape[-1] % bv:
        raise ValueError(f"{name}: rows of {x.shape[-1]} values are not a multiple of {bv}")
    b = x.reshape(-1, bv)
    nb = b.shape[0]
    out = np.zeros((nb, bb), np.uint8)
    if name == "q8_0":
        d = np.abs(b).max(axis=1, keepdims=True) / 127.0
        out[:, 0:2] = _to_f16(d).view(np.uint8)
        q = np.clip(_round(_safe_div(b, _to_f16(d).astype(np.float64))), -127, 127)
        out[:, 2:] = q.astype(np.int8).view(np.uint8)
    elif name in ("q4_0", "q5_0"):
        levels = 16 if name == "q4_0" else 32
        idx = np.abs(b).argmax(axis=1)
        mx = b[np.arange(nb), idx][:, None]
        d = _to_f16(mx / -(levels // 2))
        q = np.clip(_round(_safe_div(b, d.astype(np.float64))) + levels // 2, 0, levels - 1).astype(np.int64)
        out[:, 0:2] = d.view(np.uint8)
        if name == "q4_0":
            out[:, 2:18] = _pack_nibbles16(q)
        else:
            qh = ((q >> 4) & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)
            out[:, 2:6] = qh.sum(axis=1).astype("<u4").view(np.uint8).reshape(nb, 4)
            out[:, 6:22] = _pack_nibbles16(q & 15)
    elif name in ("q4_1", "q5_1"):
        levels = 16 if name == "q4_1" else 32
        lo, hi = b.min(axis=1, keepdims=True), b.max(axis=1, keepdims=True)
        d = _to_f16((hi - lo) / (levels - 1))
        m = _to_f16(lo)
        q = np.clip(_round(_safe_div(b - m.astype(np.float64), d.astype(np.float64))), 0, levels - 1)
        q = q.astype(np.int64)
        out[:, 0:2] = d.view(np.uint8)
        out[:, 2:4] = m.view(np.uint8)
        if name == "q4_1":
            out[:, 4:20] = _pack_nibbles16(q)
        else:
            qh = ((q >> 4) & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)
            out[:, 4:8] = qh.sum(axis=1).astype("<u4").view(np.uint8).reshape(nb, 4)
            out[:, 8:24] = _pack_nibbles16(q & 15)
    elif name in ("q2_K", "q4_K", "q5_K"):
        sub_len = 16 if name == "q2_K" else 32
        qmax = {"q2_K": 3, "q4_K": 15, "q5_K": 31}[name]
        smax = 15 if name == "q2_K" else 63
        s = b.reshape(nb, -1, sub_len)
        lo = np.minimum(s.min(axis=2), 0.0)
        scale = (s.max(axis=2) - lo) / qmax
        mins = -lo
        d = _to_f16(scale.max(axis=1, keepdims=True) / smax)
        dmin = _to_f16(mins.max(axis=1, keepdims=True) / smax)
        sc = np.clip(_round(_safe_div(scale, d.astype(np.float64))), 0, smax).astype(np.int64)
        mn = np.clip(_round(_safe_div(mins, dmin.astype(np.float64))), 0, smax).astype(np.int64)
        step = d.astype(np.float64) * sc
        q = np.clip(_round(_safe_div(s + (dmin.astype(np.float64) * mn)[:, :, None], step[:, :, None])), 0, qmax)
        q = q.reshape(nb, 256).astype(np.int64)
        if name == "q2_K":
            out[:, 0:16] = (sc | (mn << 4)).astype(np.uint8)
            out[:, 16:80] = _pack_2bit(q)
            out[:, 80:82] = d.view(np.uint8)
            out[:, 82:84] = dmin.view(np.uint8)
        else:
            out[:, 0:2] = d.view(np.uint8)
            out[:, 2:4] = dmin.view(np.uint8)
            out[:, 4:16] = _pack_scales_k4(sc, mn)
            qs_off = 16 if name == "q4_K" else 48
            i = np.arange(256)
            qs = np.zeros((nb, 128), np.uint8)
            for v in range(256):
                c, l = v // 64, v % 32
                nib = (q[:, v] & 15).astype(np.uint8)
                qs[:, 32 * c + l] |= nib << 4 if (v // 32) % 2 else nib
            out[:, qs_off:qs_off + 128] = qs
            if name == "q5_K":
                qh = np.zeros((nb, 32), np.uint8)
                for v in range(256):
                    qh[:, v % 32] |= (((q[:, v] >> 4) & 1) << (v // 32)).astype(np.uint8)
                out[:, 16:48] = qh
            del i
    elif name == "q3_K":
        s = b.reshape(nb, 16, 16)
        scale = np.abs(s).max(axis=2) / 4.0
        d = _to_f16(scale.max(axis=1, keepdims=True) / 31.0)
        sc = np.clip(_round(_safe_div(scale, d.astype(np.float64))), 0, 31).astype(np.int64) + 32
        step = d.astype(np.float64) * (sc - 32)
        q = np.clip(_round(_safe_div(s, step[:, :, None])), -4, 3).reshape(nb, 256).astype(np.int64) + 4
        hmask = np.zeros((nb, 32), np.uint8)
        for v in range(256):
            bit = (v % 128) // 32 + 4 * (v // 128)
            hmask[:, v % 32] |= ((q[:, v] >> 2) << bit).astype(np.uint8)
        out[:, 0:32] = hmask
        out[:, 32:96] = _pack_2bit(q & 3)
        out[:, 96:108] = _pack_scales_q3k(sc)
        out[:, 108:110] = d.view(np.uint8)
    elif name == "q6_K":
        s = b.reshape(nb, 16, 16)
        scale = np.abs(s).max(axis=2) / 31.0
        d = _to_f16(scale.max(axis=1, keepdims=True) / 127.0)
        sc = np.clip(_round(_safe_div(scale, d.astype(np.float64))), -128, 127).astype(np.int64)
        step = d.astype(np.float64) * sc
        q = np.clip(_round(_safe_div(s, step[:, :, None])), -32, 31).reshape(nb, 256).astype(np.int64) + 32
        ql = np.zeros((nb, 128), np.uint8)
        qh = np.zeros((nb, 64), np.uint8)
        for v in range(256):
            h, quarter, l = v // 128, (v % 128) // 32, v % 32
            nib = (q[:, v] & 15).astype(np.uint8)
            ql[:, 64 * h + 32 * (quarter % 2) + l] |= nib if quarter < 2 else nib << 4
            qh[:, 32 * h + l] |= ((q[:, v] >> 4) << (2 * quarter)).astype(np.uint8)
        out[:, 0:128] = ql
        out[:, 128:192] = qh
        out[:, 192:208] = sc.astype(np.int8).view(np.uint8)
        out[:, 208:210] = d.view(np.uint8)
    elif name == "iq4_nl":
        d = _to_f16(np.abs(b).max(axis=1, keepdims=True) / 127.0)
        q = _nearest_codebook(b[:, None, :], d.astype(np.float64)[:, :, None], KVALUES_IQ4NL)[:, 0, :]
        out[:, 0:2] = d.view(np.uint8)
        out[:, 2:18] = _pack_nibbles16(q)
    elif name == "iq4_xs":
        s = b.reshape(nb, 8, 32)
        scale = np.abs(s).max(axis=2) / 127.0
        d = _to_f16(scale.max(axis=1, keepdims=True) / 31.0)
        ls = np.clip(_round(_safe_div(scale, d.astype(np.float64))), 0, 31).astype(np.int64) + 32
        step = d.astype(np.float64) * (ls - 32)
        q = _nearest_codebook(s, step[:, :, None], KVALUES_IQ4NL)  # (nb, 8, 32)
        out[:, 0:2] = d.view(np.uint8)
        sh = np.zeros(nb, np.uint32)
        for j in range(8):
            sh |= ((ls[:, j] >> 4) & 3).astype(np.uint32) << (2 * j)
            out[:, 4 + j // 2] |= ((ls[:, j] & 15) << (4 * (j % 2))).astype(np.uint8)
            out[:, 8 + 16 * j:8 + 16 * j + 16] = _pack_nibbles16(q[:, j, :])
        out[:, 2:4] = sh.astype("<u2").view(np.uint8).reshape(nb, 2)
    elif name == "mxfp4":
        amax = np.abs(b).max(axis=1)
        # the smallest e whose scale 2^(e-128) puts amax within the doubled codebook (12)
        e = np.where(amax > 0, np.ceil(np.log2(np.maximum(amax, 1e-38) / 12.0)) + 128, 0)
        e = np.clip(e, 0, 254).astype(np.int64)
        scale = e8m0_half(e.astype(np.uint8)).astype(np.float64)
        q = _nearest_codebook(b[:, None, :], scale[:, None, None], KVALUES_MXFP4)[:, 0, :]
        out[:, 0] = e.astype(np.uint8)
        out[:, 1:17] = _pack_nibbles16(q)
    else:
        raise ValueError(f"no quantizer for {name}")
    return out.tobytes()
