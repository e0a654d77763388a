"""Run the rules on DESIGN.md files or text: reading, context building, suppressions, robustness.

Inputs are unusable (rule OD-DOC-01, exit code 2) when the path is missing or
unreadable, a directory has no DESIGN.md, the bytes hold a NUL (binary), are
not UTF-8, or exceed :data:`MAX_INPUT_BYTES` (256 KiB). The interface file is
``eval/module_interfaces.yaml`` next to the DESIGN.md; its problems are
findings of OD-IF-01 (exit code 1), not unusable input.

A pseudocode chapter without Python code (prose, a ```text block) runs no rule of the
``pseudocode`` family; one OD-PC-06 info finding lists them (:mod:`opdesign.validate.parse.prose`).

No exception escapes: a check that raises is reported as OD-DOC-10 naming the
rule, so the document is never reported as valid for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path, PurePosixPath

from opdesign.io import yamlsafe
from opdesign.validate.analysis.blockdata import is_attention_design
from opdesign.validate.api import Context
from opdesign.validate.engine import inline, memo
from opdesign.validate.engine.collect import all_rules
from opdesign.validate.model import UNUSABLE_RULE, Finding, Report
from opdesign.validate.parse.document import parse
from opdesign.validate.parse.kernel_source import KERNEL_GLOBS, NO_KERNEL_RULE, SYNTAX_RULE, read_kernel
from opdesign.validate.parse.prose import prose_pseudocode
from opdesign.validate.parse.pseudocode import MAX_KERNELS, nesting, read_programs
from opdesign.validate.parse.textinput import MAX_INPUT_BYTES, Unusable, decode, decode_source
from opdesign.validate.rules.crosscheck import decoded_sources, design_findings, folder_sources
from opdesign.validate.rules.kernel_verdict import WHOLE_FILE_RULES, is_attention_kernel, no_kernel_message

INTERFACES_PATH = ("eval", "module_interfaces.yaml")
DESIGN_NAME = "DESIGN.md"
INTERNAL_RULE = "OD-DOC-10"
SUPPRESSION_RULE = "OD-DOC-09"
PROSE_RULE = "OD-PC-06"
EMPTY_PSEUDOCODE_RULE = "OD-PC-01"


def _check_text(text: str) -> None:
    if len(text) > MAX_INPUT_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
        raise Unusable(f"larger than {MAX_INPUT_BYTES // 1024} KiB")
    if "\x00" in text:
        raise Unusable("binary text (NUL characters)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Unusable("text holds lone surrogates (not encodable as UTF-8)") from None


def _interfaces(text: str | None, state: str) -> tuple[yamlsafe.Loaded | None, str, str, int]:
    """(loaded, state, problem, line) for the interface text."""
    if text is None:
        return None, state, "", 1
    try:
        _check_text(text)
        return yamlsafe.load(text), "ok", "", 1
    except Unusable as err:
        return None, "invalid", f"interface file unusable: {err}", 1
    except yamlsafe.YamlProblem as err:
        return None, "invalid", f"interface file: {err.message}", err.line or 1


def _run(text: str, design: str, iface_name: str, iface: tuple[yamlsafe.Loaded | None, str, str, int],
         target: str | None = None) -> list[Finding]:
    try:
        doc = parse(text)
        prose = prose_pseudocode(doc)
        programs, kernel_blocks = ([], 0) if prose is not None else read_programs(doc)
    except Exception as err:  # noqa: BLE001 - the markdown/ast layer must never crash the run
        return [Finding(rule=INTERNAL_RULE, level="error", file=design, line=1,
                        message=_one_line(f"document could not be parsed: {type(err).__name__}: {err}"))]
    loaded, state, problem, problem_line = iface
    ctx = Context(doc=doc, interfaces=loaded, interfaces_state=state, interfaces_problem=problem,
                  interfaces_problem_line=problem_line, program=programs[0] if programs else None,
                  target_pypto=target)
    findings: list[Finding] = []
    if kernel_blocks > MAX_KERNELS:
        findings.append(Finding(rule=INTERNAL_RULE, level="error", file=design, line=programs[-1].fence.first_line,
                                message=f"the pseudocode chapter has {kernel_blocks} kernel-like code blocks; only the "
                                        f"first {MAX_KERNELS} were checked"))
    skipped: list[str] = []
    attention = is_attention_design(ctx)
    for rule in all_rules().values():
        if rule.needs_block and ctx.block is None:
            continue
        if rule.attention_only and not attention:
            continue
        if prose is not None and rule.family == "pseudocode" and rule.id != PROSE_RULE:
            if rule.id != EMPTY_PSEUDOCODE_RULE:  # the chapter holds text: not empty, nothing to skip
                skipped.append(rule.id)
            continue
        ctx.program_read = False
        findings += _check(rule, ctx, design, iface_name)
        if ctx.program_read:  # the rule looks at the pseudocode: run it on every kernel block
            for program in programs[1:]:
                findings += _check(rule, replace(ctx, program=program), design, iface_name)
    if prose is not None:
        findings.append(Finding(rule=PROSE_RULE, level="info", file=design, line=prose.line,
                                message=f"the pseudocode chapter holds no Python code (prose or plain text): "
                                        f"{len(skipped)} code rules skipped, not passed ({', '.join(skipped)})"))
    return inline.apply_design(doc.directives, list(dict.fromkeys(findings)), design)


def _run_kernel(text: str, name: str, target: str | None = None) -> list[Finding]:
    """Findings of a kernel ``.py`` (:mod:`opdesign.validate.parse.kernel_source`): the rules with ``on_kernel``
    (once per text and target in a process, :mod:`opdesign.validate.engine.memo`), with its
    ``# opdesign: disable=`` comments applied (:mod:`opdesign.validate.engine.inline`)."""
    found = memo.findings(("kernel", _rules_token(), str(target), text), {memo.KERNEL: name},
                          lambda: _lint_kernel(text, memo.KERNEL, target))
    return inline.apply(text, found, name)


