"""Plan -> artifact texts: DESIGN.md, eval/module_interfaces.yaml, <op_name>_scaffold.py, <op_name>_kernel.py.

Rendering formats what the estimator decided and never computes a design
number. Output is deterministic (same SPEC, same bytes): YAML is dumped with a
fixed key order, no timestamps, no absolute paths. Per-skeleton text comes from
the skeleton's template folder (``templates/<id>/``) and its registered
:class:`~opdesign.skeletons.base.Skeleton`; writing the files is :mod:`opdesign.io.publish`.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from functools import cache
from typing import Any, Literal

import jinja2
import yaml
from jinja2 import Environment, FileSystemBytecodeCache, FileSystemLoader, StrictUndefined
from jinja2.bccache import Bucket

from opdesign.catalog.headings import DEFAULT_LANG, HEADINGS, SUBHEADINGS
from opdesign.io.paths import cache_root, data_dir
from opdesign.plan.models import Plan
from opdesign.pypto_run.marker import HARNESS_MARKER
from opdesign.pypto_run.shrink import harness_configs
from opdesign.render.phrases import SAY, say, say_any
from opdesign.skeletons.registry import find, skeleton_of

Lang = Literal["en", "zh"]

def _cell(value: Any) -> str:
    """Markdown table cell: no pipes or newlines break the row (a phrase is said first)."""
    value = say_any(value)
    text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip() or "-"


#: Environment options: part of the bytecode cache folder name, so compiled templates never outlive them.
_ENV_OPTIONS = {"undefined": StrictUndefined, "keep_trailing_newline": True, "trim_blocks": True,
                "lstrip_blocks": True, "autoescape": False, "finalize": say_any}


class _BytecodeCache(FileSystemBytecodeCache):
    """Compiled templates kept between processes in ``cache_root()/jinja/<jinja, python, options>``.

    Jinja keys an entry by template name and file and stores the source checksum with it: a
    template whose text changed is compiled again, never served stale. A cache folder the file
    system refuses, or an unreadable entry, only means compiling in this process.
    """

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError):
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            os.makedirs(self.directory, exist_ok=True)
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> _BytecodeCache:
    options = ";".join(f"{k}={getattr(v, '__qualname__', v)}" for k, v in sorted(_ENV_OPTIONS.items()))
    tag = hashlib.sha256(options.encode()).hexdigest()[:12]
    version = f"jinja{jinja2.__version__}-py{sys.version_info[0]}{sys.version_info[1]}-{tag}"
    return _BytecodeCache(str(cache_root() / "jinja" / version), "%s.cache")


@cache
def _env() -> Environment:
    """The process's one Jinja environment: templates compile once per process (and once per
    source text across processes, :class:`_BytecodeCache`)."""
    env = Environment(loader=FileSystemLoader(str(data_dir("templates"))), bytecode_cache=_bytecode_cache(),
                      **_ENV_OPTIONS)
    env.filters["cell"] = _cell
    env.filters["py"] = repr
    env.filters["kib"] = lambda b: f"{b / 1024:.2f} KiB"
    env.globals["harness_configs"] = harness_configs  # the self-check's shapes (SK-01 kernel_selfcheck.j2)
    return env


def _dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None)


def render_design(plan: Plan, lang: Lang = DEFAULT_LANG, kernel: str | None = None) -> str:
    """DESIGN.md text: front matter with the ``opdesign:`` block, then the seven chapters.

    The pseudocode chapter is the kernel proper of :func:`render_kernel` (``kernel``, when the
    caller has rendered it already): a design has one dialect, the one that compiles.
    """
    front = {
        "schema_version": 1,
        "op_name": plan.op_name,
        "dynamic_axes": plan.dynamic_axes,
        "opdesign": plan.design_block(),
    }
    fallback = find(plan.fallback_from)
    body = _env().get_template("DESIGN.md.j2").render(
        plan=plan, h=HEADINGS[lang], sh=SUBHEADINGS[lang], lang=lang,
        pseudocode=kernel_proper(kernel if kernel is not None else render_kernel(plan)),
        skeleton_dir=skeleton_dir(plan),
        fallback_dir=fallback.template_dir if fallback else None,
    )
    return "---\n" + _dump_yaml(front) + "---\n\n" + body


def skeleton_dir(plan: Plan) -> str:
    """Template folder of the plan's skeleton (``Skeleton.template_dir``, e.g. ``sk01``)."""
    return skeleton_of(plan).template_dir


def render_kernel(plan: Plan) -> str:
    """``<op_name>_kernel.py``: the plan as a real PyPTO 0.2.0 kernel, then its self-check harness.

    The file is the kernel proper (``@pypto.frontend.jit`` function, constants, dynamic axes),
    the :data:`~opdesign.pypto_run.marker.HARNESS_MARKER` line, and the host side: torch
    golden, typical configs and a ``__main__`` that runs opdesign's verify adapter.
    """
    return _env().get_template(f"{skeleton_dir(plan)}/kernel.py.j2").render(plan=plan)


def kernel_proper(kernel: str) -> str:
    """The part of a rendered kernel file above the harness marker (the DESIGN.md pseudocode)."""
    head, marker, _ = kernel.partition(HARNESS_MARKER)
    if not marker:
        raise ValueError("rendered kernel has no self-check marker line")
    return head.rstrip("\n") + "\n"


def render_pseudocode(plan: Plan) -> str:
    """The pseudocode chapter's code: the kernel proper of :func:`render_kernel` (parses with ``ast``)."""
    return kernel_proper(render_kernel(plan))


def render_interfaces(plan: Plan) -> str:
    """eval/module_interfaces.yaml in the CANNBot format (domain.md §9)."""
    data = {
        "schema_version": 1,
        "op": plan.op_name,
        "primary_inputs": [t.model_dump() for t in plan.primary_inputs],
        "modules": [m.model_dump(context=SAY) for m in plan.modules],
        "final_outputs": [{"name": t.name, "source": f"module_{plan.modules[-1].id}"} for t in plan.final_outputs],
        "composition_verification": {
            "rtol": plan.rtol,
            "atol": plan.atol,
            "representative_shapes": [{"name": c["name"], **c["shape"]} for c in plan.typical_configs],
            "seeds": sorted({c["seed"] for c in plan.typical_configs}),
        },
        "numerical_notes": [say(n) for n in skeleton_of(plan).numerical_notes(plan)],
    }
    return _dump_yaml(data)


def render_scaffold(plan: Plan) -> str:
    """The numpy scaffold running the designed loop nest, with a float64 golden and a self-check."""
    return _env().get_template(f"{skeleton_dir(plan)}/scaffold.py.j2").render(plan=plan)


def render_all(plan: Plan, lang: Lang = DEFAULT_LANG) -> dict[str, str]:
    """Relative path -> file text for the four artifacts."""
    kernel = render_kernel(plan)
    return {
        "DESIGN.md": render_design(plan, lang, kernel),
        "eval/module_interfaces.yaml": render_interfaces(plan),
        f"{plan.op_name}_scaffold.py": render_scaffold(plan),
        f"{plan.op_name}_kernel.py": kernel,
    }


def render_plan_text(plan: Plan) -> str:
    """The Plan for people (``opdesign estimate``)."""
    return _env().get_template("plan.txt.j2").render(plan=plan)
