"""The API rule: kernel code uses only what the pinned PyPTO release has.

Checked against ``constraints/pypto_api.yaml`` (generated from the installed release by
``scripts/gen_pypto_api.py``) without importing PyPTO; see :mod:`opdesign.validate.analysis.api_surface`
for what is checked and how values are typed.
"""

from __future__ import annotations

from collections.abc import Iterator

from opdesign.catalog.pypto_api import known_targets
from opdesign.errors import InputError
from opdesign.validate.analysis.api_surface import check_source, load_api_surface
from opdesign.validate.api import Context, Hit, rule


@rule("OD-PC-05", "error", "pseudocode", "constraints/pypto_api.yaml (the PyPTO release's public API)",
      "the kernel uses a pypto name, keyword or tensor method the release does not have, or view/assemble "
      "offsets whose length is not the tensor's rank",
      bad="import pypto\n\n\n@pypto.frontend.jit()\ndef k(q: pypto.Tensor((S, D), pypto.DT_BF16)):\n"
          "    pypto.sg_set_scope(2)\n    t = pypto.view(q, [16, 64], [0, 0, 0, 0])",
      good="import pypto\n\n\n@pypto.frontend.jit()\ndef k(q: pypto.Tensor((S, D), pypto.DT_BF16)):\n"
           "    pypto.set_pass_options(sg_set_scope=2)\n    t = pypto.view(q, [16, 64], [0, 0])")
def check_api_surface(ctx: Context) -> Iterator[Hit]:
    """A design's kernel compiles only with names the release exports: the manifest of PyPTO's public
    surface (module functions with their parameters, enum members, the methods of ``Tensor`` and of
    symbolic scalars) is checked statically. Known wrong forms name their replacement:
    ``pypto.sg_set_scope(n)`` is ``pypto.set_pass_options(sg_set_scope=n)``, ``tril_mask`` /
    ``triu_mask`` do not exist, ``pypto.INTRINSIC`` / ``PrecisionType`` are not in 0.2.0, a tensor has
    no ``.to_scalar()`` or ``.max(0)`` (``.min()`` / ``.max()`` belong to symbolic scalars), and
    ``view`` / ``assemble`` offsets have the indexed tensor's rank (reshape to 2-D first). Code that
    does not parse as Python is left to OD-PC-02.

    The target is the pinned release unless ``--target-pypto`` / the ``target-pypto`` setting names
    another manifest (a later source commit). A name the target lacks but a later manifest has is
    reported as "not in PyPTO 0.2.0 (added later ...)", once per line. A design whose block names its
    release (``pypto: 0.2.0``) is checked against that release's manifest.

    Applies to hand-written designs (no ``opdesign:`` block) and to designs whose block names the
    release they target (``pypto: 0.2.0``); an ``opdesign:`` block without ``pypto`` comes from an
    opdesign version that wrote card-notation pseudocode, not a kernel for a release."""
    program = ctx.program
    if program is None or not program.parsed:
        return
    api = load_api_surface(ctx.target_pypto)
    if ctx.block is not None:
        target = ctx.block.get("pypto")
        if target is None:
            return
        if str(target) != api.release and str(target) != api.target:
            try:  # the block names the release the design is for: its manifest, when opdesign ships it
                api = load_api_surface(str(target))
            except InputError:
                yield Hit(ctx.block_line("pypto"), f"the design targets PyPTO {target}; opdesign's API manifests "
                                                   f"are {', '.join(known_targets())}, so its names were not checked")
                return
    try:
        hits = check_source(program.fence.content, api)
    except SyntaxError:
        return
    for hit in hits:
        yield Hit(program.fence.first_line + hit.line - 1, hit.message)

