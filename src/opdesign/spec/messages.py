"""How a SPEC's validation errors read: ``field.path: message`` per failed field, with the cross-field
failures of :mod:`opdesign.spec` naming their own path (:class:`FieldError`)."""

from __future__ import annotations

import json

from pydantic import ValidationError


class FieldError(ValueError):
    """A cross-field failure that knows its own field path."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


NO_DYNAMIC_AXIS = ("the CANNBot contract needs at least one real dynamic axis (a length known only at run time); "
                   "declare batch, e.g. `dynamic_axes: [{name: batch, range: [1, 8], uniform: true}]` "
                   "(the range must hold shape.batch)")


def loc_text(loc: tuple) -> str:
    """``a.b.0.c``; a key that is not letters, digits and ``_`` (``":"``, ``""``) is quoted as ``["..."]``."""
    name = lambda t: t and all(c.isascii() and (c.isalnum() or c == "_") for c in t)  # noqa: E731
    return "".join((f".{t}" if i else t) if name(t) else f"[{json.dumps(t)}]" for i, t in enumerate(map(str, loc)))


def _entries(err: ValidationError) -> list[tuple[str, str]]:
    """``(field path, message)`` per failed field, cross-field failures under their own path."""
    entries = []
    for e in err.errors():
        loc = loc_text(e["loc"])
        ctx_err = (e.get("ctx") or {}).get("error")
        if isinstance(ctx_err, FieldError):
            loc = ".".join(p for p in (loc, ctx_err.path) if p)
            msg = str(ctx_err)
        elif e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif loc == "dynamic_axes" and e["type"] in ("missing", "too_short"):
            msg = NO_DYNAMIC_AXIS
        else:
            msg = e["msg"].removeprefix("Value error, ")
        entries.append((loc, msg))
    return entries


def format_errors(err: ValidationError) -> str:
    return "; ".join(f"{loc or '<root>'}: {msg}" for loc, msg in _entries(err))


def error_details(err: ValidationError) -> list[dict[str, str]]:
    """The same entries as :func:`format_errors`, as data: ``loc`` is the field path the message names."""
    return [{"loc": loc, "msg": msg} for loc, msg in _entries(err)]
