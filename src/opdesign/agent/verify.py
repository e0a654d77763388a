"""Agent tool ``verify_design``: the JSON of ``opdesign verify DIR --json`` (optional extra ``opdesign[pypto]``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from opdesign.agent.base import Root, Tool, ToolInput


class VerifyDesignInput(ToolInput):
    design_path: str = Field(min_length=1, max_length=4096,
                             description="design folder written by new_design (holds <op_name>_kernel.py), "
                                         "relative to the tool root")
    configs: list[str] | None = Field(None, max_length=64, description="typical configs to run (default: all)")
    quick: bool = Field(False, description="shrunk shapes; every shrink is stated in configs[].shrunk")
    no_verify: bool = Field(False, description="compile + SIM only; verify.status is then SKIPPED")


def _report_model() -> type[BaseModel]:
    from opdesign.pypto_run.design import VerifyReport

    return VerifyReport


def _verify_design(args: VerifyDesignInput, root: Root) -> BaseModel:
    import sys

    from opdesign.pypto_run.design import verify_dir

    folder = root.folder(args.design_path, "design_path")
    report = verify_dir(folder, configs=args.configs, quick=args.quick, verify=not args.no_verify,
                        progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    return report.model_copy(update={"errors": [e.model_copy(update={"message": root.scrub(e.message)})
                                                for e in report.errors]})


VERIFY_TOOLS = (
    Tool(
        "verify_design",
        "Run the real PyPTO 0.2.0 kernel that new_design wrote (<op_name>_kernel.py) on the CPU, per typical "
        "config: compile, PyPTO's SIM cost-model run (sim_us, utilization) and pass verification against the "
        "torch golden (PASS/FAILED, max diffs, failed passes). Errors carry the stage and the kernel and "
        "DESIGN.md lines. Takes about 10 s per config after a one-time calculator build; needs the "
        "opdesign[pypto] extra (error extra_missing otherwise). passed is true only when every config passed.",
        VerifyDesignInput, _report_model, _verify_design,
    ),
)
