"""C text shared by the public reproducers (harness/upstream/program.py, program_ops.py): inputs as hex strings
(runs of one byte compressed) and floating-point literals."""

from __future__ import annotations

import math


def encode(data: bytes) -> str:
    """Bytes as hex, runs of three or more equal bytes as ``hh*N`` (the program's ``fill`` reads it)."""
    out, lit, i = [], "", 0
    while i < len(data):
        j = i
        while j < len(data) and data[j] == data[i]:
            j += 1
        if j - i >= 3:
            if lit:
                out.append(lit)
                lit = ""
            out.append(f"{data[i]:02x}*{j - i}")
        else:
            lit += data[i:j].hex()
        i = j
    if lit:
        out.append(lit)
    return " ".join(out)


def decode(text: str) -> bytes:
    """The inverse of :func:`encode` (what the program's ``fill`` does)."""
    out = bytearray()
    for tok in text.split():
        if "*" in tok:
            h, n = tok.split("*")
            out += bytes([int(h, 16)]) * int(n)
        else:
            out += bytes.fromhex(tok)
    return bytes(out)


def hex_lines(name: str, data: bytes, width: int = 100) -> str:
    h = encode(data)
    if len(h) <= width - 10:
        return f'static const char * {name} = "{h}";'
    rows, row = [], ""
    for tok in h.split(" "):
        while len(tok) > width:  # a long literal: split between bytes (``width`` is even)
            if row:
                rows.append(row)
                row = ""
            rows.append(tok[:width])
            tok = tok[width:]
        if row and len(row) + 1 + len(tok) > width:
            rows.append(row)
            row = tok
        else:
            row = f"{row} {tok}" if row else tok
    rows.append(row)
    return f"static const char * {name} =\n" + "\n".join(f'    "{r} "' for r in rows) + ";"


def literal(v: float) -> str:
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(float(v))


def hex_fill(kind: str = "unsigned char") -> str:
    """The body of a program's ``tensor()`` helper after its ``x = ggml_new_tensor_...`` line: the hex text ``h``
    ("hh*N" = N bytes hh) copied into ``x->data``, then ``return x;`` (the programs' own lines, one place)."""
    return (f"    {kind} * p = ({kind} *) x->data;  unsigned v;  int n, len;\n"
            "    while (sscanf(h, \" %2x%n\", &v, &len) == 1) {\n"
            "        h += len; n = 1;\n"
            "        if (*h == '*' && sscanf(h + 1, \"%d%n\", &n, &len) == 1) h += 1 + len;\n"
            f"        while (n-- > 0) *p++ = ({kind}) v;\n"
            "    }\n"
            "    return x;\n")
