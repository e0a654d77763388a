"""Spec -> Plan for SK-16 single-pass attention backward: dQ, dK, dV from q, k, v, o, dO and the forward l, m.

Decisions and their sources (numbers come from the catalog, never hard-coded):

* Skeleton: SK-16 "When" -- backward, forward ``l``/``m`` are inputs,
  ``matmul_count >= min_matmul_count`` (two matmuls in C1, three in C2). The
  three conditions are ``skeleton_checks`` rows; a failed one raises
  :class:`SpecError` naming it (a backward that computes its own statistics
  is not planned by this version).
* Passes: single pass by default (SK-16-R1); two passes only with a
  ``two_pass_reason`` of the SPEC, one of the card's ``two_pass_reasons``
  (SK-16-R11). Task count ``batch x heads x ceil(sq/Q_TILE) x ceil(skv/KV_TILE)
  x passes`` (SK-16 body); causal counts only the KV blocks a Q tile sees.
* Tiles: square ``Q_TILE = KV_TILE`` so one C2 TileShape serves dV = P^T dO,
  dQ = dS K and dK = dS^T Q (each has m, k in {Q_TILE, KV_TILE}); start from
  the SK-01 safe baseline 128 and halve until UB, L1 and L0 fit (C-TILE-03).
* Budgets and the expansion estimate: :mod:`opdesign.skeletons.sk16.budget` (shared
  with the validator).
* Configuration: the SK-16 card's runtime/pass options (stitch 512,
  sched_mode 3, l1_reuse); ``max_workspace_kb`` on a3 (the card's A3 value).
"""

from __future__ import annotations

from math import ceil, sqrt
from typing import Any

from opdesign.catalog import Card, DeviceProfile, load_catalog
from opdesign.catalog.pypto_api import load_api_surface
from opdesign.errors import SpecError
from opdesign.plan.blocks import kv_block_ranges
from opdesign.plan.checks import COMMON_ROWS, Row, fp32_accumulators, single_unroll, with_checks
from opdesign.plan.config import documented
from opdesign.plan.core import text
from opdesign.plan.fields import check_supported, schedule_counts, spec_echo
from opdesign.plan.hardware import hardware
from opdesign.plan.interfaces import NP_DTYPE
from opdesign.plan.models import (
    Budget,
    Choice,
    ConfigEntry,
    Decision,
    FormCheck,
    LoopRow,
    Module,
    Plan,
    StateRow,
    TensorSpec,
    Unroll,
    VecTile,
)  # fmt: skip
from opdesign.plan.schedule import schedule
from opdesign.plan.tiles import align_up, axis_hi, choose_cube_tiles, cube_align
from opdesign.skeletons.sk16.budget import budgets, expansion
from opdesign.skeletons.sk16.packed import check_varlen, host_tensors_entry, length_inputs, packed_shapes
from opdesign.spec import Spec

SUPPORTED = {"mask": ("none", "causal"), "kv_cache": ("contiguous",), "quant": ("none",),
             "layout": ("BNSD", "BSND", "TND")}
ATOMS = (
    ("AT-12", "C1: S = Q K^T (scale applied in V1 as a compile-time float, SK-16-R6); dP = dO V^T has the same shape"),
    ("AT-20", "tails: seq_q / seq_kv need not be multiples of the tiles; view + valid_shape, "
              "no where masks (SK-16-R5)"),
    ("AT-21", "sub-graph scopes: V1 in scope 1, V2 in scope 2, matmuls outside (SK-16 sg_set_scope)"),
)


