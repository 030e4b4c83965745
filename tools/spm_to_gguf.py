#!/usr/bin/python3
"""spm_to_gguf — converts a SentencePiece .model into a vocabulary-only GGUF file.

    /usr/bin/python3 tools/spm_to_gguf.py tokenizer.model out.gguf [--name NAME]

The GGUF holds what llama.cpp's convert_hf_to_gguf.py (_set_vocab_sentencepiece and
SpecialVocab) writes for a Llama-2-style vocabulary, and no tensors:

    general.architecture = "llama", general.name
    tokenizer.ggml.model = "llama"
    tokenizer.ggml.tokens      [str]  one piece per id
    tokenizer.ggml.scores      [f32]  the piece scores (merge priority)
    tokenizer.ggml.token_type  [i32]  1 normal, 2 unknown, 3 control, 5 unused, 6 byte
    tokenizer.ggml.bos_token_id / eos_token_id / unknown_token_id (/ padding_token_id)
    tokenizer.ggml.add_bos_token = true, add_eos_token = false
    tokenizer.ggml.add_space_prefix  the model's normalizer_spec.add_dummy_prefix

Needs Debian's python3-sentencepiece. The model's protobuf is read with the small wire
parser below, so python3-protobuf is not needed.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_writer import GGUFWriter, ValueType  # noqa: E402

# llama.cpp's SentencePieceTokenTypes / llama_token_type.
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6

# sentencepiece_model.proto field numbers.
MODEL_NORMALIZER_SPEC = 3
NORMALIZER_ADD_DUMMY_PREFIX = 3


# ---- a minimal protobuf wire-format walker ---------------------------------------------

def _varint(data, pos):
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("protobuf: varint runs past the end of the message")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def proto_fields(data):
    """Yields (field_number, wire_type, value, start, end) for each field of a message;
    value is an int for varint/fixed fields and bytes for length-delimited ones."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = int.from_bytes(data[pos:pos + 8], "little"), pos + 8
        elif wire == 2:
            n, pos = _varint(data, pos)
            value, pos = bytes(data[pos:pos + n]), pos + n
        elif wire == 5:
            value, pos = int.from_bytes(data[pos:pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"protobuf: unsupported wire type {wire} for field {field}")
        if pos > len(data):
            raise ValueError(f"protobuf: field {field} runs past the end of the message")
        yield field, wire, value, start, pos


def _encode_varint(value):
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        out.append(b | (0x80 if value else 0))
        if not value:
            return bytes(out)


def add_dummy_prefix(model_bytes):
    """normalizer_spec.add_dummy_prefix of a serialized ModelProto (proto default: true)."""
    for field, wire, value, _, _ in proto_fields(model_bytes):
        if field == MODEL_NORMALIZER_SPEC and wire == 2:
            for f2, w2, v2, _, _ in proto_fields(value):
                if f2 == NORMALIZER_ADD_DUMMY_PREFIX and w2 == 0:
                    return bool(v2)
    return True


def with_add_dummy_prefix(model_bytes, enabled):
    """A copy of the serialized ModelProto with normalizer_spec.add_dummy_prefix set."""
    out = bytearray()
    for field, wire, value, start, end in proto_fields(model_bytes):
        if field != MODEL_NORMALIZER_SPEC or wire != 2:
            out += model_bytes[start:end]
            continue
        spec = bytearray()
        for f2, w2, _, s2, e2 in proto_fields(value):
            if not (f2 == NORMALIZER_ADD_DUMMY_PREFIX and w2 == 0):
                spec += value[s2:e2]
        spec += _encode_varint(NORMALIZER_ADD_DUMMY_PREFIX << 3) + _encode_varint(int(enabled))
        out += _encode_varint(MODEL_NORMALIZER_SPEC << 3 | 2) + _encode_varint(len(spec)) + spec
    return bytes(out)


# ---- the conversion --------------------------------------------------------------------

def token_type(sp, token_id):
    """llama.cpp's classification of one piece (convert_hf_to_gguf.py, same order)."""
    if sp.IsUnknown(token_id):
        return TOKEN_UNKNOWN
    if sp.IsControl(token_id):
        return TOKEN_CONTROL
    if sp.IsUnused(token_id):
        return TOKEN_UNUSED
    if sp.IsByte(token_id):
        return TOKEN_BYTE
    return TOKEN_NORMAL


def build_vocab_gguf(model_path, name):
    import sentencepiece

    with open(model_path, "rb") as f:
        model_bytes = f.read()
    sp = sentencepiece.SentencePieceProcessor()
    sp.LoadFromSerializedProto(model_bytes)
    n = sp.GetPieceSize()
    w = GGUFWriter()
    w.add("general.architecture", "llama")
    w.add("general.name", name)
    w.add("tokenizer.ggml.model", "llama")
    w.add("tokenizer.ggml.tokens", [sp.IdToPiece(i) for i in range(n)], elem_type=ValueType.STRING)
    w.add("tokenizer.ggml.scores", [float(sp.GetScore(i)) for i in range(n)], elem_type=ValueType.FLOAT32)
    w.add("tokenizer.ggml.token_type", [token_type(sp, i) for i in range(n)], elem_type=ValueType.INT32)
    for key, token_id in (("bos_token_id", sp.bos_id()), ("eos_token_id", sp.eos_id()),
                          ("unknown_token_id", sp.unk_id()), ("padding_token_id", sp.pad_id())):
        if 0 <= token_id < n:  # sentencepiece says -1 for "none"
            w.add(f"tokenizer.ggml.{key}", token_id, ValueType.UINT32)
    w.add("tokenizer.ggml.add_bos_token", True)
    w.add("tokenizer.ggml.add_eos_token", False)
    w.add("tokenizer.ggml.add_space_prefix", add_dummy_prefix(model_bytes))
    return w, n


def main(argv):
    ap = argparse.ArgumentParser(description="SentencePiece .model -> vocabulary-only GGUF")
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--name", default=None, help="general.name (default: the model file's name)")
    args = ap.parse_args(argv)
    name = args.name or os.path.splitext(os.path.basename(args.model))[0]
    writer, n = build_vocab_gguf(args.model, name)
    writer.write(args.out)
    print(f"spm_to_gguf: {args.model}: {n} pieces -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
