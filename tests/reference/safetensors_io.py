"""Hand-written safetensors writer and reader (the machines have no safetensors package).

Format: u64 little-endian N, then N bytes of UTF-8 JSON header
  {"<name>": {"dtype": "F64", "shape": [..], "data_offsets": [begin, end]}, ...,
   "__metadata__": {"<str>": "<str>"}}
then the raw little-endian tensor bytes; offsets are relative to the start of the data section.
The writer sorts names alphabetically, lays tensors out in that order and pads the header with
spaces so that the data starts at a multiple of 8. The reader accepts any valid file and rejects
what the reference Rust implementation rejects (overlapping or gapped offsets, sizes that do not
match dtype and shape, trailing bytes), raising SafetensorsError.
"""

import json
import struct

import numpy as np
import torch

# dtype name -> (torch dtype, bytes per element)
DTYPES = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
NAME_OF_DTYPE = {torch_dtype: name for name, (torch_dtype, _) in DTYPES.items()}
MAX_HEADER_BYTES = 100_000_000


class SafetensorsError(ValueError):
    """The file is not a valid safetensors file."""


def _tensor_bytes(tensor):
    t = tensor.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)  # numpy has no bfloat16; the bits are what we store
    array = t.numpy()
    return array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()


def serialize(tensors, metadata=None):
    """tensors: {name: torch.Tensor}; metadata: {str: str} or None. Returns bytes."""
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        tensor = tensors[name]
        if tensor.dtype not in NAME_OF_DTYPE:
            raise TypeError(f"{name}: unsupported dtype {tensor.dtype}")
        data = _tensor_bytes(tensor)
        header[name] = {"dtype": NAME_OF_DTYPE[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError("__metadata__ keys and values must be strings")
        header = {"__metadata__": dict(metadata), **header}
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-(8 + len(header_bytes)) % 8)
    return struct.pack("<Q", len(header_bytes)) + header_bytes + b"".join(chunks)


def save_file(tensors, path, metadata=None):
    with open(path, "wb") as f:
        f.write(serialize(tensors, metadata))


def deserialize(buffer):
    """Returns (tensors {name: torch.Tensor}, metadata {str: str} or None)."""
    if len(buffer) < 8:
        raise SafetensorsError("file shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", buffer[:8])
    if n > MAX_HEADER_BYTES or 8 + n > len(buffer):
        raise SafetensorsError(f"header length {n} does not fit in a {len(buffer)}-byte file")
    try:
        header = json.loads(bytes(buffer[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"header is not valid UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise SafetensorsError("__metadata__ must map strings to strings")
    data = memoryview(buffer)[8 + n:]

    entries = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError(f"{name}: entry must have exactly dtype, shape, data_offsets")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in DTYPES:
            raise SafetensorsError(f"{name}: unsupported dtype {dtype!r}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise SafetensorsError(f"{name}: bad shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(isinstance(o, int) for o in offsets) and 0 <= offsets[0] <= offsets[1]):
            raise SafetensorsError(f"{name}: bad data_offsets {offsets!r}")
        numel = 1
        for d in shape:
            numel *= d
        if numel * DTYPES[dtype][1] != offsets[1] - offsets[0]:
            raise SafetensorsError(f"{name}: {offsets[1] - offsets[0]} bytes for {dtype} "
                                   f"shape {shape}")
        entries.append((offsets[0], offsets[1], name, dtype, shape))

    entries.sort()
    expected_begin = 0
    for begin, end, name, _, _ in entries:
        if begin != expected_begin:
            raise SafetensorsError(f"{name}: data_offsets begin at {begin}, expected "
                                   f"{expected_begin} (gap or overlap)")
        expected_begin = end
    if expected_begin != len(data):
        raise SafetensorsError(f"data section is {len(data)} bytes, tensors cover "
                               f"{expected_begin}")

    tensors = {}
    for begin, end, name, dtype, shape in entries:
        torch_dtype, _ = DTYPES[dtype]
        raw = bytearray(data[begin:end])
        storage_dtype = torch.int16 if torch_dtype == torch.bfloat16 else torch_dtype
        np_dtype = torch.empty(0, dtype=storage_dtype).numpy().dtype.newbyteorder("<")
        array = np.frombuffer(raw, dtype=np_dtype) if raw else np.zeros(0, dtype=np_dtype)
        t = torch.from_numpy(array.astype(array.dtype.newbyteorder("="), copy=True))
        if torch_dtype == torch.bfloat16:
            t = t.view(torch.bfloat16)
        tensors[name] = t.reshape(shape)
    return tensors, metadata


def load_file(path):
    """Returns (tensors, metadata) of the safetensors file at path."""
    with open(path, "rb") as f:
        return deserialize(f.read())