def estimate_sk16(spec: Spec, golden_module_count: tuple[int, str] | None = None) -> Plan:
    """Plan a ``direction: backward`` SPEC with SK-16.

    Args:
        spec: a validated SPEC with ``direction: backward``.
        golden_module_count: ``(module_count, reason)`` from the golden estimator, if any.

    Raises:
        SpecError: an SK-16 condition fails (the message names it), the SPEC asks
            for a variant this version does not plan, or no tiling fits the device.
    """
    cat = load_catalog()
    sk16, sk01 = cat.card("SK-16"), cat.card("SK-01")
    device = cat.device(spec.device)
    _check_supported(spec)
    checks = skeleton_checks(spec, sk16)
    failed = [c for c in checks if not c.passed]
    if failed:
        c = failed[0]
        raise SpecError(f"softmax_stats_input: SK-16 does not apply: {c.id} failed ({c.condition}: {c.observed}); "
                        "a backward that recomputes the forward statistics is not planned by this version")
    passes, reason_text = passes_for(spec, sk16)
    s = spec.shape
    tile, tile_decisions, cube, vec, ub, l1, l0 = _fit_tiles(spec, device, sk01, passes)
    q_tiles, kv_tiles = ceil(s.seq_q / tile), ceil(s.seq_kv / tile)
    pairs = [n for _, n in kv_block_ranges(spec.mask, s.seq_q, s.seq_kv, tile, tile)]
    root_count = s.batch * s.num_heads * q_tiles
    task_count = s.batch * s.num_heads * sum(pairs) * passes
    matmuls = sk16.param("c1_matmuls") + sk16.param("c2_matmuls")
    mm_per_pair = matmuls if passes == 1 else matmuls + sk16.param("c1_matmuls")  # pass 2 repeats S and dP
    qk_per_pair = 1 if passes == 1 else sk16.param("two_pass_qk_per_block")[0]
    work = mm_per_pair * tile * s.seq_kv * s.head_dim
    pair_basis = (f"q_tiles {q_tiles} x kv_tiles {kv_tiles}" if spec.mask == "none"
                  else f"sum(visible kv blocks per q block {pairs})")
    packed = "; TND: at most, seq_q / seq_kv are per-batch maxima (SK-16-R10)" if spec.layout == "TND" else ""
    counts = [
        Decision(name="q_tiles", value=q_tiles, basis=f"ceildiv(seq_q {s.seq_q}, Q_TILE {tile})",
                 source="SK-16 loop nest (s1)"),
        Decision(name="kv_tiles", value=kv_tiles, basis=f"ceildiv(seq_kv {s.seq_kv}, KV_TILE {tile})",
                 source="SK-16 loop nest (s2)"),
        Decision(name="passes", value=passes, basis=reason_text, source="SK-16-R1, SK-16-R11, backward decision table"),
        Decision(name="qk_per_block_pair", value=qk_per_pair,
                 basis="single pass evaluates Q K^T once per (s1, s2) pair" if passes == 1
                 else "pass 1 (dQ) and pass 2 (dK, dV) each evaluate Q K^T; l/m are inputs, so no statistics pass",
                 source="SK-16-R1, card two_pass_qk_per_block"),
        Decision(name="root_count", value=root_count,
                 basis=f"batch {s.batch} x num_heads {s.num_heads} x q_tiles {q_tiles}{packed}",
                 source="SK-01 structural table (root count)"),
        Decision(name="task_count", value=task_count,
                 basis=f"batch {s.batch} x num_heads {s.num_heads} x {pair_basis} x passes {passes}{packed}",
                 source="SK-16 task count, backward decision table"),
        Decision(name="work_per_root_macs", value=work,
                 basis=f"{mm_per_pair} matmuls per block pair x Q_TILE {tile} x seq_kv {s.seq_kv} "
                       f"x head_dim {s.head_dim}",
                 source="SK-16 stages (C1 2 + C2 3 matmuls), SK-01 structural table (task granularity)"),
        Decision(name="cores_busy", value=min(root_count, device.aic_cores),
                 basis=f"min(root_count, aic_cores {device.aic_cores})",
                 source=f"devices.yaml {device.ref('aic_cores')}"),
    ]
    sched = schedule(device.aic_cores, root_count, task_count, max(pairs, default=0) * passes,
                     text("sched.chain.backward", passes=passes))
    counts += schedule_counts(sched, device.ref("aic_cores"))
    config, entries = _config(spec, sk16)
    primary, outputs, modules = _interfaces(spec, passes)
    if golden_module_count is not None:
        module_count, module_reason = golden_module_count
    else:
        module_count, module_reason = 1, (
            "no golden given; SK-16 computes dQ, dK and dV of a block pair from one C1 -> V1 -> C2 -> V2 body, "
            "so the gradients form one module (SK-16-R1)")
    rtol, atol = spec.tolerance
    return with_checks(Plan(
        op_name=spec.op_name, device=spec.device, dtype=spec.dtype, layout=spec.layout, mask=spec.mask,
        kv_cache=spec.kv_cache, quant=spec.quant, direction=spec.direction,
        head_dim=s.head_dim, num_heads=s.num_heads, num_kv_heads=s.num_kv_heads,
        group_size=s.num_heads // s.num_kv_heads, seq_q=s.seq_q, seq_kv=s.seq_kv, batch=s.batch,
        skeleton=Choice(id="SK-16", title=sk16.title, reason=(
            "attention backward with the forward l/m as inputs and 5 matmuls per block pair: "
            + ("one loop nest computes dQ, dK and dV (single pass)" if passes == 1
               else f"two passes because {reason_text}"))),
        atoms=[Choice(id=i, title=cat.card(i).title, reason=r) for i, r in ATOMS],
        form="baseline", form_reason="SK-16 has one form; the structure choice is the pass count",
        form_checks=[], skeleton_checks=checks, variant="single pass" if passes == 1 else "two pass",
        passes=passes, two_pass_reason=reason_text if passes == 2 else None,
        q_tile=tile, kv_tile=tile, q_tiles=q_tiles, kv_tiles=kv_tiles, kv_loop="pypto.loop",
        tile_decisions=tile_decisions, cube_tiles=cube, vec_tiles=vec,
        unroll=_unroll(sk16), unroll_factor=1,
        root_count=root_count, task_count=task_count, work_per_root_macs=work, counts=counts,
        ub_budget=ub, l1_budget=l1, l0_budgets=l0, expansion=expansion(vec, passes),
        loops=_loops(spec, passes), state=_state(spec, tile, passes),
        config=config, config_entries=entries,
        primary_inputs=primary, final_outputs=outputs, modules=modules,
        module_count=module_count, module_reason=module_reason,
        scale=1.0 / sqrt(s.head_dim), rtol=rtol, atol=atol,
        **spec_echo(spec),
        risks=_risks(spec, ub, tile, passes),
        hardware=hardware(spec, device, rtol, atol), schedule=sched,
    ), COMMON_ROWS + (Row("C-LOOP-05", "C-LOOP-05", single_unroll), Row("SK-16-R4", "SK-01-R6", fp32_accumulators)))


