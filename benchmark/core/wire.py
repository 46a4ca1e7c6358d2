"""The message format between faithbench and a plugin worker: a JSON header and raw
numeric arrays, nothing that can run code when read.

A worker runs code nobody here has read, so what it sends back is data to check,
never objects to rebuild: no pickle (unpickling can call any function), no tensor
subclasses, only the dtypes listed, shapes stated in the header and checked against
the bytes that arrived. One message is ``u64 length`` then ``u32 header length``,
the header (UTF-8 JSON: fields and ``arrays``: name, dtype, shape) and each array's
bytes in order.

>>> header, arrays = decode(encode({"op": "ok"}, {"scores": np.ones((2, 3), np.float32)}))
>>> header["op"], arrays["scores"].shape, arrays["scores"].dtype.name
('ok', (2, 3), 'float32')
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np

DTYPES = ("float32", "float64", "float16", "int64", "int32", "bool")
MAX_MESSAGE = 2 ** 31  # 2 GiB: far above any batch's scores, below a memory blow-up
MAX_HEADER = 2 ** 20
_LEN = struct.Struct("<Q")
_HEAD = struct.Struct("<I")


class WireError(Exception):
    """A message that is not in this format (bad length, header, dtype or shape)."""


def encode(header: dict, arrays: dict[str, np.ndarray] | None = None) -> bytes:
    arrays = arrays or {}
    specs, blobs = [], []
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype.name not in DTYPES:
            raise WireError(f"array {name!r} has dtype {a.dtype.name}, not one of {DTYPES}")
        specs.append({"name": name, "dtype": a.dtype.name, "shape": list(a.shape)})
        blobs.append(a.tobytes())
    head = json.dumps({**header, "arrays": specs}, allow_nan=False).encode()
    body = _HEAD.pack(len(head)) + head + b"".join(blobs)
    return _LEN.pack(len(body)) + body


def decode(body: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """Header and arrays of one message body (``encode``'s output, length included)."""
    if len(body) < _LEN.size + _HEAD.size:
        raise WireError(f"message of {len(body)} bytes is shorter than its prefix")
    (size,) = _LEN.unpack_from(body)
    if size != len(body) - _LEN.size:
        raise WireError(f"message says {size} bytes, {len(body) - _LEN.size} arrived")
    (n_head,) = _HEAD.unpack_from(body, _LEN.size)
    start = _LEN.size + _HEAD.size
    if n_head > min(MAX_HEADER, len(body) - start):
        raise WireError(f"header of {n_head} bytes does not fit")
    try:
        header = json.loads(body[start:start + n_head].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), list):
        raise WireError("header is not an object with an `arrays` list")
    arrays, offset = {}, start + n_head
    for spec in header.pop("arrays"):
        name, a, offset = _array(spec, body, offset)
        arrays[name] = a
    if offset != len(body):
        raise WireError(f"{len(body) - offset} bytes left over after the arrays")
    return header, arrays


def _array(spec, body: bytes, offset: int) -> tuple[str, np.ndarray, int]:
    if not isinstance(spec, dict) or set(spec) != {"name", "dtype", "shape"}:
        raise WireError(f"array spec {spec!r} is not {{name, dtype, shape}}")
    name, dtype, shape = spec["name"], spec["dtype"], spec["shape"]
    if not isinstance(name, str) or dtype not in DTYPES:
        raise WireError(f"array {name!r}: dtype {dtype!r} is not one of {DTYPES}")
    if (not isinstance(shape, list) or len(shape) > 4
            or not all(type(d) is int and 0 <= d < MAX_MESSAGE for d in shape)):
        raise WireError(f"array {name!r}: shape {shape!r} is not up to 4 sizes")
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * np.dtype(dtype).itemsize
    if offset + nbytes > len(body):
        raise WireError(f"array {name!r} of shape {shape} needs {nbytes} bytes; "
                        f"{len(body) - offset} left")
    a = np.frombuffer(body, dtype=dtype, count=count, offset=offset).reshape(shape).copy()
    return name, a, offset + nbytes


def send(fd: int, header: dict, arrays: dict[str, np.ndarray] | None = None) -> None:
    data = memoryview(encode(header, arrays))
    while data:
        data = data[os.write(fd, data):]


def receive(fd: int) -> bytes:
    """One whole message body from ``fd`` (EOFError when the other side has closed)."""
    prefix = _read_exactly(fd, _LEN.size)
    (size,) = _LEN.unpack(prefix)
    if size > MAX_MESSAGE:
        raise WireError(f"message of {size} bytes exceeds {MAX_MESSAGE}")
    return prefix + _read_exactly(fd, size)


def _read_exactly(fd: int, n: int) -> bytes:
    parts, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
