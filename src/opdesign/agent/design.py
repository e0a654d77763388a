"""Agent tools over the design flow: SPEC schema, estimate, new, validate, rank, golden.

Each tool is an input model, a result model (or a library model) and a
``run`` function that calls the same library function as the CLI command of
the same job. Library modules are imported inside ``run`` so that a call loads
only what it needs.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from opdesign.agent.base import (
    MAX_FILE_BYTES,
    MAX_TEXT_BYTES,
    MAX_TEXT_CHARS,
    InputError,
    NotFoundError,
    Root,
    Tool,
    TooLargeError,
    ToolInput,
    ToolOutput,
    require_library,
)
from opdesign.catalog.headings import DEFAULT_LANG
from opdesign.io.safefs import Resolved, read_fd

if TYPE_CHECKING:
    from opdesign.validate.engine import Unusable

SPEC_PATH = Field(description="SPEC YAML file, relative to the tool root", min_length=1, max_length=4096)


# --- spec_schema ---


class SpecSchemaInput(ToolInput):
    """No arguments."""


class SpecSchemaResult(ToolOutput):
    json_schema: dict[str, Any] = Field(description="JSON Schema (draft 2020-12) of a SPEC (schema_version 1)")


def _spec_schema(args: SpecSchemaInput, root: Root) -> SpecSchemaResult:
    from opdesign.spec import spec_json_schema

    return SpecSchemaResult(json_schema=spec_json_schema())


# --- estimate_design ---


class EstimateDesignInput(ToolInput):
    spec_path: str = SPEC_PATH


class _SpecSource:
    """A SPEC read once inside the root: its Spec, its name and a reader for its golden (opened relative to
    the SPEC's folder descriptor, inside the same root, at most MAX_FILE_BYTES)."""

    def __init__(self, root: Root, spec_path: str) -> None:
        from opdesign.spec import spec_from_bytes

        raw, res = root.read(spec_path, "spec_path", MAX_FILE_BYTES)
        self.root = root
        self.folder = Resolved(res.stack, res.names[:-1], "dir")
        self.name = str(root.path.joinpath(*res.names))
        res.stack = []  # now owned by self.folder
        res.close()
        try:
            self.spec = spec_from_bytes(raw, self.name)
        except BaseException:
            self.close()
            raise

    def read_golden(self, rel: str) -> tuple[bytes, str]:
        data, res = self.root.read(rel, "golden", MAX_FILE_BYTES, start=self.folder)
        res.close()
        return data, str(self.root.path.joinpath(*res.names))

    def plan(self, tuning: bool = False) -> Any:
        from opdesign.workflows.new import plan_from_spec

        return plan_from_spec(self.spec, self.name, tuning=tuning, read=self.read_golden)

    def close(self) -> None:
        self.folder.close()

    def __enter__(self) -> _SpecSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _plan_model() -> type[BaseModel]:
    from opdesign.plan import Plan

    return Plan


def _estimate_design(args: EstimateDesignInput, root: Root) -> BaseModel:
    with _SpecSource(root, args.spec_path) as source:
        return source.plan()


# --- new_design ---


class NewDesignInput(ToolInput):
    spec_path: str = SPEC_PATH
    out_dir: str | None = Field(None, min_length=1, max_length=4096,
                                description="output folder relative to the tool root (default: <op_name>)")
    lang: Literal["en", "zh"] = Field(DEFAULT_LANG, description=(
        "DESIGN.md chapter headings: zh (default) passes the CANNBot contract (its validator compares the "
        "Chinese heading text); en gives English headings that the CANNBot validator does not accept"))
    force: bool = Field(False, description="overwrite existing files; without it an existing file is an error")
    candidate: int | None = Field(None, ge=1, le=1 << 31, description=(
        "write the design of rank N of rank_candidates (same SPEC, same numbering, within_form false) "
        "instead of the plan's own; SK-01 only; a rank whose tiles break a hard rule is invalid_input naming it"))
    tiles: str | None = Field(None, min_length=1, max_length=1024, description="pin tiles by hand, as `opdesign new "
                              "--tiles`: q_tile=..,kv_tile=..,qk_tile=MxN,pv_tile=MxN,vec_tile=RxC,unroll_factor=..,"
                              "head_group=..,streams=..; SK-01 only; not with candidate")

    @model_validator(mode="after")
    def _one_pin(self) -> NewDesignInput:
        if self.candidate is not None and self.tiles is not None:
            raise ValueError("candidate and tiles are mutually exclusive (give one)")
        return self


class NewDesignResult(ToolOutput):
    out_dir: str = Field(description="output folder, relative to the tool root")
    files: list[str] = Field(description="files written, relative to the tool root")
    op_name: str
    skeleton: str = Field(description="skeleton card id, e.g. SK-01")
    form: str = Field(description="baseline or performance")
    q_tile: int
    kv_tile: int
    root_count: int
    module_count: int
    ub_bytes: int = Field(description="UB bytes per vector sub-block the plan uses")
    ub_capacity_bytes: int


def _new_design(args: NewDesignInput, root: Root) -> NewDesignResult:
    from opdesign.io.publish import RootTarget
    from opdesign.workflows.new import new_design

    with _SpecSource(root, args.spec_path) as source:
        if args.candidate is None and args.tiles is None:
            plan = source.plan(tuning=True)
        else:  # the same pinned plan as `opdesign new --candidate N` / `--tiles`, its golden read inside the root
            from opdesign.workflows.pin import pinned_plan
            plan = pinned_plan(source.spec, source.name, candidate=args.candidate, tiles=args.tiles,
                               read=source.read_golden)
    target = RootTarget(lambda name: root.walk(name, "out_dir", want="out", create_parents=True), root.jail,
                        args.out_dir, force_hint='set "force": true')
    written = new_design(source.name, lang=args.lang, force=args.force, plan=plan, target=target).files
    return NewDesignResult(
        out_dir=target.display,
        files=[path.as_posix() for path in written],
        op_name=plan.op_name,
        skeleton=plan.skeleton.id,
        form=plan.form,
        q_tile=plan.q_tile,
        kv_tile=plan.kv_tile,
        root_count=plan.root_count,
        module_count=plan.module_count,
        ub_bytes=plan.ub_budget.total_bytes,
        ub_capacity_bytes=plan.ub_budget.capacity_bytes,
    )


# --- validate_design ---


class ValidateDesignInput(ToolInput):
    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "oneOf": [  # exactly one source, and not null
            {"required": ["design_path"], "properties": {"design_path": {"type": "string"}}},
            {"required": ["text"], "properties": {"text": {"type": "string"}}},
        ],
        "dependentRequired": {"interfaces_text": ["text"]},
    })

    design_path: str | None = Field(None, min_length=1, max_length=4096,
                                    description="a DESIGN.md, a PyPTO kernel .py or an operator folder (its "
                                                "DESIGN.md and *_kernel.py / *_impl.py), relative to the tool root")
    text: str | None = Field(None, max_length=MAX_TEXT_CHARS,
                             description="inline DESIGN.md text (instead of design_path)")
    interfaces_text: str | None = Field(None, max_length=MAX_TEXT_CHARS,
                                        description="inline eval/module_interfaces.yaml text (only with text)")
    target_pypto: str | None = Field(None, min_length=1, max_length=64, description="the PyPTO release (0.2.0) or "
                                     "source commit prefix the kernel code is checked against (default: pinned)")

    @model_validator(mode="after")
    def _one_source(self) -> ValidateDesignInput:
        if (self.design_path is None) == (self.text is None):
            raise ValueError("give exactly one of design_path or text")
        if self.interfaces_text is not None and self.text is None:
            raise ValueError("interfaces_text needs text")
        return self


