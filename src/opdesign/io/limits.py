"""Every size limit of opdesign's inputs, in one place (the CLI and the agent tools read the same ones)."""

from __future__ import annotations

#: Largest file read whole: a SPEC, a golden ``.py``, a file an agent tool reads (bytes).
MAX_FILE_BYTES = 1_048_576
#: Largest text the validator checks: a DESIGN.md, an interface YAML or a kernel source, in UTF-8 bytes;
#: the agent tools also take at most this many characters of inline text (schema ``maxLength``).
MAX_TEXT_BYTES = 262_144
MAX_TEXT_CHARS = MAX_TEXT_BYTES
#: Largest JSON request ``opdesign tool call`` reads from stdin or ``--input`` (bytes).
MAX_REQUEST_BYTES = 2 * MAX_FILE_BYTES
