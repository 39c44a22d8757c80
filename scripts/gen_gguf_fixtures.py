#!/usr/bin/python3
"""Writes the GGUF test fixtures: malformed files with their expected errors, and fuzz seeds.

    scripts/gen_gguf_fixtures.py            rewrite tests/data/gguf-malformed/ and fuzz/corpus/gguf/
    scripts/gen_gguf_fixtures.py --out DIR  write both under DIR instead (the freshness test does)

The encoder below is written from the GGUF specification, independently of src/gguf/, and
records where every field lands, so each expected byte offset in the manifest is computed from
the layout rather than typed by hand. Output is deterministic; commit what it writes.

manifest.tsv: one line per malformed file, "FILE<TAB>EXPECTED", where EXPECTED is a substring
of the one-line error headroom must give ("offset N: what is wrong").
"""
import argparse
import os
import struct
import sys

# Value types (GGUF specification).
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
# Tensor types (ggml ids) used here: name -> (id, values per block, bytes per block).
TENSOR_TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34),
    "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210), "I8": (24, 1, 1), "BF16": (30, 1, 2),
}
SCALAR_FORMATS = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
                  BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


# ---- values: (type, encoded body) -------------------------------------------------------------

def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def scalar(t, v):
    return (t, struct.pack(SCALAR_FORMATS[t], v))


def string(s):
    return (STRING, gstr(s))


def array(elem, items):
    """items: raw values for scalar element types, str for STRING, (type, body) for ARRAY."""
    body = struct.pack("<IQ", elem, len(items))
    for item in items:
        if elem == STRING:
            body += gstr(item)
        elif elem == ARRAY:
            body += item[1]  # a nested array is written without a type tag: header + items
        else:
            body += struct.pack(SCALAR_FORMATS[elem], item)
    return (ARRAY, body)


# ---- files ------------------------------------------------------------------------------------

class Gguf:
    """A GGUF file under construction. build() returns (bytes, marks): marks name field offsets."""

    def __init__(self, version=3, alignment=32):
        self.version = version
        self.alignment = alignment  # the layout alignment (write general.alignment separately)
        self.kvs = []  # (key bytes, type id, body bytes)
        # dicts: name, dims, type id, data bytes, offset (None = next), and optionally
        # header_offset: written in the tensor info only, the data is not placed there.
        self.tensors = []
        self.n_tensors = None  # override the written counts
        self.n_kv = None
        self.pad_end = True

    def kv(self, key, value):
        self.kvs.append((key.encode() if isinstance(key, str) else key, value[0], value[1]))
        return self

    def tensor(self, name, type_name, dims, offset=None, data=None, raw_type=None):
        tid, block, block_bytes = TENSOR_TYPES[type_name]
        n = 1
        for d in dims:
            n *= d
        if data is None:
            size = n // block * block_bytes if dims[0] % block == 0 and n < 1 << 20 else 0
            data = bytes((i * 7 + len(self.tensors)) & 0xFF for i in range(size))
        self.tensors.append(dict(name=name.encode() if isinstance(name, str) else name,
                                 dims=list(dims), type=tid if raw_type is None else raw_type,
                                 data=data, offset=offset))
        return self

    def build(self):
        marks = {}
        out = bytearray(b"GGUF")
        marks["version"] = len(out)
        out += struct.pack("<I", self.version)
        marks["n_tensors"] = len(out)
        out += struct.pack("<Q", len(self.tensors) if self.n_tensors is None else self.n_tensors)
        marks["n_kv"] = len(out)
        out += struct.pack("<Q", len(self.kvs) if self.n_kv is None else self.n_kv)
        for i, (key, t, body) in enumerate(self.kvs):
            name = key.decode(errors="replace")
            marks.setdefault(f"kv:{name}", len(out))
            marks[f"kv#{i}"] = len(out)
            out += gstr(key)
            marks.setdefault(f"kv:{name}:type", len(out))
            out += struct.pack("<I", t)
            marks.setdefault(f"kv:{name}:value", len(out))
            marks[f"kv#{i}:value"] = len(out)
            out += body
        offsets = []
        nxt = 0
        for t in self.tensors:
            off = t["offset"] if t["offset"] is not None else align(nxt, self.alignment)
            offsets.append(off)
            nxt = max(nxt, off + len(t["data"]))
        for i, (t, off) in enumerate(zip(self.tensors, offsets)):
            name = t["name"].decode(errors="replace")
            marks.setdefault(f"ti:{name}", len(out))
            marks[f"ti#{i}"] = len(out)
            out += gstr(t["name"])
            marks.setdefault(f"ti:{name}:n_dims", len(out))
            out += struct.pack("<I", len(t["dims"]))
            marks.setdefault(f"ti:{name}:dims", len(out))
            for d in t["dims"]:
                out += struct.pack("<Q", d)
            marks.setdefault(f"ti:{name}:type", len(out))
            out += struct.pack("<I", t["type"])
            marks.setdefault(f"ti:{name}:offset", len(out))
            out += struct.pack("<Q", t.get("header_offset", off))
        marks["header_end"] = len(out)
        if self.tensors:
            out += bytes(align(len(out), self.alignment) - len(out))
        marks["data"] = len(out)
        data_start = len(out)
        if self.tensors:
            body = bytearray(align(nxt, self.alignment) if self.pad_end else nxt)
            for t, off in zip(self.tensors, offsets):
                body[off:off + len(t["data"])] = t["data"]
                marks[f"td:{t['name'].decode(errors='replace')}"] = data_start + off
            out += body
        return bytes(out), marks


