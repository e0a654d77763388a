"""Run the kernel linter over a local checkout of hicann/pypto and count what it says (prints; no assertion).

    PYTHONPATH=src python benchmarks/lint_public_corpus.py PATH [--labels CSV] [--findings OUT.jsonl]

PATH is a local clone of hicann/pypto (a work tree with ``.git`` or a bare git directory, e.g. the one
``fetch github:hicann/pypto`` gives). The script never downloads: it reads the commits of issue 33 out
of PATH with ``git archive`` into a temporary folder (deleted afterwards; the corpus is never
committed):

- HEAD ``883e7dfb0`` over ``examples/``, ``models/`` and ``python/tests/``;
- ``models/experimental/`` at ``2c605ad9`` (before it moved to pypto-gym);

The API manifest the linter checks against is the pinned release's (tag ``r0.2.0``, ``d1c290f36``):
the script prints that commit's presence but reads no code from it.

Every ``.py`` that imports pypto (a line ``import pypto`` / ``from pypto``) is validated as a kernel
file (``validate_kernel_text``). Printed: the number of files, the error findings per rule (absolute
counts), and the files **without a kernel verdict**: files in which the linter found no kernel and
said nothing about it (no OD-KN-08 info). With ``--labels`` the error findings are matched against the
label file (``path,line,rule,verdict,reason``; verdict true / false / newer) and the counts per verdict
and the unlabelled ones are printed. ``--findings`` writes every error finding as JSON lines.

Run it with main's code (``PYTHONPATH=/work/main/src``) and with this branch's to compare.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

HEAD = "883e7dfb018da764a65fd2c2f8c1e1d2de2d2471"
EXPERIMENTAL = "2c605ad91b70261fdbb93439436994c0c40c5c8f"
RELEASE = "d1c290f3691effe350243f49acb0b262d0ca2e39"  # tag r0.2.0
TREES = ((HEAD, ("examples", "models", "python/tests")), (EXPERIMENTAL, ("models/experimental",)))
IMPORTS_PYPTO = re.compile(r"^\s*(import pypto\b|from pypto\b)", re.MULTILINE)
NO_KERNEL_RULE = "OD-KN-08"


def git_dir(path: Path) -> Path:
    """The git directory of a clone (``PATH/.git``) or PATH itself when it is a bare one."""
    if (path / ".git").exists():
        return path / ".git"
    if (path / "objects").is_dir() and (path / "HEAD").is_file():
        return path
    sys.exit(f"{path}: not a git clone of hicann/pypto (no .git, no objects/)")


def extract(gitdir: Path, commit: str, paths: tuple[str, ...], into: Path) -> None:
    """``git archive commit paths | tar -x`` into ``into`` (local objects only)."""
    with tempfile.TemporaryFile() as tmp:
        subprocess.run(["git", "--git-dir", str(gitdir), "archive", "--format=tar", commit, *paths],
                       stdout=tmp, check=True)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(into, filter="data")


def corpus_files(root: Path) -> list[Path]:
    out = []
    for path in sorted(root.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if IMPORTS_PYPTO.search(text):
            out.append(path)
    return out


def has_kernel(text: str) -> bool:
    """Whether the linter finds a kernel in the text (the program's kernel function)."""
    from opdesign.validate.parse.kernel_source import read_kernel

    try:
        source = read_kernel(text)
    except Exception:  # noqa: BLE001 - counted as no kernel
        return False
    return source.program is not None and source.program.kernel is not None or source.syntax_error is not None


def load_labels(path: Path) -> dict[tuple[str, int, str], str]:
    with path.open(encoding="utf-8", newline="") as handle:
        return {(row["path"], int(row["line"]), row["rule"]): row["verdict"] for row in csv.DictReader(handle)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="local clone of hicann/pypto")
    parser.add_argument("--labels", type=Path, help="label CSV (benchmarks/data/public_corpus_labels.csv)")
    parser.add_argument("--findings", type=Path, help="write the error findings as JSON lines")
    parser.add_argument("--show", action="store_true", help="print every error finding")
    args = parser.parse_args()
    import opdesign
    from opdesign.workflows.validate import validate_kernel_text

    gitdir = git_dir(args.path)
    print(f"opdesign from {Path(opdesign.__file__).parent}")
    for commit in (HEAD, EXPERIMENTAL, RELEASE):
        subprocess.run(["git", "--git-dir", str(gitdir), "cat-file", "-e", commit], check=True)
    errors: Counter[str] = Counter()
    warnings: Counter[str] = Counter()
    infos: Counter[str] = Counter()
    found: list[dict] = []
    no_verdict: list[str] = []
    no_kernel_said = 0
    files = 0
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        for commit, paths in TREES:
            root = Path(tmp) / commit[:9]
            root.mkdir()
            extract(gitdir, commit, paths, root)
            for path in corpus_files(root):
                rel = path.relative_to(root).as_posix()
                text = path.read_text(encoding="utf-8")
                report = validate_kernel_text(text, rel)
                files += 1
                said = any(f.rule == NO_KERNEL_RULE for f in report.findings)
                no_kernel_said += said
                if not said and not has_kernel(text):
                    no_verdict.append(rel)
                for f in report.findings:
                    {"error": errors, "warning": warnings, "info": infos}[f.level][f.rule] += 1
                    if f.level == "error":
                        found.append({"path": rel, "line": f.line, "rule": f.rule, "message": f.message})
    print(f"files importing pypto: {files}")
    print(f"files without a kernel verdict: {len(no_verdict)} (no-kernel info {NO_KERNEL_RULE}: {no_kernel_said})")
    print(f"error findings: {sum(errors.values())}")
    for rule, count in sorted(errors.items()):
        print(f"  {rule:12s} {count:5d}")
    print(f"warnings: {sum(warnings.values())} ({', '.join(f'{r} {c}' for r, c in sorted(warnings.items()))})")
    print(f"infos: {sum(infos.values())} ({', '.join(f'{r} {c}' for r, c in sorted(infos.items()))})")
    if args.show:
        for f in found:
            print(f"{f['path']}:{f['line']}: {f['rule']}: {f['message']}")
    if args.findings:
        args.findings.write_text("".join(json.dumps(f) + "\n" for f in found), encoding="utf-8")
    if args.labels:
        labels = load_labels(args.labels)
        verdicts: Counter[str] = Counter()
        by_rule: dict[str, Counter[str]] = {}
        for f in found:
            verdict = labels.get((f["path"], f["line"], f["rule"]), "unlabelled")
            verdicts[verdict] += 1
            by_rule.setdefault(f["rule"], Counter())[verdict] += 1
        print(f"labels: {dict(sorted(verdicts.items()))}")
        for rule, counts in sorted(by_rule.items()):
            print(f"  {rule:12s} {dict(sorted(counts.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
