"""Standard streams the CLI can rely on: any terminal encoding, closed, full or broken streams.

- Text goes out with ``errors="backslashreplace"``: on a terminal that is not UTF-8
  (``PYTHONIOENCODING=latin-1``, a ``tr_TR.ISO-8859-9`` locale) a character it cannot
  show is written as ``\\u4f2a``, never a UnicodeEncodeError.
- JSON goes out as ASCII (:func:`ascii_json`: every non-ASCII character a ``\\uXXXX``
  escape, as ``json.dumps(ensure_ascii=True)`` writes it), so it reads back the same
  whatever the terminal's encoding.
- A stream that is closed (``>&-``), full (``/dev/full``) or broken (the reader of the
  pipe has exited) is an ``io_error``: exit 2, said on the other stream when it works.
  :func:`guard` wraps ``sys.stdout`` / ``sys.stderr`` so that a failed write raises
  :class:`StreamError`; :func:`finish` flushes both before the exit code is final.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from opdesign.errors import EXIT_INPUT, ToolIOError

_NON_ASCII = re.compile(r"[^\x00-\x7e]")  # DEL too, as json.dumps(ensure_ascii=True)


class StreamError(ToolIOError):
    """stdout or stderr could not be written (closed, full, broken pipe)."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"cannot write to {name}: {why}", {"stream": name})
        self.stream = name


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # a UTF-16 surrogate pair, as json.dumps writes it
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def ascii_json(text: str) -> str:
    """JSON text with every non-ASCII character escaped; the same value when parsed.

    Valid for any JSON document: outside strings JSON is ASCII, inside them ``\\uXXXX`` is an escape.
    """
    return _NON_ASCII.sub(_escape, text)


class _Guarded:
    """A text stream whose failed writes raise :class:`StreamError` naming it; everything else delegates."""

    def __init__(self, stream: Any, name: str) -> None:
        self._stream = stream
        self._name = name
        self.why = ""  # set when a write or flush failed

    def _fail(self, err: BaseException) -> StreamError:
        self.why = getattr(err, "strerror", None) or str(err) or type(err).__name__
        return StreamError(self._name, self.why)

    def write(self, text: str) -> int:
        if self.why:
            raise StreamError(self._name, self.why)
        try:
            return self._stream.write(text)
        except (OSError, ValueError) as err:  # ValueError: I/O operation on closed file
            raise self._fail(err) from None

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.why:
            raise StreamError(self._name, self.why)
        try:
            self._stream.flush()
        except (OSError, ValueError) as err:
            raise self._fail(err) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def closed() -> list[str]:
    """Names of the standard output streams that are not there (``None``: the descriptor was closed)."""
    return [name for name in ("stdout", "stderr") if getattr(sys, name) is None or getattr(sys, name).closed]


def guard() -> None:
    """Make stdout and stderr escape what their encoding cannot show and report failed writes."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, _Guarded):
            continue
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (a test's capture) or closed
            pass
        setattr(sys, name, _Guarded(stream, name))


def echo(text: str = "", nl: bool = True, err: bool = False) -> None:
    """Write ``text`` (and a newline) to stdout or stderr and flush; :class:`StreamError` when that fails."""
    name = "stderr" if err else "stdout"
    stream = getattr(sys, name)
    if stream is None:
        raise StreamError(name, "the stream is closed")
    try:
        stream.write(text + "\n" if nl else text)
        stream.flush()
    except (OSError, ValueError) as error:  # an unguarded stream (the library used without main())
        raise StreamError(name, getattr(error, "strerror", None) or str(error)) from None


def say(text: str, err: bool = True) -> bool:
    """:func:`echo` that never raises: False when the stream failed."""
    try:
        echo(text, err=err)
    except StreamError:
        return False
    return True


def _silence(stream: Any) -> None:
    """Point a failed stream's descriptor at /dev/null so that the interpreter's last flush is quiet."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (AttributeError, OSError, ValueError):
        pass


def _failed(name: str) -> str:
    """Why ``sys.<name>`` failed after a last flush, or ""."""
    stream = getattr(sys, name)
    if stream is None:
        return ""
    try:
        stream.flush()
    except (StreamError, OSError, ValueError):
        pass
    return getattr(stream, "why", "")


def finish(code: int) -> int:
    """Flush stdout and stderr: the exit code, or 2 when one of them failed (``io_error``, said on stderr
    when stdout failed and stderr works)."""
    out = _failed("stdout")
    if out and not _failed("stderr"):
        say(f"error: io_error: cannot write to stdout: {out} (output was lost)")
    failed = [name for name in ("stdout", "stderr") if _failed(name)]
    for name in failed:
        stream = getattr(sys, name)
        _silence(stream)
        setattr(sys, name, stream._stream)  # the interpreter's last flush goes to /dev/null, quietly
    return EXIT_INPUT if failed else code
