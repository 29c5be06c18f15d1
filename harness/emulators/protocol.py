"""The kernel server's wire format (the C side is harness/server/server.cpp).

All integers are little-endian.

Request::

    u32 magic 'RVDQ'  u16 version  u16 op            (op: 0 hello, 1 call, 2 quit)
    -- call only --
    u32 name_len  name[name_len]                       kernel name, e.g. "vec_dot_f16"
    u32 repeat                                         calls in a row (timing); outputs are from the last;
                                                       top bit set: note the counters of the last (cost)
    u32 n_ip   i64 ip[n_ip]                            integer parameters
    u32 n_fp   f64 fp[n_fp]                            float parameters
    u32 n_bufs { u32 kind  u32 fill  u64 size  [data] } kind 0 in, 1 out, 2 in/out; data for in and in/out;
                                                       out buffers start filled with the byte ``fill``

Response::

    u32 magic 'RVDR'  u32 status  u64 kernel_ns  u32 msg_len  msg[msg_len]
    u32 n_out { u64 size  data[size] }                 one per out and in/out buffer, in request order

``msg`` is the hello text, a free-form "key=value" note from the kernel, or
the error for a non-zero status.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

REQUEST_MAGIC = 0x51445652
RESPONSE_MAGIC = 0x52445652
VERSION = 1


class Op(enum.IntEnum):
    HELLO = 0
    CALL = 1
    QUIT = 2


class Status(enum.IntEnum):
    OK = 0
    GUARD = 1
    BAD_REQUEST = 2
    UNKNOWN_KERNEL = 3
    #: A valid request this emulator cannot run (more than one thread on Spike).
    UNSUPPORTED = 4


class Kind(enum.IntEnum):
    IN = 0
    OUT = 1
    INOUT = 2


@dataclass(frozen=True)
class Buf:
    """One buffer of a call. Build them with :func:`In`, :func:`Out` and :func:`InOut`."""

    kind: Kind
    size: int
    data: bytes = b""
    fill: int = 0xA5


def In(a: np.ndarray | bytes) -> Buf:
    """An input buffer with the bytes of ``a``."""
    b = a if isinstance(a, bytes) else np.ascontiguousarray(a).tobytes()
    return Buf(Kind.IN, len(b), b)


def Out(nbytes: int, fill: int = 0xA5) -> Buf:
    """An output buffer of ``nbytes``, pre-filled with ``fill``.

    The default 0xA5 is an ordinary number in every float format (never NaN),
    so an element the kernel forgot to write differs from the expected value
    even where that value is a NaN.
    """
    return Buf(Kind.OUT, int(nbytes), b"", fill)


def InOut(a: np.ndarray | bytes) -> Buf:
    """A buffer the kernel reads and updates in place."""
    b = a if isinstance(a, bytes) else np.ascontiguousarray(a).tobytes()
    return Buf(Kind.INOUT, len(b), b)


def encode_hello() -> bytes:
    return struct.pack("<IHH", REQUEST_MAGIC, VERSION, Op.HELLO)


def encode_quit() -> bytes:
    return struct.pack("<IHH", REQUEST_MAGIC, VERSION, Op.QUIT)


#: The top bit of a CALL's repeat count: the server notes ``cost.instret`` / ``cost.cycles``, the
#: counters around the last repetition (harness/cost/measure/spike_count.py; exact on Spike only).
REPEAT_MEASURE = 1 << 31


def encode_call(name: str, ip: Sequence[int], fp: Sequence[float], bufs: Sequence[Buf], repeat: int = 1,
                *, measure: bool = False) -> bytes:
    nb = name.encode()
    if not 0 < repeat < REPEAT_MEASURE:
        raise ValueError(f"repeat {repeat}: between 1 and {REPEAT_MEASURE - 1}")
    repeat |= REPEAT_MEASURE if measure else 0
    parts = [struct.pack("<IHHI", REQUEST_MAGIC, VERSION, Op.CALL, len(nb)), nb,
             struct.pack(f"<II{len(ip)}q", repeat, len(ip), *ip),
             struct.pack(f"<I{len(fp)}d", len(fp), *fp),
             struct.pack("<I", len(bufs))]
    for b in bufs:
        parts.append(struct.pack("<IIQ", b.kind, b.fill, b.size))
        if b.kind != Kind.OUT:
            parts.append(b.data)
    return b"".join(parts)


@dataclass
class Response:
    status: Status
    kernel_ns: int
    message: str
    outputs: list[bytes]

    def output(self, i: int, dtype: np.dtype | type) -> np.ndarray:
        """Output buffer ``i`` (counting out and in/out buffers only) as an array of ``dtype``."""
        return np.frombuffer(self.outputs[i], dtype=dtype)


RESPONSE_HEADER = struct.Struct("<IIQI")


def decode_responses(data: bytes) -> list[Response]:
    """The responses in a whole captured stdout of a server (a run fed its requests at once)."""
    out: list[Response] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < RESPONSE_HEADER.size:
            raise ValueError(f"truncated response header at byte {pos} of {len(data)}")
        magic, status, ns, msg_len = RESPONSE_HEADER.unpack_from(data, pos)
        if magic != RESPONSE_MAGIC:
            raise ValueError(f"bad response magic {magic:#x} at byte {pos}")
        pos += RESPONSE_HEADER.size
        msg = data[pos:pos + msg_len].decode(errors="replace")
        pos += msg_len
        (n_out,) = struct.unpack_from("<I", data, pos)
        pos += 4
        outs = []
        for _ in range(n_out):
            (size,) = struct.unpack_from("<Q", data, pos)
            pos += 8
            outs.append(data[pos:pos + size])
            pos += size
        out.append(Response(Status(status), ns, msg, outs))
    return out
