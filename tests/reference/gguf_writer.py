"""Minimal GGUF v3 writer for test fixtures: metadata and F32 / F16 / Q8_0 tensors.

Written from the GGUF format description (stdlib + numpy), like gguf_reader.py beside it and
independent of headroom's C++ writer; Debian ships no gguf-py. Layout: magic "GGUF", u32
version, u64 tensor count, u64 key/value count, the key/value pairs, the tensor infos (name,
dims in ggml order — ne0, the contiguous axis, first — type, offset into the data section), zero
padding to `general.alignment` (32), then each tensor's bytes, each starting on the alignment.

    w = GgufWriter()
    w.add("general.architecture", "clip")
    w.add("clip.vision.block_count", 2, kind="u32")
    w.tensor("v.blk.0.attn_q.weight", array, "f16")   # numpy [.., ne1, ne0] → ggml {ne0, ne1, ..}
    w.write("out.gguf")
"""

import struct

import numpy as np

# Metadata value types (GGUF spec).
_U8, _I8, _U16, _I16, _U32, _I32, _F32, _BOOL, _STRING, _ARRAY, _U64, _I64, _F64 = range(13)
_KIND = {
    "u8": (_U8, "<B"), "i8": (_I8, "<b"), "u16": (_U16, "<H"), "i16": (_I16, "<h"),
    "u32": (_U32, "<I"), "i32": (_I32, "<i"), "f32": (_F32, "<f"), "bool": (_BOOL, "<?"),
    "u64": (_U64, "<Q"), "i64": (_I64, "<q"), "f64": (_F64, "<d"),
}
# Tensor element types (ggml_type numbering).
TYPES = {"f32": 0, "f16": 1, "q8_0": 8}
ALIGNMENT = 32


def _string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _default_kind(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "u32" if value >= 0 else "i32"
    if isinstance(value, float):
        return "f32"
    if isinstance(value, str):
        return "string"
    raise TypeError(f"no default GGUF kind for {type(value).__name__}")


def _value(value, kind):
    if kind == "string":
        return struct.pack("<I", _STRING) + _string(value)
    if kind.startswith("array:"):
        elem = kind.split(":", 1)[1]
        body = b""
        for v in value:
            body += _string(v) if elem == "string" else struct.pack(_KIND[elem][1], v)
        etype = _STRING if elem == "string" else _KIND[elem][0]
        return struct.pack("<I", _ARRAY) + struct.pack("<I", etype) + struct.pack("<Q", len(value)) + body
    vtype, fmt = _KIND[kind]
    return struct.pack("<I", vtype) + struct.pack(fmt, value)


def quantize_q8_0(values):
    """Rows of 32-value blocks: f16 scale d = max|x|/127, then round(x/d) as signed bytes."""
    blocks = values.astype(np.float64).reshape(-1, 32)
    d = np.max(np.abs(blocks), axis=1, keepdims=True) / 127.0
    q = np.divide(blocks, d, out=np.zeros_like(blocks), where=d > 0)
    q = (np.sign(q) * np.floor(np.abs(q) + 0.5)).astype(np.int8)
    out = np.zeros(blocks.shape[0], dtype=np.dtype([("d", "<f2"), ("q", "i1", 32)]))
    out["d"] = d[:, 0].astype(np.float16)
    out["q"] = q
    return out.tobytes()


class GgufWriter:
    def __init__(self):
        self.kv = []        # (key, encoded value)
        self.tensors = []   # (name, ggml dims, type id, bytes)

    def add(self, key, value, kind=None):
        """kind: u8..f64, bool, string, or array:ELEM (ELEM one of those or string)."""
        if kind is None:
            if isinstance(value, (list, tuple)):
                elem = "string" if value and isinstance(value[0], str) else _default_kind(value[0] if value else 0)
                kind = "array:" + elem
            else:
                kind = _default_kind(value)
        self.kv.append((key, _value(value, kind)))

    def empty_tensor(self, name, shape, type_name="f32"):
        """A tensor whose bytes are left unwritten (a sparse file): for plans, which read only the
        tensor table. shape in numpy order."""
        dims = list(reversed(shape))
        n = int(np.prod(shape))
        size = {"f32": n * 4, "f16": n * 2, "q8_0": n // 32 * 34}[type_name]
        self.tensors.append((name, dims, TYPES[type_name], size))

    def tensor(self, name, array, type_name="f32"):
        """array: numpy, row-major; its last axis becomes ggml ne0."""
        a = np.ascontiguousarray(array)
        dims = list(reversed(a.shape)) if a.ndim else [1]
        if type_name == "f32":
            data = a.astype("<f4").tobytes()
        elif type_name == "f16":
            data = a.astype("<f2").tobytes()
        elif type_name == "q8_0":
            if dims[0] % 32:
                raise ValueError(f"{name}: q8_0 needs rows of whole 32-blocks, not {dims[0]}")
            data = quantize_q8_0(a.reshape(-1))
        else:
            raise ValueError(f"unknown tensor type {type_name!r}")
        self.tensors.append((name, dims, TYPES[type_name], data))

    def write(self, path):
        head = b"GGUF" + struct.pack("<I", 3) + struct.pack("<Q", len(self.tensors)) + struct.pack("<Q", len(self.kv))
        for key, value in self.kv:
            head += _string(key) + value
        offset = 0
        for name, dims, ttype, data in self.tensors:
            head += _string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            head += struct.pack("<I", ttype) + struct.pack("<Q", offset)
            size = data if isinstance(data, int) else len(data)
            offset += (size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        head += b"\0" * (-len(head) % ALIGNMENT)
        with open(path, "wb") as f:
            f.write(head)
            for _, _, _, data in self.tensors:
                if isinstance(data, int):  # unwritten: skip over it
                    f.seek(f.tell() + (data + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT)
                    continue
                f.write(data)
                f.write(b"\0" * (-len(data) % ALIGNMENT))
            f.truncate(f.tell())