def _report_model() -> type[BaseModel]:
    return require_library("opdesign.validate", "Report")


def _validate_design(args: ValidateDesignInput, root: Root) -> BaseModel:
    target = require_library("opdesign.catalog.pypto_api", "check_target")(args.target_pypto)  # unknown: invalid_input
    if args.text is not None:
        if (size := len(args.text.encode("utf-8", "surrogatepass"))) > MAX_TEXT_BYTES:
            raise TooLargeError(f"validate_design: text: {size} bytes in UTF-8, over the limit of {MAX_TEXT_BYTES}",
                                {"field": "text", "bytes": size, "limit": MAX_TEXT_BYTES})
        validate_text = require_library("opdesign.workflows.validate", "validate_text")
        return validate_text(args.text, name="DESIGN.md", interfaces_text=args.interfaces_text, target_pypto=target)
    from opdesign.errors import OpdesignError
    from opdesign.validate.model import Report
    from opdesign.workflows.validate import (
        DESIGN_NAME,
        INTERFACES_PATH,
        Unusable,
        kernel_findings_loaded,
        validate_loaded,
    )

    kernels: list[tuple[str, bytes | Unusable]] = []
    with root.walk(args.design_path, "design_path") as res:
        if res.kind != "dir" and args.design_path.endswith(".py"):  # a kernel source: the code rules only
            name = str(root.path.joinpath(*res.names))
            data = read_fd(res.fd, MAX_TEXT_BYTES, args.design_path, "design_path")
            return Report.build([name], kernel_findings_loaded(name, data, target))
        if res.kind == "dir":
            kernels = _folder_kernels(root, res)
            try:
                data, design = root.read(DESIGN_NAME, "design_path", MAX_TEXT_BYTES, start=res)
            except (NotFoundError, InputError) as err:  # as validate_paths: an unusable-input finding
                why = "no such file" if isinstance(err, NotFoundError) else err.message.split(": ", 1)[-1]
                return validate_loaded(str(root.path.joinpath(*res.names, DESIGN_NAME)), Unusable(why), "", None)
        else:
            data = read_fd(res.fd, MAX_TEXT_BYTES, args.design_path, "design_path")
            design = Resolved([os.dup(fd) for fd in res.stack], list(res.names), "file")
        with design:
            folder = Resolved(design.stack, design.names[:-1], "dir")
            design.stack = []
            with folder:
                name = str(root.path.joinpath(*design.names))
                iface_name = str(root.path.joinpath(*folder.names, *INTERFACES_PATH))
                try:
                    iface, found = root.read("/".join(INTERFACES_PATH), "design_path", MAX_TEXT_BYTES + 1,
                                             start=folder)
                    found.close()
                except NotFoundError:
                    iface = None
                except (InputError, OpdesignError) as err:
                    iface = Unusable(err.message.split(": ", 1)[-1])
    return validate_loaded(name, data, iface_name, iface, kernels, target)