def _rules_token() -> str:
    """The rule objects in force (a rule replaced, e.g. by a test, is another memo key)."""
    return " ".join(map(str, map(id, all_rules().values())))


def _lint_kernel(text: str, name: str, target: str | None = None) -> list[Finding]:
    try:
        source = read_kernel(text)
    except Exception as err:  # noqa: BLE001 - never a traceback
        return [Finding(rule=INTERNAL_RULE, level="error", file=name, line=1,
                        message=_one_line(f"kernel could not be read: {type(err).__name__}: {err}"))]
    ctx = Context(doc=source.document, interfaces=None, interfaces_state="not_given", interfaces_problem="",
                  interfaces_problem_line=1, program=source.program, declared_skeleton=source.skeleton,
                  kernel=source, target_pypto=target)
    if source.program is not None and source.program.kernel is None:  # OD-KN-08; whole-file rules still run
        said = Finding(rule=NO_KERNEL_RULE, level="info", file=name, line=1,
                       message=_one_line(no_kernel_message(source, all_rules())))
        return list(dict.fromkeys([f for r in WHOLE_FILE_RULES for f in _check(all_rules()[r], ctx, name, name)]
                                  + [said]))
    attention = source.program is not None and is_attention_kernel(ctx)
    findings = [f for rule in all_rules().values() if rule.on_kernel and (attention or not rule.attention_only)
                and (source.program is not None or rule.id == SYNTAX_RULE) for f in _check(rule, ctx, name, name)]
    return list(dict.fromkeys(findings))


IfaceInput = tuple[str, str | None] | tuple[None, str, str, int]


def _run_memo(text: str, design: str, iface_name: str, iface: IfaceInput, target: str | None = None) -> list[Finding]:
    """:func:`_run` once per (text, interface input) in a process (:mod:`opdesign.validate.engine.memo`).

    ``iface``: ``(state, text)`` of an interface text to load (text None: none given), or the
    ``(None, state, problem, line)`` of one that could not be read."""
    key = ("design", _rules_token(), str(target), text, *("\x00none" if part is None else str(part) for part in iface),
           str(len(iface)))
    names = {memo.DESIGN: design, memo.INTERFACES: iface_name}
    loaded = (lambda: _interfaces(iface[1], iface[0])) if len(iface) == 2 else (lambda: iface)
    return memo.findings(key, names, lambda: _run(text, memo.DESIGN, memo.INTERFACES, loaded(), target))


def _check(rule, ctx: Context, design: str, iface_name: str) -> list[Finding]:
    try:
        hits = list(rule.check(ctx))
    except RecursionError:  # an expression nested deeper than the rule's walk: name its line
        line, depth = _deepest(ctx.program)
        return [Finding(rule=INTERNAL_RULE, level="error", file=design, line=line,
                        message=f"{rule.id} could not be evaluated: the expression at line {line} is nested "
                                f"{depth} levels deep; split it into named parts")]
    except Exception as err:  # noqa: BLE001 - reported as OD-DOC-10, never a traceback
        return [Finding(rule=INTERNAL_RULE, level="error", file=design, line=1,
                        message=_one_line(f"{rule.id} could not be evaluated: {type(err).__name__}: {err}"))]
    return [Finding(rule=rule.id, level=h.level or rule.level, message=_one_line(h.message), line=max(1, h.line),
                    file=iface_name if h.interfaces else design) for h in hits]


