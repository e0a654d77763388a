"""Reading an input as text: the size limit, UTF-8 for documents and YAML, the PEP 263 coding line for
kernel ``.py`` files. :class:`Unusable` carries the reason an input cannot be read."""

from __future__ import annotations

from opdesign.io.limits import MAX_TEXT_BYTES

#: Size limit of one input (DESIGN.md or interface file). Generated designs are 18-24 KB (about 350
#: lines), so 256 KiB leaves more than 10x room. markdown-it-py costs up to ~8 us per byte on adversarial
#: text (2.5 s for 256 KiB of "- a" lines or "[" characters); at the former 5 MiB limit a file of "a" lines
#: took 38 s and 2.2 GB. Measured worst cases at this limit (a 200-column table, nested lists, "a" lines)
#: stay below 3.5 s and 220 MB.
MAX_INPUT_BYTES = MAX_TEXT_BYTES  # opdesign.io.limits: 256 KiB


class Unusable(ValueError):
    """An input that cannot be read as a UTF-8 text document."""


def decode(data: bytes) -> str:
    """UTF-8 text of ``data`` (a BOM is dropped); raise :class:`Unusable` with the reason."""
    if len(data) > MAX_INPUT_BYTES:
        raise Unusable(f"larger than {MAX_INPUT_BYTES // 1024} KiB ({len(data)} bytes)")
    if b"\x00" in data:
        raise Unusable("binary file (NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise Unusable(f"not UTF-8 (invalid byte at offset {err.start})") from None


def decode_source(data: bytes) -> str:
    """Text of a Python source file: the encoding its PEP 263 line declares (``# -*- coding: latin-1 -*-``,
    :func:`tokenize.detect_encoding`), else UTF-8; the same size and NUL checks as :func:`decode`."""
    import io
    import tokenize

    if len(data) > MAX_INPUT_BYTES or b"\x00" in data:
        return decode(data)  # raises with the reason
    try:
        encoding, _lines = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as err:  # an unknown coding, one that contradicts a UTF-8 BOM, or undeclared non-UTF-8
        if "unknown encoding" in err.msg or "encoding problem" in err.msg:
            raise Unusable(f"encoding declaration: {err.msg}") from None
        return decode(data)  # no usable declaration: UTF-8 (raises naming the first invalid byte)
    if encoding in ("utf-8", "utf-8-sig"):
        return decode(data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        raise Unusable(f"not {encoding} as its coding line declares (invalid byte at offset {err.start})") from None
