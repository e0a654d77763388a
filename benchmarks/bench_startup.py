"""CPU time of each `opdesign` command next to a bare interpreter baseline, as ratios.

Each round runs the baseline `python -c "import ast, json, yaml"` and then every
command once, each in a fresh interpreter; the CPU time of a run is the child's
user + system time (resource.getrusage(RUSAGE_CHILDREN)), so other processes on a
busy machine do not count. A command's ratio is the median over rounds of
(command CPU / baseline CPU of the same round). The designs validated are `opdesign
new` outputs written once into a temporary folder before the rounds.

    python benchmarks/bench_startup.py [--rounds 7] [--json] [--opdesign PATH] [--against PATH]

`--opdesign` names the executable (default: `opdesign` next to this interpreter, else
`python -m opdesign`); `--against` runs a second executable (another checkout, e.g. the
start of a branch) in the same rounds and prints its ratios too. Prints figures only;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "examples" / "specs"
GOLDEN = REPO / "tests" / "goldens" / "dense_forward_golden.py"
BASELINE = [sys.executable, "-c", "import ast, json, yaml"]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], cwd: Path) -> tuple[float, int]:
    start = _cpu()
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return _cpu() - start, proc.returncode


def _opdesign(explicit: str | None) -> list[str]:
    if explicit:
        return [explicit]
    script = Path(sys.executable).with_name("opdesign")
    if script.is_file():
        return [str(script)]
    found = shutil.which("opdesign")
    return [found] if found else [sys.executable, "-m", "opdesign"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--opdesign", default=None, help="opdesign executable")
    parser.add_argument("--against", default=None, help="a second opdesign executable run in the same rounds")
    args = parser.parse_args()
    exe = _opdesign(args.opdesign)
    exes = {"": exe, **({"against": [args.against]} if args.against else {})}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        design = tmp_path / "dense"
        subprocess.run([*exe, "new", "--spec", str(SPECS / "dense_fa_8192.yaml"), "--out", str(design)],
                       check=True, capture_output=True)
        commands = {
            "--help": ["--help"],
            "golden": ["golden", str(GOLDEN)],
            "rules": ["rules"],
            "cards list": ["cards", "list"],
            "cards show SK-01": ["cards", "show", "SK-01"],
            "validate (1 design)": ["validate", str(design)],
            "estimate dense_fa_8192": ["estimate", "--spec", str(SPECS / "dense_fa_8192.yaml")],
            "rank dense_fa_8192": ["rank", "--spec", str(SPECS / "dense_fa_8192.yaml")],
            "new dense_fa_8192": ["new", "--spec", str(SPECS / "dense_fa_8192.yaml"), "--out", str(tmp_path / "n1"),
                                  "--force"],
            "new causal_gqa_tail": ["new", "--spec", str(SPECS / "causal_gqa_tail.yaml"), "--out",
                                    str(tmp_path / "n2"), "--force"],
        }
        base: list[float] = []
        cpu = {(tag, name): [] for tag in exes for name in commands}
        codes: dict[tuple[str, str], int] = {}
        for _ in range(args.rounds):
            base.append(_run(BASELINE, tmp_path)[0])
            for name, argv in commands.items():
                for tag, command in exes.items():
                    seconds, codes[(tag, name)] = _run([*command, *argv], tmp_path)
                    cpu[(tag, name)].append(seconds)
    rows = []
    for (tag, name), values in cpu.items():
        ratios = [c / b for c, b in zip(values, base, strict=True)]
        rows.append({"executable": " ".join(exes[tag]), "command": name,
                     "cpu_ms_median": round(1000 * statistics.median(values), 1),
                     "ratio_median": round(statistics.median(ratios), 2), "ratio_min": round(min(ratios), 2),
                     "exit_code": codes[(tag, name)]})
    result = {"executables": [" ".join(e) for e in exes.values()], "rounds": args.rounds,
              "baseline": " ".join(["python", *BASELINE[1:2], repr(BASELINE[2])]),
              "baseline_cpu_ms_median": round(1000 * statistics.median(base), 1),
              "load_average": os.getloadavg()[0], "bytecode_cache": not os.environ.get("PYTHONDONTWRITEBYTECODE"),
              "commands": rows}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.rounds} rounds; load average {result['load_average']:.2f}; bytecode cache: "
          f"{'on' if result['bytecode_cache'] else 'off (PYTHONDONTWRITEBYTECODE set: every run recompiles)'}")
    print(f"baseline   {result['baseline']}: {result['baseline_cpu_ms_median']} ms CPU (median)")
    for command in result["executables"]:
        print(f"executable {command}")
        print(f"  {'command':<26}{'CPU ms':>8}{'x base':>8}{'min x':>8}{'exit':>6}")
        for row in (r for r in rows if r["executable"] == command):
            print(f"  {row['command']:<26}{row['cpu_ms_median']:>8}{row['ratio_median']:>8}{row['ratio_min']:>8}"
                  f"{row['exit_code']:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