def _check_supported(spec: Spec) -> None:
    check_supported(spec, SUPPORTED, "SK-16 backward")
    check_varlen(spec)


def skeleton_checks(spec: Spec, sk16: Card) -> list[FormCheck]:
    """SK-16 "When" conditions on the SPEC: backward, l/m inputs, matmul_count >= min_matmul_count."""
    c1, c2, need = sk16.param("c1_matmuls"), sk16.param("c2_matmuls"), sk16.param("min_matmul_count")
    src = "SK-16 applicability"
    return [
        FormCheck(id="SK-16-WHEN-1", condition="attention backward producing dQ, dK and dV",
                  observed=f"direction: {spec.direction}", passed=spec.direction == "backward", source=src),
        FormCheck(id="SK-16-WHEN-2", condition="the forward softmax statistics l and m are kernel inputs",
                  observed=f"softmax_stats_input: {str(spec.softmax_stats_input).lower()}",
                  passed=spec.softmax_stats_input, source=src),
        FormCheck(id="SK-16-WHEN-3", condition=f"matmul_count >= {need}",
                  observed=f"C1 {c1} (S, dP) + C2 {c2} (dV, dQ, dK) = {c1 + c2}", passed=c1 + c2 >= need,
                  source=src + ", card min_matmul_count"),
    ]