def align(x, a):
    return (x + a - 1) // a * a


def tokens(n):
    return [f"<token-number-{i:05d}>" for i in range(n)]  # 20 bytes each


def base(version=3):
    """The small valid llama-like file most malformed cases start from."""
    g = Gguf(version)
    g.kv("general.architecture", string("llama"))
    g.kv("general.name", string("gguf-fixture"))
    g.kv("llama.block_count", scalar(U32, 1))
    g.kv("llama.attention.layer_norm_rms_epsilon", scalar(F32, 1e-5))
    g.kv("tokenizer.ggml.add_bos_token", scalar(BOOL, 1))
    g.kv("tokenizer.ggml.scores", array(F32, [-float(i) for i in range(6)]))
    g.kv("tokenizer.ggml.tokens", array(STRING, tokens(6)))
    g.kv("llama.context_length", scalar(U32, 128))
    g.tensor("token_embd.weight", "F32", [8, 5])
    g.tensor("blk.0.attn_norm.weight", "F32", [8])
    g.tensor("blk.0.ffn_down.weight", "Q8_0", [32, 2])
    return g


# ---- malformed cases --------------------------------------------------------------------------

def replace_kv(g, key, value):
    g.kvs = [(k, *value) if k == key.encode() else (k, t, b) for k, t, b in g.kvs]
    return g


