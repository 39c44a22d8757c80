"""Minimal GGUF v2/v3 reader for the reference models: metadata, tensor table, dequantized data.

Written from the GGUF format description (stdlib + numpy), independent of headroom's C++ reader.
Layout: magic "GGUF", u32 version, u64 tensor count, u64 key/value count, the key/value pairs,
the tensor infos, padding to `general.alignment` (default 32), then the tensor data; every
tensor's offset is relative to the start of that data section. All little-endian.
"""

import struct

import numpy as np

# Metadata value types (GGUF spec).
_U8, _I8, _U16, _I16, _U32, _I32, _F32, _BOOL, _STRING, _ARRAY, _U64, _I64, _F64 = range(13)
_SCALAR_FORMATS = {
    _U8: "<B", _I8: "<b", _U16: "<H", _I16: "<h", _U32: "<I", _I32: "<i",
    _F32: "<f", _BOOL: "<?", _U64: "<Q", _I64: "<q", _F64: "<d",
}

# Tensor element types (ggml_type numbering) this reader can turn into float64.
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
TYPE_NAMES = {GGML_F32: "F32", GGML_F16: "F16", GGML_Q8_0: "Q8_0", GGML_BF16: "BF16"}
# (elements per block, bytes per block)
_BLOCKS = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_BF16: (1, 2), GGML_Q8_0: (32, 34)}


class TensorInfo:
    """One entry of the tensor table. `shape` is in ggml order: shape[0] is the contiguous axis."""

    def __init__(self, name, shape, ggml_type, offset):
        self.name = name
        self.shape = shape
        self.ggml_type = ggml_type
        self.offset = offset

    @property
    def n_elements(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def type_name(self):
        return TYPE_NAMES.get(self.ggml_type, f"type{self.ggml_type}")


class _Cursor:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def take(self, fmt):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise ValueError(f"gguf: truncated header at byte {self.pos}")
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def string(self):
        n = self.take("<Q")
        if self.pos + n > len(self.buf):
            raise ValueError(f"gguf: string of {n} bytes runs past the end at byte {self.pos}")
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype in _SCALAR_FORMATS:
            return self.take(_SCALAR_FORMATS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype = self.take("<I")
            count = self.take("<Q")
            return [self.value(etype) for _ in range(count)]
        raise ValueError(f"gguf: unknown metadata value type {vtype}")


class GgufFile:
    """A whole GGUF file held in memory (the reference only ever opens tiny models)."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = f.read()
        cur = _Cursor(self.buf)
        if self.buf[:4] != b"GGUF":
            raise ValueError(f"gguf: {path} does not start with the GGUF magic")
        cur.pos = 4
        self.version = cur.take("<I")
        if self.version not in (2, 3):
            raise ValueError(f"gguf: version {self.version} not supported")
        n_tensors = cur.take("<Q")
        n_kv = cur.take("<Q")
        self.metadata = {}
        for _ in range(n_kv):
            key = cur.string()
            vtype = cur.take("<I")
            self.metadata[key] = cur.value(vtype)
        self.tensors = {}
        for _ in range(n_tensors):
            name = cur.string()
            n_dims = cur.take("<I")
            shape = [cur.take("<Q") for _ in range(n_dims)]
            ggml_type = cur.take("<I")
            offset = cur.take("<Q")
            self.tensors[name] = TensorInfo(name, shape, ggml_type, offset)
        alignment = int(self.metadata.get("general.alignment", 32))
        self.data_start = (cur.pos + alignment - 1) // alignment * alignment

    def get(self, key, default=None):
        return self.metadata.get(key, default)

    def has(self, name):
        return name in self.tensors

    def tensor(self, name):
        """The tensor as float64, in numpy (row-major) order: ggml {ne0, ne1, ne2} → [ne2, ne1, ne0]."""
        info = self.tensors[name]
        if info.ggml_type not in _BLOCKS:
            raise ValueError(f"gguf: tensor {name} has type {info.type_name}, which this reader cannot dequantize")
        per_block, block_bytes = _BLOCKS[info.ggml_type]
        n = info.n_elements
        if n % per_block:
            raise ValueError(f"gguf: tensor {name}: {n} elements is not a whole number of blocks")
        nbytes = n // per_block * block_bytes
        start = self.data_start + info.offset
        if start + nbytes > len(self.buf):
            raise ValueError(f"gguf: tensor {name} runs past the end of the file")
        raw = self.buf[start:start + nbytes]
        flat = dequantize(raw, info.ggml_type, n)
        return flat.reshape(list(reversed(info.shape)))


def dequantize(raw, ggml_type, n):
    """Bytes of `n` elements of `ggml_type` → float64 vector of length n."""
    if ggml_type == GGML_F32:
        return np.frombuffer(raw, dtype="<f4", count=n).astype(np.float64)
    if ggml_type == GGML_F16:
        return np.frombuffer(raw, dtype="<f2", count=n).astype(np.float64)
    if ggml_type == GGML_BF16:
        # bf16 is the top half of an IEEE binary32: shift it back into place.
        bits = np.frombuffer(raw, dtype="<u2", count=n).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    if ggml_type == GGML_Q8_0:
        # Block of 32: one f16 scale d, then 32 signed bytes q; value = d * q.
        blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("q", "i1", 32)]), count=n // 32)
        return (blocks["d"].astype(np.float64)[:, None] * blocks["q"].astype(np.float64)).reshape(n)
    raise ValueError(f"gguf: cannot dequantize type {ggml_type}")