def passes_for(spec: Spec, sk16: Card) -> tuple[int, str]:
    """(passes, reason): 2 with the SPEC's ``two_pass_reason`` (card wording, SK-16-R11); else 1 (SK-16-R1)
    when the PyPTO release has ``pypto.atomic_add``, and 2 with the card's ``no_atomic_add`` reason when it
    has not (read from the release's API manifest: the framework wins over the card's default)."""
    reasons = sk16.param("two_pass_reasons")
    if spec.two_pass_reason is not None:
        return 2, reasons[spec.two_pass_reason]
    api = load_api_surface()
    if not api.has("pypto.atomic_add"):
        return 2, (f"{reasons['no_atomic_add']}: PyPTO {api.release} has no pypto.atomic_add "
                   "(constraints/pypto_api.yaml), so the single pass cannot add dQ, dK and dV into zeroed outputs")
    return 1, "single pass (default): atomic_add accumulates dQ over kv and dK/dV over q into zeroed outputs"


def _fit_tiles(spec: Spec, device: DeviceProfile, sk01: Card, passes: int):
    """Largest square tile from the SK-01 safe baseline, halved until UB, L1 and L0 fit (C-TILE-03)."""
    align = cube_align(spec.dtype)
    safe = sk01.param("safe_cube_tile")
    hi = min(axis_hi(spec, "seq_q"), axis_hi(spec, "seq_kv"))
    tile = min(safe, align_up(hi, align))
    first = tile
    while True:
        cube = {s: t.model_copy(update={"reason": CUBE_REASON[s]})
                for s, t in choose_cube_tiles(spec, "baseline", tile, tile, sk01).items()}
        vec = _vec_tiles(spec, tile, sk01)
        ub, l1, l0 = budgets(device, tile, spec.shape.head_dim, spec.dtype, cube, vec, passes)
        over = [b for b in (ub, l1, *l0) if not b.fits]
        if not over:
            break
        if tile // 2 < align:
            raise SpecError("shape: no legal tiling: " + "; ".join(
                f"{b.buffer} {b.total_bytes} B > {b.capacity_bytes} B" for b in over) + " (C-TILE-03)")
        tile //= 2
    basis = (f"min(safe tile {safe}, align{align}(min(seq_q hi, seq_kv hi) {hi}))" if tile == first else
             f"safe tile {first} halved to {tile} until UB/L1/L0 fit {device.name} "
             "(largest power-of-two step that fits)")
    decisions = [
        Decision(name=name, value=tile, basis=basis + "; square tiles so one C2 TileShape serves dV, dQ and dK",
                 source="SK-01 safe baseline, C-TILE-03, SK-16 C2 stage")
        for name in ("q_tile", "kv_tile")
    ]
    return tile, decisions, cube, vec, ub, l1, l0


CUBE_REASON = {
    "C1": "S = Q K^T and dP = dO V^T: m q rows, k head_dim, n kv columns; [L0, L1] per C-TILE-05",
    "C2": "dV = P^T dO, dQ = dS K, dK = dS^T Q: m and k are Q_TILE = KV_TILE, n head_dim; "
          "P, dS cast to the input dtype (SK-16-R9)",
}