def malformed_cases():
    """Yields (file name, bytes, expected error substring)."""
    good, m = base().build()
    assert m["header_end"] % 32 not in (0, 31), "the base must need 2+ bytes of padding"
    size = len(good)

    def cut(n):
        return good[:n]

    def patch(data, at, fmt, v):
        b = bytearray(data)
        struct.pack_into(fmt, b, at, v)
        return bytes(b)

    # Truncated at every section boundary.
    yield "trunc-empty.gguf", b"", "offset 0: the GGUF magic runs past the end of the file (0 bytes)"
    yield "trunc-magic.gguf", cut(2), "offset 0: the GGUF magic runs past the end of the file (2 bytes)"
    yield "trunc-version.gguf", cut(6), "offset 4: the version runs past the end of the file (6 bytes)"
    yield ("trunc-tensor-count.gguf", cut(12),
           "offset 8: the tensor count runs past the end of the file (12 bytes)")
    yield ("trunc-kv-count.gguf", cut(20),
           "offset 16: the metadata count runs past the end of the file (20 bytes)")
    last = f"kv#{len(base().kvs) - 1}"
    yield ("trunc-key-length.gguf", cut(m[last] + 3),
           f"offset {m[last]}: key of metadata entry 7 runs past the end of the file")
    yield ("trunc-key.gguf", cut(m[last] + 8 + 5),
           f"offset {m[last]}: key of metadata entry 7 claims 20 bytes but only 5 remain")
    yield ("trunc-value-type.gguf", cut(m["kv:llama.context_length:type"] + 2),
           f"offset {m['kv:llama.context_length:type']}: value type of 'llama.context_length' "
           "runs past the end of the file")
    yield ("trunc-value.gguf", cut(m["kv:llama.context_length:value"] + 1),
           f"offset {m['kv:llama.context_length:value']}: value of 'llama.context_length' runs "
           "past the end of the file")
    at = m["kv:tokenizer.ggml.tokens:value"] + 12 + 3 * (8 + 20)  # element 3 of the token array
    yield ("trunc-string-array.gguf", cut(at + 8 + 10),
           f"offset {at}: element 3 of 'tokenizer.ggml.tokens' claims 20 bytes but only 10 remain")
    ti = m["ti:blk.0.ffn_down.weight:dims"]
    yield ("trunc-tensor-info.gguf", cut(ti + 12),
           f"offset {ti + 8}: shape of tensor 'blk.0.ffn_down.weight' runs past the end of the file")
    yield ("trunc-padding.gguf", cut(m["header_end"] + 1),
           f"offset {m['header_end']}: the alignment padding before the tensor data runs past the "
           "end of the file")
    td = m["td:blk.0.ffn_down.weight"]
    yield ("trunc-tensor-data.gguf", cut(td + 30),
           f"offset {m['ti:blk.0.ffn_down.weight']}: tensor 'blk.0.ffn_down.weight' data (68 bytes "
           f"at offset {td - m['data']} of the data section, which starts at {m['data']}) ends past "
           f"the end of the file ({td + 30} bytes)")

    # Header.
    yield "bad-magic.gguf", b"GGML" + good[4:], "offset 0: bad magic (expected 'GGUF')"
    yield ("version-1.gguf", patch(good, 4, "<I", 1),
           "offset 4: GGUF version 1 is not supported")
    yield ("version-99.gguf", patch(good, 4, "<I", 99),
           "offset 4: unsupported GGUF version 99 (headroom reads 2 and 3)")
    yield ("version-big-endian.gguf", patch(good, 4, ">I", 3),
           "offset 4: GGUF version reads as 50331648 — this is a big-endian file")

    # Absurd counts.
    yield ("kv-count-absurd.gguf", patch(good, 16, "<Q", 1 << 62),
           f"offset 16: metadata count {1 << 62} is impossible for a file of {size} bytes")
    yield ("kv-count-overflow.gguf", patch(good, 16, "<Q", (1 << 64) - 1),
           f"offset 16: metadata count {(1 << 64) - 1} is impossible")
    yield ("tensor-count-absurd.gguf", patch(good, 8, "<Q", 10**12),
           f"offset 8: tensor count {10**12} is impossible for a file of {size} bytes")
    rest = size - m["ti#0"]
    n = rest // 33
    yield ("tensor-count-exceeds-rest.gguf", patch(good, 8, "<Q", n + 1),
           f"offset 8: tensor count {n + 1} is impossible: {n + 1} tensor infos need at least "
           f"{(n + 1) * 33} bytes but only {rest} remain after the metadata")
    at = m["kv:tokenizer.ggml.tokens:value"]
    yield ("array-count-absurd.gguf", patch(good, at + 4, "<Q", 1 << 60),
           f"offset {at}: array 'tokenizer.ggml.tokens' claims {1 << 60} string elements but only "
           f"{size - at - 12} bytes are left for it")
    at = m["kv:tokenizer.ggml.scores:value"]
    yield ("array-count-overflow.gguf", patch(good, at + 4, "<Q", 1 << 63),
           f"offset {at}: array 'tokenizer.ggml.scores' claims {1 << 63} f32 elements")

    # Oversized string lengths.
    at = m["kv#0"]
    yield ("key-length-absurd.gguf", patch(good, at, "<Q", 1 << 63),
           f"offset {at}: key of metadata entry 0 claims {1 << 63} bytes but only "
           f"{size - at - 8} remain")
    at = m["kv:general.name:value"]
    yield ("string-length-absurd.gguf", patch(good, at, "<Q", (1 << 64) - 1),
           f"offset {at}: string value of 'general.name' claims {(1 << 64) - 1} bytes")
    at = m["ti#0"]
    yield ("tensor-name-length-absurd.gguf", patch(good, at, "<Q", 1 << 40),
           f"offset {at}: name of tensor 0 claims {1 << 40} bytes")

    # Unknown types.
    at = m["kv:llama.block_count:type"]
    yield ("value-type-unknown.gguf", patch(good, at, "<I", 13),
           f"offset {at}: metadata 'llama.block_count' has unknown value type 13")
    at = m["kv:tokenizer.ggml.scores:value"]
    yield ("array-type-unknown.gguf", patch(good, at, "<I", 0xFFFFFFFF),
           f"offset {at}: array 'tokenizer.ggml.scores' has unknown element type 4294967295")
    at = m["ti:blk.0.attn_norm.weight:type"]
    yield ("tensor-type-unknown.gguf", patch(good, at, "<I", 4),
           f"offset {at}: tensor 'blk.0.attn_norm.weight' has unknown type id 4")
    yield ("tensor-type-absurd.gguf", patch(good, at, "<I", 1000),
           f"offset {at}: tensor 'blk.0.attn_norm.weight' has unknown type id 1000")

    # general.alignment.
    for name, value, expected in [
            ("alignment-0.gguf", scalar(U32, 0), "general.alignment is 0 (must be a power of two"),
            ("alignment-3.gguf", scalar(U32, 3), "general.alignment is 3 (must be a power of two"),
            ("alignment-huge.gguf", scalar(U32, 1 << 21), f"general.alignment is {1 << 21}"),
            ("alignment-string.gguf", string("32"), "general.alignment is a string (must be u32)"),
            ("alignment-u64.gguf", scalar(U64, 32), "general.alignment is a u64 (must be u32)")]:
        g = base()
        g.kvs.insert(1, (b"general.alignment", *value))
        data, mm = g.build()
        yield name, data, f"offset {mm['kv:general.alignment']}: {expected}"

    # Tensor placement.
    g = base()
    g.tensors[1]["offset"] = 176
    data, mm = g.build()
    yield ("tensor-misaligned.gguf", data,
           f"offset {mm['ti:blk.0.attn_norm.weight']}: tensor 'blk.0.attn_norm.weight' data offset "
           "176 is not a multiple of the alignment 32")
    g = base()
    g.tensors[1]["offset"] = 128
    data, mm = g.build()
    yield ("tensor-overlap.gguf", data,
           f"offset {mm['ti:blk.0.attn_norm.weight']}: tensor 'blk.0.attn_norm.weight' data "
           "overlaps tensor 'token_embd.weight'")
    # An empty tensor between two overlapping ones must not hide the overlap.
    g = base()
    g.tensors.insert(1, dict(name=b"empty.weight", dims=[0], type=0, data=b"", offset=64))
    g.tensors[2]["offset"] = 128
    data, mm = g.build()
    yield ("tensor-overlap-across-empty.gguf", data,
           f"offset {mm['ti:blk.0.attn_norm.weight']}: tensor 'blk.0.attn_norm.weight' data "
           "overlaps tensor 'token_embd.weight'")
    g = base()
    g.tensors[2]["header_offset"] = 1 << 20
    data, mm = g.build()
    yield ("tensor-past-end.gguf", data,
           f"offset {mm['ti:blk.0.ffn_down.weight']}: tensor 'blk.0.ffn_down.weight' data (68 bytes "
           f"at offset {1 << 20} of the data section, which starts at {mm['data']}) ends past the "
           f"end of the file ({len(data)} bytes)")
    g = base()
    g.tensors[2]["header_offset"] = (1 << 64) - 32
    data, mm = g.build()
    yield ("tensor-offset-overflow.gguf", data,
           f"offset {mm['ti:blk.0.ffn_down.weight']}: tensor 'blk.0.ffn_down.weight' data (68 bytes "
           f"at offset {(1 << 64) - 32} of the data section")

    # Duplicates and names.
    g = base()
    g.kv("llama.block_count", scalar(U32, 2))
    data, mm = g.build()
    yield ("duplicate-key.gguf", data,
           f"offset {mm['kv#8']}: duplicate metadata key 'llama.block_count'")
    g = base()
    g.tensor("token_embd.weight", "F32", [8])
    data, mm = g.build()
    yield ("duplicate-tensor.gguf", data,
           f"offset {mm['ti#3']}: duplicate tensor name 'token_embd.weight'")
    g = base()
    g.kvs.insert(0, (b"", STRING, gstr("x")))
    data, mm = g.build()
    yield "key-empty.gguf", data, "offset 24: metadata entry 0 has an empty key"
    g = base()
    g.tensors[0]["name"] = b""
    data, mm = g.build()
    yield "tensor-name-empty.gguf", data, f"offset {mm['ti#0']}: tensor 0 has an empty name"
    g = base()
    g.tensors[1]["name"] = b"n" * 64
    data, mm = g.build()
    yield ("tensor-name-too-long.gguf", data,
           f"offset {mm['ti#1']}: tensor 1 name '{'n' * 64}' is longer than 63 bytes")
    # A hostile key must not break the error onto two lines or reach the terminal raw.
    g = base()
    g.kvs.insert(2, (b"evil\nkey\x1b[2J", 13, b""))
    data, mm = g.build()
    yield ("key-control-chars.gguf", data,
           f"offset {mm['kv#2:value'] - 4}: metadata 'evil\\x0akey\\x1b[2J' has unknown value "
           "type 13")

    # Shapes.
    def bad_shape(name, dims, type_name, expected_fn):
        g = base()
        g.tensors[1] = dict(name=b"blk.0.attn_norm.weight", dims=dims,
                            type=TENSOR_TYPES[type_name][0], data=b"", offset=None)
        data, mm = g.build()
        return name, data, expected_fn(mm)

    yield bad_shape("dims-0.gguf", [], "F32", lambda mm:
                    f"offset {mm['ti:blk.0.attn_norm.weight:n_dims']}: tensor "
                    "'blk.0.attn_norm.weight' has 0 dimensions (must be 1 to 4)")
    yield bad_shape("dims-5.gguf", [1, 1, 1, 1, 1], "F32", lambda mm:
                    f"offset {mm['ti:blk.0.attn_norm.weight:n_dims']}: tensor "
                    "'blk.0.attn_norm.weight' has 5 dimensions (must be 1 to 4)")
    yield bad_shape("dim-negative.gguf", [8, (1 << 64) - 1], "F32", lambda mm:
                    f"offset {mm['ti:blk.0.attn_norm.weight:dims'] + 8}: tensor "
                    f"'blk.0.attn_norm.weight' dimension 1 is {(1 << 64) - 1} (negative or absurd)")
    yield bad_shape("dim-overflow.gguf", [1 << 32, 1 << 32], "F32", lambda mm:
                    f"offset {mm['ti:blk.0.attn_norm.weight']}: tensor 'blk.0.attn_norm.weight' "
                    f"shape [{1 << 32}, {1 << 32}, 1, 1] overflows 64 bits")
    yield bad_shape("dim-overflow-with-zero.gguf", [0, 1 << 40, 1 << 40], "F32", lambda mm:
                    f"offset {mm['ti:blk.0.attn_norm.weight']}: tensor 'blk.0.attn_norm.weight' "
                    f"shape [0, {1 << 40}, {1 << 40}, 1] overflows 64 bits")
    yield bad_shape("byte-size-overflow.gguf", [1 << 31, 1 << 31], "F32", lambda mm:
                    f"offset {mm['ti:blk.0.attn_norm.weight']}: tensor 'blk.0.attn_norm.weight' "
                    "byte size overflows 64 bits")
    yield bad_shape("row-not-block-multiple.gguf", [48, 2], "Q8_0", lambda mm:
                    f"offset {mm['ti:blk.0.attn_norm.weight']}: tensor 'blk.0.attn_norm.weight' "
                    "row length 48 is not a multiple of the Q8_0 block size 32")

    # Values.
    nested = array(U8, [1, 2])
    for _ in range(8):
        nested = array(ARRAY, [nested])
    g = base()
    g.kv("test.nested", nested)
    data, mm = g.build()
    # Each level adds a 12-byte header; the 9th level (depth 8) is refused where it starts.
    yield ("array-nested-too-deep.gguf", data,
           f"offset {mm['kv:test.nested:value'] + 8 * 12}: array 'test.nested' is nested more than "
           "8 levels deep")
    # A nested array may only claim what its later siblings leave: here the first of two
    # elements claims every remaining byte.
    g = Gguf()
    g.kv("test.nested", (ARRAY, struct.pack("<IQ", ARRAY, 2) + struct.pack("<IQ", U8, 40) +
                         bytes(40)))
    data, mm = g.build()
    yield ("array-nested-count-exceeds-siblings.gguf", data,
           f"offset {mm['kv:test.nested:value'] + 12}: array 'test.nested' claims 40 u8 elements "
           "but only 28 bytes are left for it")
    at = m["kv:tokenizer.ggml.add_bos_token:value"]
    yield ("bool-2.gguf", patch(good, at, "<B", 2),
           f"offset {at}: bool value of 'tokenizer.ggml.add_bos_token' is 2 (must be 0 or 1)")
    g = base()
    g.kv("test.flags", array(BOOL, [1, 7, 0]))
    data, mm = g.build()
    yield ("bool-array-7.gguf", data,
           f"offset {mm['kv:test.flags:value'] + 12 + 1}: element 1 of bool array 'test.flags' is 7 "
           "(must be 0 or 1)")