def _folder_kernels(root: Root, folder: Resolved) -> list[tuple[str, bytes | Unusable]]:
    """(name, bytes) of the folder's kernel sources (``*_kernel.py`` / ``*_impl.py``), read through its
    descriptor; a file that cannot be read gives the reason instead of its bytes."""
    from fnmatch import fnmatchcase

    from opdesign.errors import OpdesignError
    from opdesign.validate.engine import Unusable
    from opdesign.validate.parse.kernel_source import KERNEL_GLOBS

    try:
        entries = sorted(os.listdir(folder.fd))
    except OSError:
        return []
    out: list[tuple[str, bytes | Unusable]] = []
    for entry in entries:
        if not any(fnmatchcase(entry, pattern) for pattern in KERNEL_GLOBS):
            continue
        name = str(root.path.joinpath(*folder.names, entry))
        try:
            data, found = root.read(entry, "design_path", MAX_TEXT_BYTES, start=folder)
            found.close()
        except (InputError, OpdesignError) as err:  # a dangling link, a folder or FIFO named like a kernel
            out.append((name, Unusable(err.message.split(": ", 1)[-1])))
            continue
        out.append((name, data))
    return out


# --- rank_candidates ---


class RankCandidatesInput(ToolInput):
    spec_path: str = SPEC_PATH
    top: int = Field(10, ge=1, le=1000, description="keep the best N candidates (and N rejected ones)")
    include_rejected: bool = Field(False, description="also list candidates that break a hard rule, with why")
    within_form: bool = Field(False, description="leave out candidates that break the plan's form (SK-01-P1: the "
                                                 "performance form's q_tile); otherwise they are ranked and flagged "
                                                 "in form_rules")


def _ranking_model() -> type[BaseModel]:
    return require_library("opdesign.tuning", "Ranking")


