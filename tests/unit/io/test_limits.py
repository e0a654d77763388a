"""Every size limit lives in opdesign.io.limits; the SPEC loader, the golden estimator, the validator and
the agent tools read the same numbers (issue 29: three 1 MiB constants and two 262144s were copies)."""

from __future__ import annotations

from opdesign.agent import base
from opdesign.golden.estimate import MAX_GOLDEN_BYTES
from opdesign.io import limits
from opdesign.spec import MAX_SPEC_BYTES
from opdesign.validate import MAX_INPUT_BYTES


def test_one_place_for_every_limit() -> None:
    assert limits.MAX_FILE_BYTES == 1_048_576 and limits.MAX_TEXT_BYTES == 262_144
    assert MAX_SPEC_BYTES == MAX_GOLDEN_BYTES == base.MAX_FILE_BYTES == limits.MAX_FILE_BYTES
    assert MAX_INPUT_BYTES == base.MAX_TEXT_BYTES == base.MAX_TEXT_CHARS == limits.MAX_TEXT_BYTES
    assert base.MAX_REQUEST_BYTES == limits.MAX_REQUEST_BYTES == 2 * limits.MAX_FILE_BYTES