# ---- fuzz seeds: small valid files reaching every part of the format --------------------------

def seeds():
    yield "base.gguf", base().build()[0]
    yield "base-v2.gguf", base(version=2).build()[0]
    yield "header-only.gguf", Gguf().build()[0]

    g = Gguf(alignment=64)
    g.kv("general.alignment", scalar(U32, 64))
    g.kv("general.architecture", string("llama"))
    g.tensor("a.weight", "F32", [3])
    g.tensor("b.weight", "F16", [5, 3])
    yield "alignment-64.gguf", g.build()[0]

    g = Gguf()
    for i, t in enumerate([U8, I8, U16, I16, U32, I32, F32, U64, I64, F64]):
        g.kv(f"scalar.{i}", scalar(t, 1 if t in (F32, F64) else 7))
    g.kv("scalar.bool", scalar(BOOL, 0))
    g.kv("scalar.string", string("héllo ▁world"))
    g.kv("array.u16", array(U16, [1, 2, 65535]))
    g.kv("array.i64", array(I64, [-1, 0, 1 << 40]))
    g.kv("array.f64", array(F64, [0.5, -2.0]))
    g.kv("array.bool", array(BOOL, [0, 1, 1]))
    g.kv("array.empty", array(U32, []))
    yield "all-value-types.gguf", g.build()[0]

    g = Gguf()
    inner = array(STRING, ["x", "yz"])
    g.kv("nested.strings", array(ARRAY, [inner, array(STRING, [])]))
    g.kv("nested.deep", array(ARRAY, [array(ARRAY, [array(U8, [1, 2, 3])]), array(ARRAY, [])]))
    yield "nested-arrays.gguf", g.build()[0]

    g = Gguf()
    g.kv("general.architecture", string("llama"))
    g.kv("tokenizer.ggml.model", string("gpt2"))
    g.kv("tokenizer.ggml.tokens", array(STRING, ["a", "b", "ab", "Ġ", "<|end|>"]))
    g.kv("tokenizer.ggml.token_type", array(I32, [1, 1, 1, 1, 3]))
    g.kv("tokenizer.ggml.merges", array(STRING, ["a b"]))
    g.kv("tokenizer.ggml.eos_token_id", scalar(U32, 4))
    yield "vocab-only.gguf", g.build()[0]

    g = Gguf()
    g.kv("general.architecture", string("quant"))
    g.tensor("q4_k.weight", "Q4_K", [256, 2])
    g.tensor("q6_k.weight", "Q6_K", [256])
    g.tensor("q4_0.weight", "Q4_0", [32, 3])
    g.tensor("bf16.weight", "BF16", [4, 4])
    g.tensor("i8.weight", "I8", [7])
    g.tensor("empty.weight", "F32", [0, 4])
    g.tensor("cube.weight", "F32", [2, 2, 2, 2])
    yield "quant-types.gguf", g.build()[0]

    g = Gguf()
    g.tensor("late.weight", "F32", [8], offset=64)
    g.tensor("early.weight", "F32", [8], offset=0)
    yield "tensors-out-of-order.gguf", g.build()[0]

    g = Gguf()
    n_layer = 5
    g.kv("general.architecture", string("gemma4"))
    g.kv("gemma4.block_count", scalar(U32, n_layer))
    g.kv("gemma4.embedding_length", scalar(U32, 16))
    g.kv("gemma4.attention.head_count", scalar(U32, 2))
    g.kv("gemma4.attention.head_count_kv", array(U32, [1] * n_layer))
    g.kv("gemma4.attention.key_length", scalar(U32, 16))
    g.kv("gemma4.attention.key_length_swa", scalar(U32, 8))
    g.kv("gemma4.attention.sliding_window", scalar(U32, 4))
    g.kv("gemma4.attention.sliding_window_pattern", array(BOOL, [1, 1, 1, 1, 0]))
    g.kv("gemma4.attention.shared_kv_layers", scalar(U32, 2))
    g.kv("gemma4.feed_forward_length", array(U32, [32, 32, 32, 64, 64]))
    g.kv("gemma4.rope.freq_base", scalar(F32, 1e6))
    g.kv("gemma4.final_logit_softcapping", scalar(F32, 30.0))
    g.tensor("token_embd.weight", "F32", [16, 4])
    g.tensor("rope_freqs.weight", "F32", [8])
    for il in range(2):
        g.tensor(f"blk.{il}.attn_q.weight", "F16", [16, 16])
        g.tensor(f"blk.{il}.attn_norm.weight", "F32", [16])
        g.tensor(f"blk.{il}.layer_output_scale.weight", "F32", [1])
    yield "gemma4-like.gguf", g.build()[0]


def write(out_root):
    malformed_dir = os.path.join(out_root, "tests", "data", "gguf-malformed")
    corpus_dir = os.path.join(out_root, "fuzz", "corpus", "gguf")
    for d in (malformed_dir, corpus_dir):
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            if f.endswith(".gguf"):
                os.remove(os.path.join(d, f))
    lines = []
    names = set()
    for name, data, expected in malformed_cases():
        assert name not in names, name
        names.add(name)
        assert "\t" not in expected and "\n" not in expected
        with open(os.path.join(malformed_dir, name), "wb") as f:
            f.write(data)
        lines.append(f"{name}\t{expected}\n")
    with open(os.path.join(malformed_dir, "manifest.tsv"), "w", encoding="utf-8") as f:
        f.write("# file\texpected error substring (written by scripts/gen_gguf_fixtures.py)\n")
        f.writelines(lines)
    total = 0
    for name, data in seeds():
        with open(os.path.join(corpus_dir, name), "wb") as f:
            f.write(data)
        total += len(data)
    print(f"{len(lines)} malformed files, {total} bytes of seeds", file=sys.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), ".."),
                        help="repository root to write under (default: this repository)")
    write(parser.parse_args().out)
