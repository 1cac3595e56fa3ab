"""Read and write safetensors files: the `safetensors` package when it imports, else a fallback.

Contract:
  load_file(path) -> (tensors: dict[str, torch.Tensor], metadata: dict[str, str])
  save_file(path, tensors, metadata=None)
Both go through the `safetensors` package (PyPI, installed into build/pyenv by scripts/setup.sh)
unless it is missing or STRETCH_SAFETENSORS_FALLBACK=1 is set; then the fallback below is used.
read_fallback / write_fallback are exported so the self-test can cross-check both paths.

The format (what the fallback implements): an 8-byte little-endian u64 N, then N bytes of JSON
(possibly padded with spaces), then the data buffer. The JSON maps each tensor name to
{"dtype": "F32"|..., "shape": [...], "data_offsets": [begin, end]} with offsets relative to the
start of the data buffer, little-endian, row-major; the optional key "__metadata__" maps strings
to strings. Every malformed file raises InputError naming the file and the byte offset.
"""

import json
import os
import struct

import numpy as np
import torch

from .errors import InputError

try:  # pragma: no cover - depends on the environment
    from safetensors import safe_open as _safe_open
    from safetensors.torch import save_file as _st_save_file
    HAVE_SAFETENSORS = True
except ImportError:  # pragma: no cover
    HAVE_SAFETENSORS = False

# safetensors dtype tag -> (numpy little-endian dtype used to read the bytes, torch dtype)
_DTYPES = {
    "F64": ("<f8", torch.float64),
    "F32": ("<f4", torch.float32),
    "F16": ("<f2", torch.float16),
    "BF16": ("<u2", torch.bfloat16),  # raw bits, widened to f32 below
    "I64": ("<i8", torch.int64),
    "I32": ("<i4", torch.int32),
    "I16": ("<i2", torch.int16),
    "I8": ("i1", torch.int8),
    "U8": ("u1", torch.uint8),
    "BOOL": ("?", torch.bool),
}
_TAG_OF = {tdt: tag for tag, (_, tdt) in _DTYPES.items()}


def use_fallback() -> bool:
    return (not HAVE_SAFETENSORS) or os.environ.get("STRETCH_SAFETENSORS_FALLBACK") == "1"


def load_file(path: str):
    """Returns (dict name -> tensor, metadata dict). Raises InputError on a missing/bad file."""
    if not os.path.isfile(path):
        raise InputError(path, "no such file", "check the path")
    if use_fallback():
        return read_fallback(path)
    try:
        with _safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        return tensors, dict(meta)
    except Exception as e:  # the library's errors are not typed across versions
        raise InputError(path, f"not a readable safetensors file ({e})",
                         "was it written completely? compare with tests/parity/README.md")


def save_file(path: str, tensors: dict, metadata: dict = None):
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    if use_fallback():
        write_fallback(path, tensors, metadata)
    else:
        _st_save_file(tensors, path, metadata=metadata)


def read_fallback(path: str):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise InputError(path, f"file is {len(raw)} bytes, shorter than the 8-byte header length",
                         "the file is truncated")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise InputError(path, f"header length {n} at offset 0 exceeds the file size {len(raw)}",
                         "the file is truncated or not safetensors")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(path, f"header JSON at offset 8 does not parse ({e})", "not a safetensors file")
    if not isinstance(header, dict):
        raise InputError(path, "header JSON at offset 8 is not an object", "not a safetensors file")
    meta = header.pop("__metadata__", None) or {}
    data = memoryview(raw)[8 + n:]
    tensors = {}
    for name, info in header.items():
        try:
            tag, shape, (begin, end) = info["dtype"], list(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise InputError(path, f"tensor '{name}': header entry lacks dtype/shape/data_offsets",
                             "not a safetensors file")
        if tag not in _DTYPES:
            raise InputError(path, f"tensor '{name}': unsupported dtype {tag}", f"one of {sorted(_DTYPES)}")
        npdt, tdt = _DTYPES[tag]
        count = int(np.prod(shape)) if shape else 1
        nbytes = count * np.dtype(npdt).itemsize
        if not (0 <= begin <= end <= len(data)) or end - begin != nbytes:
            raise InputError(path, f"tensor '{name}': data_offsets [{begin}, {end}) (file offset {8 + n + begin}) "
                             f"do not hold {nbytes} bytes for {tag}{shape} in a {len(data)}-byte buffer",
                             "the file is truncated or its header is wrong")
        arr = np.frombuffer(data[begin:end], dtype=npdt).reshape(shape).copy()
        if tag == "BF16":
            t = torch.from_numpy((arr.astype(np.uint32) << 16).view(np.float32)).to(torch.bfloat16)
        else:
            t = torch.from_numpy(arr)
        tensors[name] = t
    return tensors, dict(meta)


def write_fallback(path: str, tensors: dict, metadata: dict = None):
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        if t.dtype not in _TAG_OF:
            raise InputError(name, f"cannot write dtype {t.dtype}", "convert to float32/int32")
        if t.dtype == torch.bfloat16:
            blob = (t.float().numpy().view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            blob = t.numpy().astype(_DTYPES[_TAG_OF[t.dtype]][0]).tobytes()
        header[name] = {"dtype": _TAG_OF[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    js = json.dumps(header, separators=(",", ":")).encode("utf-8")
    js += b" " * ((8 - len(js) % 8) % 8)  # the data buffer starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