def _deepest(program) -> tuple[int, int]:
    """(line, depth) of the most deeply nested statement of the program's code ((1, 0) without code)."""
    best = (1, 0)
    for node, _loops in program.walk() if program is not None else ():
        depth = max((nesting(e) for e in node.exprs()), default=0)
        if depth > best[1]:
            best = (node.line, depth)
    return best


def _one_line(message: str, limit: int = 500) -> str:
    """Messages stay on one output line (``path:line: RULE level: message``)."""
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unusable(name: str, why: str) -> Finding:
    return Finding(rule=UNUSABLE_RULE, level="error", message=f"input unusable: {why}", file=name, line=1)


def validate_kernel_text(text: str, name: str = "kernel.py", target_pypto: str | None = None) -> Report:
    """Validate PyPTO kernel source held in memory (a ``.py``; see :mod:`opdesign.validate.parse.kernel_source`)
    against ``target_pypto`` (None: the pinned release)."""
    try:
        _check_text(text)
    except Unusable as err:
        return Report.build([name], [_unusable(name, str(err))])
    return Report.build([name], _run_kernel(text, name, target_pypto))


def validate_text(text: str, name: str = DESIGN_NAME, interfaces_text: str | None = None,
                  interfaces_name: str | None = None, target_pypto: str | None = None) -> Report:
    """Validate DESIGN.md text held in memory (the agent entry point).

    Args:
        text: the DESIGN.md content.
        name: file name used in findings.
        interfaces_text: content of ``eval/module_interfaces.yaml``; when None the
            interface rules are skipped and said so (OD-IF-02, info).
        interfaces_name: file name for interface findings (default: ``eval/module_interfaces.yaml``
            next to ``name``).
        target_pypto: the PyPTO release or commit the kernel code is checked against (None: pinned).
    """
    iface_name = interfaces_name or str(PurePosixPath(name).parent.joinpath(*INTERFACES_PATH))
    try:
        _check_text(text)
    except Unusable as err:
        return Report.build([name], [_unusable(name, str(err))])
    return Report.build([name], _run_memo(text, name, iface_name, ("not_given", interfaces_text), target_pypto))


def _read(path: Path) -> str:
    """One bounded read of a regular file (a FIFO, device or folder is refused, never waited on), as UTF-8."""
    return decode(_read_bytes(path))


#: bytes already read for this run, by path (:mod:`opdesign.validate.engine.bulk`: the cache key's bytes are
#: the bytes checked); each is served once
_PRELOADED: dict[Path, bytes | Unusable] = {}


def _read_bytes(path: Path) -> bytes:
    """The bytes of :func:`_read`."""
    if _PRELOADED:
        held = _PRELOADED.pop(path, None)
        if isinstance(held, Unusable):
            raise held
        if held is not None:
            return held
    from opdesign.errors import NotFoundError, OpdesignError
    from opdesign.io.safefs import read_regular

    try:
        data = read_regular(path, MAX_INPUT_BYTES + 1)
    except NotFoundError as err:
        raise Unusable("symlink loop" if "loop" in err.message else "no such file") from None
    except OpdesignError as err:
        why = err.message.removeprefix(f"{path}: ")
        raise Unusable("is a directory" if why.startswith("is a folder") else
                       f"larger than {MAX_INPUT_BYTES // 1024} KiB" if "limit" in why else why) from None
    return data


def kernel_findings_loaded(name: str, data: bytes | Unusable, target_pypto: str | None = None) -> list[Finding]:
    """Findings of a kernel ``.py`` whose bytes were already read (or why they could not be)."""
    try:
        if isinstance(data, Unusable):
            raise data
        text = decode_source(data)
    except Unusable as err:
        return [_unusable(name, str(err))]
    return _run_kernel(text, name, target_pypto)