def _vec_tiles(spec: Spec, tile: int, sk01: Card) -> dict[str, VecTile]:
    """V1 on the [tile, tile] score block, V2 on [tile, head_dim] rows: smallest safe rows, 16-aligned columns
    (C-TILE-02)."""
    lo, hi = sk01.param("safe_vec_range")
    d = spec.shape.head_dim
    rows = min(lo, tile)
    return {
        "V1": VecTile(stage="V1", shape=(rows, min(hi, align_up(tile, 16))), dtype="fp32", view=(tile, tile),
                      reason="P from l/m and dS on the score block in FP32; columns 16-aligned for FP32 and the BF16 "
                             "casts (C-TILE-02)"),
        "V2": VecTile(stage="V2", shape=(rows, min(hi, align_up(d, 16))), dtype="fp32", view=(tile, d),
                      reason="D = rowsum(O*dO) before the s2 loop, then the dQ/dK scale on [tile, head_dim] "
                             "(C-TILE-08: new shape, new TileShape)"),
    }


def _unroll(sk16: Card) -> Unroll:
    return Unroll(candidates=list(sk16.unroll_candidates.get("default", [1])), unroll_factor=1, unroll_list=[1],
                  remainder_rule="factor 1 divides every kv_tiles count",
                  source="SK-16 (no unroll candidates), C-LOOP-05",
                  reason="SK-16 lists no unroll candidates; the s2 loop keeps the default [1] (C-LOOP-05)")


def _config(spec: Spec, sk16: Card) -> tuple[dict[str, dict[str, Any]], list[ConfigEntry]]:
    """SK-16 pass/runtime options: every required or recommended key without a condition, plus the a3 workspace."""
    config: dict[str, dict[str, Any]] = {"pass_options": {}, "runtime_options": {}}
    entries = []
    for rec in sk16.config:
        group, _, name = rec.key.partition(".")
        wanted = rec.status != "per_scenario" and not rec.when
        if group in config and (wanted or (name == "max_workspace_kb" and _family(spec) == "a3")):
            value, purpose, source = (rec.value, rec.purpose,
                                      f"SK-16 configuration{f' ({rec.when})' if rec.when else ''}")
            api = load_api_surface()
            limit = api.runtime_limits.get(name) if group == "runtime_options" else None
            if limit is not None and isinstance(value, int) and value > limit["max"]:
                # the framework wins over the card: its SIM does not survive the card's value
                value, purpose = (limit["max"],
                                  f"{purpose} Card value {rec.value}, capped at {limit['max']}: {limit['why']}.")
                source += f", PyPTO {api.release} (constraints/pypto_api_notes.yaml)"
            if name == "max_workspace_kb":
                # one measurement, not a formula: say so and how to size it for this SPEC
                purpose = (f"{purpose} {value} KB is the figure measured on A3 for one shape of the reference "
                           "backward (flash_attention_mha_grad_impl_a3.py), not derived from this SPEC's shapes; "
                           "no source gives a formula. Size it from the workspace the real compile reports for the "
                           "largest typical config and keep the larger of the two.")
                source += ", one A3 measurement"
            if group == "runtime_options" and api.runtime_options and name not in api.runtime_options:
                # the framework wins over the card: the release's set_options does not know the name
                purpose += (f" Left out of the kernel: PyPTO {api.release} has no runtime option {name} "
                            "(set_options raises map::at).")
                entries.append(ConfigEntry(key=rec.key, value=value, status="not passed", purpose=purpose,
                                           source=source + f", PyPTO {api.release} (constraints/pypto_api_notes.yaml)"))
                continue
            config[group][name] = value
            entries.append(ConfigEntry(key=rec.key, value=value, status=rec.status, purpose=purpose, source=source))
        elif rec.key == "runtime_options.ready_on_host_tensors" and spec.layout == "TND":
            entry = host_tensors_entry(spec, rec.purpose)
            config[group][name] = entry.value
            entries.append(entry)
    return config, [documented(e) for e in entries]


def _layout(spec: Spec, heads: str, seq: str, last: str = "head_dim") -> list[str]:
    return ["batch", heads, seq, last] if spec.layout == "BNSD" else ["batch", seq, heads, last]


