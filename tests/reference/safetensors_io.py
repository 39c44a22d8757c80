"""Safetensors read/write with numpy only (the format: u64 header length, JSON header of
{name: {dtype, shape, data_offsets}}, raw little-endian data), for the converter tests.

Written from the format's description (huggingface/safetensors README), independent of
headroom's C++ reader. bf16 is stored as the top 16 bits of float32, rounded to nearest even.
"""

import json
import os
import struct

import numpy as np

_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2)}


def f32_to_bf16_bits(x):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even (no nan in our data)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_bits_to_f64(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)


def stored(values, dtype):
    """What a tensor of `values` holds once stored as `dtype`, as float64 (the reference reads
    exactly these)."""
    if dtype == "F32":
        return np.asarray(values, dtype=np.float32).astype(np.float64)
    if dtype == "F16":
        return np.asarray(values, dtype=np.float16).astype(np.float64)
    return bf16_bits_to_f64(f32_to_bf16_bits(values))


def encode(values, dtype):
    if dtype == "F32":
        return np.asarray(values, dtype="<f4").tobytes()
    if dtype == "F16":
        return np.asarray(values, dtype="<f2").tobytes()
    return f32_to_bf16_bits(values).astype("<u2").tobytes()


def write_file(path, tensors, dtype_of):
    """tensors: {name: float array}; dtype_of(name) -> "F32" | "F16" | "BF16"."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = encode(tensors[name], dtype_of(name))
        header[name] = {"dtype": dtype_of(name), "shape": list(np.shape(tensors[name])),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data section starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def write_checkpoint(directory, tensors, dtype_of, shards=1):
    """model.safetensors, or `shards` files with model.safetensors.index.json."""
    names = sorted(tensors)
    if shards <= 1:
        write_file(os.path.join(directory, "model.safetensors"), tensors, dtype_of)
        return
    weight_map = {}
    per_shard = -(-len(names) // shards)
    for s in range(shards):
        part = names[s * per_shard:(s + 1) * per_shard]
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_file(os.path.join(directory, file), {n: tensors[n] for n in part}, dtype_of)
        for n in part:
            weight_map[n] = file
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=1)


def read_checkpoint(directory):
    """{name: float64 array} of a checkpoint directory (one file or index-listed shards)."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for file in files:
        out.update(read_file(os.path.join(directory, file)))
    return out


def read_file(path):
    """{name: float64 array} of one safetensors file."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        np_type, size = _DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        raw = np.frombuffer(buf, dtype=np.dtype(np_type).newbyteorder("<"),
                            count=(end - begin) // size, offset=base + begin)
        values = bf16_bits_to_f64(raw) if info["dtype"] == "BF16" else raw.astype(np.float64)
        out[name] = values.reshape(info["shape"])
    return out
