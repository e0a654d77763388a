"""What a kernel ``.py`` is checked for: whether it holds a kernel at all (OD-KN-08) and whether it is
attention (the ``attention_only`` rules).

Used by the engine's kernel path (:func:`opdesign.validate.engine._lint_kernel`); kernels are found by
:func:`opdesign.validate.parse.kernel_source.find_kernels`, attention by
:mod:`opdesign.validate.analysis.attention_chain`.
"""

from __future__ import annotations

from collections.abc import Iterator

from opdesign.validate.analysis.attention_chain import has_attention_chain
from opdesign.validate.api import Context, Hit, Rule, rule
from opdesign.validate.parse.kernel_source import KERNEL_SHAPES, NO_KERNEL_RULE, SYNTAX_RULE, KernelSource

#: rules that read a kernel file as a whole, kernel or not (OD-PC-05: the pypto names it uses)
WHOLE_FILE_RULES = ("OD-PC-05",)


def is_attention_kernel(ctx: Context) -> bool:
    """A kernel file is attention when its docstring names an attention skeleton, or (naming none) when
    its code holds the C1 -> V1 -> C2 chain (:mod:`opdesign.validate.analysis.attention_chain`)."""
    from opdesign.validate.analysis.blockdata import is_attention_design

    if ctx.declared_skeleton is not None:
        return is_attention_design(ctx)
    try:
        return has_attention_chain(ctx.program)
    except Exception:  # noqa: BLE001 - too deep or too odd to follow: the attention rules run, as before
        return True


def no_kernel_message(source: KernelSource, rules: dict[str, Rule]) -> str:
    """OD-KN-08's message: why no kernel was found and which kernel rules did not run."""
    skipped = [r.id for r in rules.values()
               if r.on_kernel and r.id not in (SYNTAX_RULE, NO_KERNEL_RULE, *WHOLE_FILE_RULES)]
    why = ("the file does not import pypto" if not source.imports_pypto else
           f"none of its functions is a {', a '.join(KERNEL_SHAPES[:2])} or a {KERNEL_SHAPES[2]}")
    if source.other_jits:
        why += f"; its @{', @'.join(source.other_jits)} functions are another package's kernels, not pypto.frontend's"
    return f"no PyPTO kernel found ({why}): {len(skipped)} kernel rules did not run ({', '.join(skipped)})"


@rule("OD-KN-08", "info", "pseudocode", "opdesign validate (kernel source)",
      "no PyPTO kernel was found in the .py: the kernel rules did not run",
      bad="import pypto\n\n\ndef add_one(x):\n    return pypto.add(x, 1.0)",
      good=("import pypto\n\n\ndef make_kernel(rows):\n    @pypto.frontend.jit()\n    def add_one(x, out):\n"
            "        for r in pypto.loop(rows, name='LOOP_r'):\n            out[:] = pypto.add(x, 1.0)\n"
            "    return add_one"),
      kind="kernel", kernel=True)
def check_kernel_found(ctx: Context) -> Iterator[Hit]:
    """A kernel ``.py`` holds at least one kernel, in any of three shapes and at any depth (a factory
    function, a closure, a method, the main guard): a function decorated with ``@pypto.frontend.jit``
    (or a ``jit`` imported from it), a ``with pypto.function(...)`` body, or a function that calls
    ``pypto.loop`` / ``loop_unroll``. A file with none (a module of helpers, a test of tensor
    operations outside any kernel) gets this one info finding at line 1, naming the kernel rules that
    did not run and why, so that skipped never reads as passed. Emitted by the engine
    (:func:`opdesign.validate.engine._lint_kernel`, :func:`no_kernel_message`)."""
    return iter(())