def validate_loaded(name: str, data: bytes | Unusable, iface_name: str, iface: bytes | Unusable | None,
                    kernels: Iterable[tuple[str, bytes | Unusable]] = (), target_pypto: str | None = None) -> Report:
    """Validate a DESIGN.md whose bytes were already read (or why they could not be), with the bytes of its
    interface file (None: not there) and of the folder's kernel sources (``(name, bytes)``, sorted by name);
    the findings :func:`validate_paths` gives for the same files."""
    kernels = list(kernels)
    names = [name] + [k for k, _d in kernels]
    extra = [f for k, d in kernels for f in kernel_findings_loaded(k, d, target_pypto)]
    try:
        if isinstance(data, Unusable):
            raise data
        text = decode(data)
    except Unusable as err:
        return Report.build(names, [_unusable(name, str(err))] + extra)
    loaded: IfaceInput
    if iface is None:
        loaded = (None, "missing", f"{iface_name} not found", 1)
    else:
        try:
            if isinstance(iface, Unusable):
                raise iface
            loaded = ("ok", decode(iface))
        except Unusable as err:
            loaded = (None, "invalid", f"interface file unusable: {err}", 1)
    return Report.build(names, _run_memo(text, name, iface_name, loaded, target_pypto) + extra
                        + design_findings(text, name, iface_name, loaded, decoded_sources(kernels)))


def _validate_kernel_file(path: Path, name: str, target: str | None = None) -> list[Finding]:
    try:
        text = decode_source(_read_bytes(path))
    except Unusable as err:
        return [_unusable(name, str(err))]
    if path.name.endswith("_scaffold.py") and text.startswith('"""Numpy scaffold of '):  # opdesign's own
        kernel = path.name.removesuffix("_scaffold.py") + "_kernel.py"
        return [_unusable(name, f"this is the numpy scaffold of `opdesign new` (no PyPTO kernel in it); run it with "
                                f"`python {name}`, and validate {kernel} or the operator folder")]
    return _run_kernel(text, name, target)


def _kernel_files(folder: Path) -> list[Path]:
    """The entries of an operator folder named like kernel sources (:data:`KERNEL_GLOBS`), sorted by name:
    a dangling symlink, a folder or a FIFO among them is read like any kernel argument and reported
    as unusable with its path, never skipped."""
    found = {p for pattern in KERNEL_GLOBS for p in folder.glob(pattern)}
    return sorted(found)


def _validate_file(given: str, target: str | None = None) -> tuple[list[str], list[Finding]]:
    """(files looked at, findings) of one argument: a DESIGN.md, a kernel ``.py`` or an operator folder
    (its DESIGN.md with the interface file, and its kernel sources)."""
    path = Path(given)
    name = given
    if path.suffix == ".py" and not path.is_dir():
        return [name], _validate_kernel_file(path, name, target)
    kernels: list[tuple[str, list[Finding]]] = []
    sources: list[tuple[str, str]] = []
    heads: list[tuple[str, bytes]] = []
    if path.is_dir():
        kernels = [(str(k), _validate_kernel_file(k, str(k), target)) for k in _kernel_files(path)]
        sources, heads = folder_sources(path, _kernel_files(path), _read_bytes)
        path = path / DESIGN_NAME
        name = str(path)
    files = [name] + [k for k, _f in kernels]
    extra = [f for _k, found in kernels for f in found]
    try:
        text = _read(path)
    except Unusable as err:
        return files, [_unusable(name, str(err))] + extra
    if _is_spec(path, text):
        return files, [_unusable(name, f"this is a SPEC; run `opdesign new --spec {given}` to write its DESIGN.md, "
                                       "then validate that folder")] + extra
    iface_path = path.parent.joinpath(*INTERFACES_PATH)
    iface_name = str(iface_path)
    iface: IfaceInput
    if not iface_path.is_file():
        iface = (None, "missing", f"{iface_name} not found", 1)
    else:
        try:
            iface = ("ok", _read(iface_path))
        except Unusable as err:
            iface = (None, "invalid", f"interface file unusable: {err}", 1)
    return files, (_run_memo(text, name, iface_name, iface, target) + extra
                   + design_findings(text, name, iface_name, iface, sources, heads))


def _is_spec(path: Path, text: str) -> bool:
    """A ``.yaml`` / ``.yml`` file whose top-level mapping has ``op_name`` and at least two more SPEC keys;
    a SPEC whose YAML breaks part way (a truncated file) counts by the keys read before the break."""
    if path.suffix.lower() not in (".yaml", ".yml"):
        return False
    import yaml

    keys: set[str] = set()
    depth, at_key = 0, False  # nesting depth; whether the next depth-1 node is a key of the top mapping
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                if depth == 0 and not isinstance(event, yaml.MappingStartEvent):
                    return False
                depth += 1
                at_key = depth == 1
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                at_key = depth == 1
            elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)) and depth == 1:
                if at_key and isinstance(event, yaml.ScalarEvent):
                    keys.add(event.value)
                at_key = not at_key
    except (yaml.YAMLError, RecursionError):
        pass
    if "op_name" not in keys:
        return False
    from opdesign.spec import Spec  # the SPEC model only for a YAML file that names an op

    return len(keys & set(Spec.model_fields)) >= 3