def _rank_candidates(args: RankCandidatesInput, root: Root) -> BaseModel:
    rank = require_library("opdesign.workflows.new", "rank_spec")
    with _SpecSource(root, args.spec_path) as source:
        return rank(source.spec, source.plan(), args.top, args.include_rejected, within_form=args.within_form)


# --- estimate_golden ---


class EstimateGoldenInput(ToolInput):
    golden_path: str = Field(min_length=1, max_length=4096,
                             description="golden .py file relative to the tool root (parsed, never run)")
    function: str | None = Field(None, min_length=1, max_length=256,
                                 description="function to analyse (default: the only *_golden one)")
    state_groups: int | None = Field(None, ge=0, le=1000, description="loop-carried state groups S (default: detected)")
    cross_tile_reduce: int | None = Field(None, ge=0, le=1000,
                                          description="reductions across a tiled axis (default: detected)")


def _golden_model() -> type[BaseModel]:
    from opdesign.golden import GoldenReport

    return GoldenReport


def _estimate_golden(args: EstimateGoldenInput, root: Root) -> BaseModel:
    from opdesign.golden import estimate_golden

    data, res = root.read(args.golden_path, "golden_path", MAX_FILE_BYTES)
    res.close()
    return estimate_golden(root.path.joinpath(*res.names), args.function, args.state_groups,
                           args.cross_tile_reduce, source=data)


DESIGN_TOOLS = (
    Tool(
        "spec_schema",
        "Return the JSON Schema of an opdesign SPEC (the YAML file that describes an attention operator: "
        "op_name, device, dtype, layout, shape, dynamic_axes, mask, kv_cache, quant, typical_configs). "
        "Call it before writing a SPEC so that every field and allowed value is right the first time.",
        SpecSchemaInput, lambda: SpecSchemaResult, _spec_schema,
    ),
    Tool(
        "estimate_design",
        "Compute the design plan of a SPEC without writing anything: chosen skeleton and atoms, baseline or "
        "performance form with the checks behind it, Q/KV tiles, cube and vector tile shapes, unroll factor, "
        "root and task counts, UB/L1/L0 budgets, configuration and module split, each number with the rule or "
        "card it comes from. Use it to check a SPEC and discuss numbers before calling new_design.",
        EstimateDesignInput, _plan_model, _estimate_design,
    ),
    Tool(
        "new_design",
        "Plan a SPEC and write the design artifacts under out_dir: DESIGN.md (seven CANNBot chapters, "
        "front matter with the plan's numbers), eval/module_interfaces.yaml and <op_name>_scaffold.py, a numpy "
        "kernel of the designed loop nest whose __main__ self-check compares it with a golden. Existing files "
        "are never overwritten unless force is true (error output_exists). Returns the files and key numbers.",
        NewDesignInput, lambda: NewDesignResult, _new_design,
    ),
    Tool(
        "validate_design",
        "Lint a DESIGN.md (design_path: the file or its operator folder, or inline text plus optional "
        "interfaces_text) against the document contract, interface wiring, constraint tables (C-TILE, C-LOOP, "
        "C-SYM, C-DATA, C-API) and SK/AT card rules; a kernel .py path (or a folder's *_kernel.py) gets the "
        "code rules on its own lines. Returns findings with rule id, level (error, warning, "
        "info), message, file and line; fix every error-level finding, then validate again.",
        ValidateDesignInput, _report_model, _validate_design,
    ),
    Tool(
        "rank_candidates",
        "Rank the legal SK-01 tilings of a SPEC (Q/KV, QK/PV and vector tiles, unroll, head groups, streams) "
        "with the PTO cost model, best first, with cycles per stage and the bottleneck; chosen_rank is where the "
        "plan's own tiles land. include_rejected adds candidates that break a hard rule, with the rule ids. The "
        "score orders candidates for benchmarking; it is not a run time. SK-02/SK-16 plans are refused.",
        RankCandidatesInput, _ranking_model, _rank_candidates,
    ),
    Tool(
        "estimate_golden",
        "Estimate how many modules an operator's golden Python function calls for, by parsing the file (it is "
        "never executed): CANNBot-compatible signals and design parameters, attention structure (online-softmax "
        "state, backward gradients) and the recommended module count with its rule and reason.",
        EstimateGoldenInput, _golden_model, _estimate_golden,
    ),
)