def _interfaces(spec: Spec, passes: int) -> tuple[list[TensorSpec], list[TensorSpec], list[Module]]:
    """Inputs q, k, v, o, do, l, m (golden order); outputs dq, dk, dv in FP32 (atomic_add accumulation, C-API-05)."""
    dt = NP_DTYPE[spec.dtype]
    if spec.layout == "TND":
        qs, kvs, stats = packed_shapes(spec)
    else:
        qs, kvs = _layout(spec, "num_heads", "seq_q"), _layout(spec, "num_kv_heads", "seq_kv")
        stats = _layout(spec, "num_heads", "seq_q", "1")
    inputs = [TensorSpec(name=n, shape=sh, dtype=t) for n, sh, t in (
        ("q", qs, dt), ("k", kvs, dt), ("v", kvs, dt), ("o", qs, dt), ("do", qs, dt),
        ("l", stats, "float32"), ("m", stats, "float32"))] + (length_inputs(spec) if spec.layout == "TND" else [])
    outputs = [TensorSpec(name=n, shape=sh, dtype="float32") for n, sh in (("dq", qs), ("dk", kvs), ("dv", kvs))]
    module = Module(
        id=1, name=f"{spec.op_name}_sk16",
        description=("C1 S, dP -> V1 P from l/m, dS -> C2 dV, dQ, dK -> V2 scale, atomic_add into zeroed FP32 outputs"
                     if passes == 1 else
                     "pass 1 (q outer) dQ, pass 2 (kv outer) dK and dV; UB accumulators, assemble at the last tile"),
        inputs=[{"name": t.name, "source": "primary"} for t in inputs],
        outputs=[{"name": t.name, "shape": t.shape, "dtype": t.dtype} for t in outputs],
    )
    return inputs, outputs, [module]


def _loops(spec: Spec, passes: int) -> list[LoopRow]:
    g = spec.shape.num_heads // spec.shape.num_kv_heads
    q_len, kv_len = ("q_len", "kv_len") if spec.layout == "TND" else ("seq_q", "seq_kv")
    one = [
        LoopRow(name="b_idx", loop_kind="pypto.loop", bound="batch", step="1", dependence="independent"),
        LoopRow(name="h_idx", loop_kind="pypto.loop", bound="num_heads", step="1",
                dependence=f"independent; kv head = h_idx // {g}; dK/dV of a kv head summed by atomic_add"),
        LoopRow(name="q_idx", loop_kind="pypto.loop", bound="ceildiv(seq_q, Q_TILE)", step="Q_TILE rows",
                dependence="independent (one root each); D computed once per Q tile"),
        LoopRow(name="kv_idx", loop_kind="pypto.loop", bound="ceildiv(seq_kv, KV_TILE)" + (
            "" if spec.mask == "none" else ", capped at the last visible block (causal)"), step="KV_TILE columns",
                dependence="none carried: dQ, dK, dV go to GM by atomic_add (SK-16-R4)"),
    ]
    if spec.layout == "TND":  # SK-16-R10: per-batch offsets and lengths from the cumulative offsets
        one[0] = one[0].model_copy(update={"dependence": "independent; rows [cum[b-1], cum[b]) of actual_seq_q / "
                                                         "actual_seq_kv (cum[-1] = 0) give q_len, kv_len"})
        one = [r.model_copy(update={"bound": r.bound.replace("seq_q", "q_len").replace("seq_kv", "kv_len")})
               for r in one]
    if passes == 1:
        return one
    one[3] = one[3].model_copy(update={"name": "kv_idx (pass 1)", "dependence": "carries dq_acc (UB accumulator)"})
    one[2] = one[2].model_copy(update={"name": "q_idx (pass 1)"})
    return one + [
        LoopRow(name="kvh_idx (pass 2)", loop_kind="pypto.loop", bound="num_kv_heads", step="1",
                dependence="independent"),
        LoopRow(name="kv_idx (pass 2)", loop_kind="pypto.loop", bound=f"ceildiv({kv_len}, KV_TILE)",
                step="KV_TILE rows", dependence="independent (owns its dK/dV rows)"),
        LoopRow(name="gq_idx (pass 2)", loop_kind="pypto.loop", bound=f"{g} x ceildiv({q_len}, Q_TILE)",
                step="one (head, Q tile)", dependence="carries dk_acc, dv_acc (UB accumulators)"),
    ]


