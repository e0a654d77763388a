"""Crash count of the validator rules on mutated generated designs (target: 0).

    python benchmarks/fuzz_validator.py [--cases 5000] [--seed 0]
    python benchmarks/fuzz_validator.py --sweep [--bases dense_fa_8192_zh,...]

The bases are the `opdesign new` outputs of every example SPEC (en and zh). Each
case applies 1-3 mutations, chosen by a seeded random generator, to the DESIGN.md
front matter (the `opdesign:` block included) or to eval/module_interfaces.yaml:
a value replaced by one of another type, a key or list item deleted, a list item
duplicated. The case is validated in memory (`validate_text`); a rule that raises
is reported by the engine as an OD-DOC-10 finding, and every such finding counts
as a crash. Prints JSON: cases, crashes, the crashing rules with an example
mutation each. Exit 1 when a crash was seen. The same seed gives the same cases.

``--sweep`` is exhaustive instead of random: every value of the front matter and of
the interface file, one at a time, deleted and replaced by each of SWEEP_VALUES
(on the named bases; default one zh design per skeleton and variant family).

tests/unit/spec/test_input_fuzz.py runs a few dozen of these cases in the default suite and the 5000 as a slow test.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
INTERNAL_RULE = "OD-DOC-10"

#: Values of the wrong type (and wrong values of the right type) a mutation puts in place of a value.
ODD_VALUES: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 3, 2**70, 1.5, float("inf"), "", "x", "fp32", "SK-02", "中文", [], [1, 2], [0, 0],
    ["a"], [[1]], [None], {}, {"a": 1}, {"m": [1, 2]}, {"id": {}}, "16:40",
)

#: The replacements of ``--sweep``: one value per type (and the delete).
SWEEP_VALUES: tuple[Any, ...] = (None, True, -1, 2**70, 1.5, "x", [1, 2], {"a": 1})


def bases() -> list[tuple[str, str, str]]:
    """(name, DESIGN.md text, interface text) of every example SPEC, en and zh."""
    sys.path.insert(0, str(REPO / "src"))
    from opdesign.render.design import render_all
    from opdesign.workflows.new import plan_from_spec_file

    out = []
    for spec in sorted((REPO / "examples" / "specs").glob("*.yaml")):
        plan = plan_from_spec_file(spec, tuning=True)
        for lang in ("en", "zh"):
            files = render_all(plan, lang)
            design = next(text for name, text in files.items() if str(name).endswith("DESIGN.md"))
            iface = next(text for name, text in files.items() if str(name).endswith("module_interfaces.yaml"))
            out.append((f"{spec.stem}_{lang}", design, iface))
    return out


def _split(design: str) -> tuple[str, str]:
    """(front matter YAML, the rest from the closing ``---`` on)."""
    end = design.index("\n---\n", 4)
    return design[4:end + 1], design[end + 1:]


def _paths(data: Any, path: tuple = ()) -> list[tuple]:
    """Every path to a value (mapping keys and list indexes), the root excluded."""
    out = []
    if isinstance(data, dict):
        for key, value in data.items():
            out.append(path + (key,))
            out += _paths(value, path + (key,))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.append(path + (i,))
            out += _paths(value, path + (i,))
    return out


def _mutate(data: Any, rng: random.Random) -> str:
    """Apply one mutation to ``data`` in place; say what it was."""
    paths = _paths(data)
    if not paths:
        return "nothing to mutate"
    path = rng.choice(paths)
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    where = ".".join(str(p) for p in path)
    op = rng.choice(("replace", "replace", "replace", "delete", "duplicate"))
    if op == "delete":
        del parent[last]
        return f"delete {where}"
    if op == "duplicate" and isinstance(parent, list):
        parent.insert(last, parent[last])
        return f"duplicate {where}"
    value = rng.choice(ODD_VALUES)
    parent[last] = value
    return f"{where} = {value!r}"


def mutated(base: tuple[str, str, str], rng: random.Random) -> tuple[str, str, list[str]]:
    """(DESIGN.md text, interface text, what was done) of one case built from ``base``."""
    name, design, iface = base
    front_text, rest = _split(design)
    front = yaml.safe_load(front_text)
    interfaces = yaml.safe_load(iface)
    done = [name]
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.35:
            done.append("interfaces: " + _mutate(interfaces, rng))
        elif rng.random() < 0.7 and isinstance(front.get("opdesign"), dict):
            done.append("opdesign." + _mutate(front["opdesign"], rng))
        else:
            done.append("front: " + _mutate(front, rng))
    dump = dict(allow_unicode=True, sort_keys=False, width=10_000)
    return "---\n" + yaml.safe_dump(front, **dump) + rest, yaml.safe_dump(interfaces, **dump), done


def crashes(design: str, iface: str) -> list[str]:
    """Messages of the OD-DOC-10 findings of one case (empty: no rule raised)."""
    from opdesign.workflows.validate import validate_text

    return [f.message for f in validate_text(design, interfaces_text=iface).findings if f.rule == INTERNAL_RULE]


def _single(base: tuple[str, str, str]) -> list[tuple[str, str, str]]:
    """Every single-value mutation of ``base``: (DESIGN.md, interfaces, what)."""
    name, design, iface = base
    front_text, rest = _split(design)
    dump = dict(allow_unicode=True, sort_keys=False, width=10_000)
    out = []
    for target in ("front", "interfaces"):
        original = yaml.safe_load(front_text if target == "front" else iface)
        for path in _paths(original):
            for value in ("<delete>", *SWEEP_VALUES):
                data = yaml.safe_load(front_text if target == "front" else iface)
                parent = data
                for part in path[:-1]:
                    parent = parent[part]
                if value == "<delete>":
                    del parent[path[-1]]
                else:
                    parent[path[-1]] = value
                text = yaml.safe_dump(data, **dump)
                what = f"{name} {target}: {'.'.join(map(str, path))} = {value!r}"
                out.append(("---\n" + text + rest, iface, what) if target == "front" else (design, text, what))
    return out


def sweep(names: list[str]) -> dict[str, Any]:
    base_list = [b for b in bases() if b[0] in names]
    by_rule: dict[str, dict[str, Any]] = {}
    cases = crashed = 0
    for base in base_list:
        for design, iface, what in _single(base):
            cases += 1
            found = crashes(design, iface)
            crashed += bool(found)
            for message in found:
                entry = by_rule.setdefault(message.split(" ", 1)[0], {"count": 0, "message": message, "mutation": what})
                entry["count"] += 1
    return {"sweep": names, "cases": cases, "crashes": crashed, "by_rule": dict(sorted(by_rule.items()))}


def run(cases: int, seed: int, base_list: list[tuple[str, str, str]] | None = None) -> dict[str, Any]:
    base_list = base_list or bases()
    rng = random.Random(seed)
    by_rule: dict[str, dict[str, Any]] = {}
    crashed = 0
    for _ in range(cases):
        design, iface, done = mutated(rng.choice(base_list), rng)
        found = crashes(design, iface)
        crashed += bool(found)
        for message in found:
            rule = message.split(" ", 1)[0]
            entry = by_rule.setdefault(rule, {"count": 0, "message": message, "mutation": done})
            entry["count"] += 1
    return {"cases": cases, "seed": seed, "crashes": crashed, "by_rule": dict(sorted(by_rule.items()))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000, help="mutated designs to validate")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mutation generator")
    parser.add_argument("--sweep", action="store_true", help="every single-value mutation instead of random cases")
    parser.add_argument("--bases", default="dense_fa_8192_zh,causal_gqa_tail_zh,sparse_topk_2048_zh,"
                        "sk16_backward_lm_zh,paged_fp8_decode_zh", help="--sweep: comma-separated base names")
    args = parser.parse_args()
    result = sweep(args.bases.split(",")) if args.sweep else run(args.cases, args.seed)
    print(json.dumps(result, ensure_ascii=True, indent=2))
    return 1 if result["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