def _state(spec: Spec, tile: int, passes: int) -> list[StateRow]:
    d = spec.shape.head_dim
    rows = [
        StateRow(name="di", shape=f"[{tile}, 1]", dtype="fp32", init="D = rowsum(O * dO) before the s2 loop",
                 update="none (loop-invariant over s2)", final_use="dS = P * (dP - di) in every KV tile"),
    ]
    if passes == 1:
        return rows + [
            StateRow(name=n, shape=sh, dtype="fp32", init="host torch.zeros before the launch (SK-16-R4)",
                     update="atomic_add of every block pair's product", final_use="the kernel output")
            for n, sh in (("dq", "GM like q"), ("dk", "GM like k"), ("dv", "GM like v"))
        ]
    return rows + [
        StateRow(name="dq_acc", shape=f"[{tile}, {d}]", dtype="fp32", init="first KV tile (is_loop_begin): dS K",
                 update="dq_acc + dS K", final_use="x scale, assemble into dq on the last KV tile"),
        StateRow(name="dk_acc", shape=f"[{tile}, {d}]", dtype="fp32", init="first (head, Q tile): dS^T Q",
                 update="dk_acc + dS^T Q", final_use="x scale, assemble into dk on the last (head, Q tile)"),
        StateRow(name="dv_acc", shape=f"[{tile}, {d}]", dtype="fp32", init="first (head, Q tile): P^T dO",
                 update="dv_acc + P^T dO", final_use="assemble into dv on the last (head, Q tile)"),
    ]


def _risks(spec: Spec, ub: Budget, tile: int, passes: int) -> list[str]:
    s = spec.shape
    out = [f"UB margin {ub.capacity_bytes - ub.total_bytes} B of {ub.capacity_bytes} B "
           f"({100 * ub.total_bytes / ub.capacity_bytes:.1f} % used): any added vector buffer must be re-budgeted "
           "(C-TILE-03)."]
    if s.seq_q % tile or s.seq_kv % tile:
        out.append(f"tails: seq_q {s.seq_q} mod {tile} = {s.seq_q % tile}, "
                   f"seq_kv {s.seq_kv} mod {tile} = {s.seq_kv % tile}; "
                   "padded l rows must read as 1 and padded Q/K/V/O/dO rows as 0, and atomic_add writes valid rows "
                   "only (AT-20).")
    if passes == 1:
        out.append("atomic_add order is not deterministic: results may differ in the last bits run to run; "
                   "a deterministic order is one of the three two-pass reasons (SK-16-R11).")
    if spec.mask == "causal":
        out.append("causal mask: Q tiles see different numbers of KV tiles (uneven per-core work); rows that see "
                   "no KV column need neutral forward statistics (m = 0, l = 1) or P becomes 0/0.")
    out.append("the gradients are FP32 GM tensors (atomic_add accumulation, C-API-05); "
               "a cast to the input dtype is the caller's.")
    if _family(spec) == "a3":
        out.append("runtime_options.max_workspace_kb is the card's single A3 measurement (one shape of the reference "
                   "backward), not sized for this SPEC's shapes, and PyPTO 0.2.0 has no such runtime option "
                   "(the kernel leaves it out): on a release that has it, re-size it from the real compile's "
                   "workspace report for the largest typical config before trusting it.")
    return out


def _family(spec: Spec) -> str:
    """The SPEC's device family (``a3`` for ``a3`` and ``a3/910C4``)."""
    return load_catalog().device(spec.device).family
