"""Spec -> Plan for SK-02 single-pass top-k sparse attention, or SK-01 when a condition fails.

A query token attends to the ``topk`` KV positions its indexer picked. When
``topk`` is a compile-time constant and the whole top-k row fits UB, C1 -> V1
-> C2 run once per (batch, token, kv head, head tile): no KV loop, no
online-softmax state, no ``loop_unroll`` (SK-02-R1..R3, AT-02). Otherwise
:func:`estimate_sk02` returns the evaluated conditions as :class:`~opdesign.skeletons.base.Rejected`
and the registry plans SK-01 with ``fallback_from="SK-02"``, the failed one named.

Design decisions (documented here, rendered into DESIGN.md):

* **Conditions** (SK-02 card ``parameters.conditions``), see :func:`sk02_checks`:
  SK-02-COND-1 ``topk`` compile-time constant: no ``topk`` dynamic axis with
  ``lo < hi`` and one ``topk`` over all typical configs; ``S2_TILE =
  align16(topk)`` (SK-02-R1, C-TILE-02); SK-02-COND-2 the UB formula
  :func:`opdesign.single_pass_ub_budget` fits (plus L1 / L0) at some
  head tile; SK-02-COND-3 the row reductions span ``ceil(S2_TILE / cols)``
  vector tiles and PyPTO reduces across them within the C-TILE-04 limit.
* **Rows of one pass** (``q_tile``): query heads that share the KV head and the
  token's index row (a GQA group), so one matmul serves them; it starts at
  ``min(group, 128)`` and halves until UB / L1 / L0 fit (C-TILE-03).
* **Indices**: ``topk_indices [batch, seq_q, topk]`` int32, shared by the heads
  of a token; slots ``[0, cur_seq)`` hold KV positions, later slots ``-1``.
  The effective top-k is the runtime value ``cur_seq = clamp(kv_act_seqs[b] -
  seq_q + 1 + s, 0, TOPK)`` (``as_variable``, SK-02-R9); every index is clamped
  to ``>= 0`` before the gather (AT-17-R2) and the gathered ``[S2_TILE, D]``
  rows are viewed with ``valid_shape=[cur_seq, D]`` (AT-20).
* **Empty rows**: ``cur_seq == 0`` skips the pass with ``pypto.cond``; the
  output is allocated with zeros, so skipped rows stay zero (SK-02-R6).
* **Normalisation** (card ``normalisation_modes``): after PV when
  ``head_dim < S2_TILE`` (divide ``q x head_dim`` instead of ``q x S2_TILE``
  elements), else before PV.
* **TileShapes** are set once outside the loops (SK-02-R5): one cube tile
  ``[m, m], [t, t], [t, t]`` shared by C1 and C2 (card ``tile_shapes.cube``
  ``[128, 128] x 3``, C-TILE-05) and one vector tile shared by the gathers,
  V1 and V2.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, sqrt

from opdesign.catalog import Card, DeviceProfile, load_catalog
from opdesign.plan.buffers import l0_budgets, l1_budget
from opdesign.plan.checks import COMMON_ROWS, Row, no_kv_loop_state, whole_row_fits, with_checks
from opdesign.plan.config import config_entries, documented
from opdesign.plan.core import text
from opdesign.plan.fields import check_supported, schedule_counts, spec_echo
from opdesign.plan.hardware import hardware
from opdesign.plan.interfaces import io_tensors
from opdesign.plan.models import (
    Budget,
    Choice,
    ConfigEntry,
    CubeTile,
    Decision,
    Expansion,
    FormCheck,
    LoopRow,
    Module,
    Plan,
    TensorSpec,
    Unroll,
    VecTile,
)  # fmt: skip
from opdesign.plan.schedule import schedule
from opdesign.plan.tiles import align_up, axis_hi, cube_align
from opdesign.skeletons.base import Rejected
from opdesign.skeletons.sk02.budget import single_pass_expansion, single_pass_ub_budget
from opdesign.skeletons.sk02.packed import host_lengths
from opdesign.spec import DTYPE_BYTES, Spec

SUPPORTED = {"kv_cache": ("contiguous",), "quant": ("none",), "layout": ("BNSD", "BSND", "TND")}


@dataclass
class Fit:
    """Tiles and budgets of one head-tile candidate."""

    q_tile: int
    s2_tile: int
    cube: dict[str, CubeTile]
    vec: dict[str, VecTile]
    ub: Budget
    l1: Budget
    l0: list[Budget]

    @property
    def over(self) -> list[Budget]:
        return [b for b in (self.ub, self.l1, *self.l0) if not b.fits]


def normalisation(spec: Spec, s2_tile: int) -> str:
    """``after_pv`` when head_dim < S2_TILE (fewer elements to divide), else ``before_pv`` (SK-02 card)."""
    return "after_pv" if spec.shape.head_dim < s2_tile else "before_pv"


def _cube_tiles(spec: Spec, q_tile: int, s2_tile: int, card: Card) -> dict[str, CubeTile]:
    safe = card.param("safe_cube_tile")
    align = cube_align(spec.dtype)
    m = min(safe, align_up(q_tile, align))
    t = min(safe, align_up(max(spec.shape.head_dim, s2_tile), align))
    why = ("one set_cube_tile_shapes outside the loops serves C1 and C2 "
           "(SK-02-R5; card tile_shapes.cube [128,128]x3, C-TILE-05)")
    return {
        "C1": CubeTile(stage="C1", m=(m, m), k=(t, t), n=(t, t), operand_dtype=spec.dtype,
                       reason=f"m: q rows of the pass, k: head_dim, n: top-k columns; {why}"),
        "C2": CubeTile(stage="C2", m=(m, m), k=(t, t), n=(t, t), operand_dtype=spec.dtype,
                       reason=f"m: q rows, k: top-k columns of P, n: head_dim; P cast to {spec.dtype} (C-API-02); "
                              f"{why}"),
    }


def _vec_tiles(spec: Spec, q_tile: int, s2_tile: int, cube: dict[str, CubeTile]) -> dict[str, VecTile]:
    lo, _hi = load_catalog().constraint("C-TILE-07").param("safe_vec_range")
    shape = (min(lo, q_tile), cube["C1"].n[1])
    return {
        "V1": VecTile(stage="V1", shape=shape, dtype="fp32", view=(q_tile, s2_tile),
                      reason="AT-02 chain on the whole top-k row in FP32; columns = the cube n block, 16-aligned "
                             "(C-TILE-02); also tiles the K/V gathers"),
        "V2": VecTile(stage="V2", shape=shape, dtype="fp32", view=(q_tile, spec.shape.head_dim),
                      reason="output stage on [q_tile, head_dim]: "
                             + ("divide by the row sum, " if normalisation(spec, s2_tile) == "after_pv" else "")
                             + f"cast to {spec.dtype}; same TileShape, set once (SK-02-R5)"),
    }


def _fit(spec: Spec, device: DeviceProfile, card: Card, q_tile: int, s2_tile: int) -> Fit:
    cube = _cube_tiles(spec, q_tile, s2_tile, card)
    vec = _vec_tiles(spec, q_tile, s2_tile, cube)
    ub = single_pass_ub_budget(device, q_tile=q_tile, s2_tile=s2_tile, head_dim=spec.shape.head_dim,
                                      dtype=spec.dtype, vec=vec)
    nbuf = next(r.value for r in card.config if r.key == "pass_options.cube_nbuffer_setting")
    l1 = l1_budget(device, cube, max(nbuf.values()))  # deepest stage buffering, conservative
    l0 = [b for t in cube.values() for b in l0_budgets(device, t)]
    return Fit(q_tile, s2_tile, cube, vec, ub, l1, l0)


def best_fit(spec: Spec) -> Fit:
    """Largest head tile ``min(group, 128)``, halved, whose UB / L1 / L0 fit; else the ``q_tile = 1`` attempt."""
    cat = load_catalog()
    card, device = cat.card("SK-02"), cat.device(spec.device)
    s = spec.shape
    s2_tile = align_up(axis_hi(spec, "topk"), 16)
    q_tile = min(s.num_heads // s.num_kv_heads, card.param("safe_cube_tile"))
    fit = _fit(spec, device, card, q_tile, s2_tile)
    while fit.over and q_tile > 1:
        q_tile //= 2
        fit = _fit(spec, device, card, q_tile, s2_tile)
    return fit


def _expansion(spec: Spec, fit: Fit, traced_copies: int) -> Expansion:
    return single_pass_expansion(fit.q_tile, fit.s2_tile, spec.shape.head_dim, fit.vec, traced_copies)


def sk02_checks(spec: Spec, fit: Fit | None = None) -> list[FormCheck]:
    """The three SK-02 conditions (card ``parameters.conditions``) evaluated on the SPEC."""
    fit = fit or best_fit(spec)
    src = "SK-02 conditions, "
    axis = next((a for a in spec.dynamic_axes if a.name == "topk"), None)
    topks = sorted({spec.config_shape(c).topk for c in spec.typical_configs} | {spec.shape.topk})
    if axis is not None and axis.range[0] != axis.range[1]:
        c1 = (False, f"topk is a dynamic axis in [{axis.range[0]}, {axis.range[1]}]: "
                     "the top-k count is a runtime value")
    elif len(topks) > 1:
        c1 = (False, f"typical configs use topk {topks}: one compile-time S2_TILE cannot serve them")
    else:
        c1 = (True, f"topk fixed at {topks[0]}; S2_TILE = align16(topk) = {fit.s2_tile} >= topk")
    ub = fit.ub
    if fit.over:
        c2 = (False, "; ".join(f"{b.buffer} {b.total_bytes} B > {b.capacity_bytes} B" for b in fit.over)
              + f" even at q_tile {fit.q_tile} (S2_TILE {fit.s2_tile})")
    else:
        c2 = (True, f"UB {ub.total_bytes} B <= {ub.capacity_bytes} B at q_tile {fit.q_tile}, S2_TILE {fit.s2_tile}")
    # which reading of "full-KV residency" the budget takes, and why (the strict one is never met)
    kv_bytes = 2 * fit.s2_tile * spec.shape.head_dim * DTYPE_BYTES[spec.dtype]
    r1, c1v = fit.vec["V1"].shape
    c2 = c2 if not c2[0] else (c2[0], c2[1] + "; reading: S and P of the whole top-k row are resident "
                         f"(the row max and sum see all {fit.s2_tile} columns), K and V are not: the whole top-k "
                         f"K + V is 2 x {fit.s2_tile} x "
                         f"head_dim {spec.shape.head_dim} x {DTYPE_BYTES[spec.dtype]} B = {kv_bytes} B, "
                         f"{'above' if kv_bytes > ub.capacity_bytes else 'within'} UB {ub.capacity_bytes} B, so it "
                         f"streams through one [{r1}, {c1v}] gather tile at a time and reaches the cube in cube-tile "
                         "blocks; " + ("the strict reading (K + V resident) would reject this SPEC, as it rejects "
                                       "the card's own topk 2048 example" if kv_bytes > ub.capacity_bytes
                                       else "K + V alone would fit here, but the budget keeps the streamed reading"))
    r, c = fit.vec["V1"].shape
    col_tiles = ceil(fit.s2_tile / c)
    reduce_exp = ceil(fit.q_tile / r) * col_tiles * 2  # amax / sum: one input (C-TILE-04)
    limit = load_catalog().constraint("C-TILE-04").param("expansion_limit")
    c3 = (reduce_exp <= limit, f"amax/sum(dim=-1) over {col_tiles} column tiles of {c}: "
                               f"{reduce_exp} expressions {'<=' if reduce_exp <= limit else '>'} {limit}")
    return [
        FormCheck(id="SK-02-COND-1", condition="topk is a compile-time constant (S2_TILE >= topk)",
                  observed=c1[1], passed=c1[0], source=src + "1 (SK-02-R1)"),
        FormCheck(id="SK-02-COND-2", condition="full-KV residency fits the UB formula including intermediates "
                                               "(the whole top-k row of S and P; K / V streamed)",
                  observed=c2[1], passed=c2[0], source=src + "2 (SK-02-R2, C-TILE-03)"),
        FormCheck(id="SK-02-COND-3",
                  condition="the softmax reduction across vector tiles is PyPTO's reduce over dim=-1",
                  observed=c3[1], passed=c3[0], source=src + "3 (C-TILE-04)"),
    ]


def estimate_sk02(spec: Spec, golden_module_count: tuple[int, str] | None = None) -> Plan | Rejected:
    """Plan a ``mask: topk`` SPEC with SK-02 when its three conditions hold, else :class:`Rejected` with
    the evaluated conditions (the registry then plans SK-01 and names the failed one).

    Raises:
        SpecError: ``kv_cache`` / ``quant`` / ``layout`` outside SK-02's scope (field named).
    """
    check_supported(spec, SUPPORTED, "SK-02 (mask topk)")
    fit = best_fit(spec)
    checks = sk02_checks(spec, fit)
    if not all(c.passed for c in checks):
        return Rejected(checks)
    return _plan(spec, fit, checks, golden_module_count)


def _head_loop(spec: Spec, fit: Fit) -> tuple[str, int, str]:
    """(construct, iterations, basis): ``range`` when the heads are compile-time and their traced
    copies stay within C-TILE-04 (C-LOOP-01: weigh graph growth), else ``pypto.loop`` (C-LOOP-02)."""
    s = spec.shape
    iterations = s.num_kv_heads * ceil(s.num_heads // s.num_kv_heads / fit.q_tile)
    if any(a.name in ("num_heads", "num_kv_heads") for a in spec.dynamic_axes):
        return "pypto.loop", iterations, "a head axis is dynamic: symbolic bound"
    one = _expansion(spec, fit, 1)
    static = one.body_total * iterations <= one.limit
    return ("range" if static else "pypto.loop"), iterations, (
        f"{iterations} head-tile iterations x traced body {one.body_total} expressions = "
        f"{one.body_total * iterations} {'<=' if static else '>'} {one.limit}")


def _plan(spec: Spec, fit: Fit, checks: list[FormCheck], golden_module_count: tuple[int, str] | None) -> Plan:
    cat = load_catalog()
    card, device = cat.card("SK-02"), cat.device(spec.device)
    s = spec.shape
    group = s.num_heads // s.num_kv_heads
    q_tile, s2 = fit.q_tile, fit.s2_tile
    g_tiles = ceil(group / q_tile)
    head_kind, iterations, head_basis = _head_loop(spec, fit)
    exp = _expansion(spec, fit, iterations if head_kind == "range" else 1)
    norm = normalisation(spec, s2)
    root_count = s.batch * s.seq_q * s.num_kv_heads * g_tiles
    work = q_tile * s2 * s.head_dim
    tile_decisions = [
        Decision(name="q_tile", value=q_tile,
                 basis=f"query heads of one KV group at one token share the index row: min(group {group}, 128)"
                       + (f", halved to {q_tile} until UB/L1/L0 fit {device.name}" if q_tile < min(group, 128) else ""),
                 source="SK-02-R2, C-TILE-03"),
        Decision(name="kv_tile", value=s2,
                 basis=f"S2_TILE = align16(topk {s.topk}) >= topk: the whole top-k row in one pass",
                 source="SK-02-R1, C-TILE-02"),
    ]
    counts = [
        Decision(name="q_tiles", value=g_tiles,
                 basis=f"ceildiv(group {group}, q_tile {q_tile}) head tiles per (batch, token, kv head)",
                 source="SK-02 structure"),
        Decision(name="kv_tiles", value=1, basis="single pass: S2_TILE covers topk", source="SK-02-R3"),
        Decision(name="root_count", value=root_count,
                 basis=f"batch {s.batch} x seq_q {s.seq_q} x num_kv_heads {s.num_kv_heads} x q_tiles {g_tiles}"
                       + ("; TND: at most, seq_q is the per-batch maximum (T_q <= batch x seq_q)"
                          if spec.layout == "TND" else ""),
                 source="SK-01 structural table (root count), one root per single pass"),
        Decision(name="task_count", value=root_count, basis="one C1-V1-C2 pass per root (no KV loop)",
                 source="SK-02-R3"),
        Decision(name="work_per_root_macs", value=work,
                 basis=f"q_tile {q_tile} x S2_TILE {s2} x head_dim {s.head_dim} per matmul stage",
                 source="SK-01 structural table (task granularity)"),
        Decision(name="cores_busy", value=min(root_count, device.aic_cores),
                 basis=f"min(root_count, aic_cores {device.aic_cores})",
                 source=f"devices.yaml {device.ref('aic_cores')}"),
        Decision(name="seq_kv_max", value=axis_hi(spec, "seq_kv"),
                 basis="largest seq_kv (typical or dynamic hi): index_select reads one unsplit KV axis "
                       "(viewshape[dim] >= shape[dim]), and view shapes are compile-time ints",
                 source="index_select constraint 3, C-SYM-07"),
        Decision(name="normalisation", value=norm,
                 basis=(f"head_dim {s.head_dim} < S2_TILE {s2}: divide O [q, head_dim] after PV" if norm == "after_pv"
                        else f"head_dim {s.head_dim} >= S2_TILE {s2}: divide P before PV"),
                 source="SK-02 card normalisation_modes, AT-02"),
        Decision(name="head_loop", value=head_kind, basis=head_basis,
                 source="SK-02 structure (few heads: range, many: pypto.loop), C-LOOP-01/02, C-TILE-04"),
    ]
    config, entries = config_entries(spec, card, fallback=cat.card("SK-01"))
    rec = next(r for r in cat.card("SK-01").config if r.key == "runtime_options.ready_on_host_tensors")
    lengths = host_lengths(spec)
    config["runtime_options"]["ready_on_host_tensors"] = list(lengths.values())
    entries = [e for e in entries if e.key != rec.key]
    entries.append(ConfigEntry(key=rec.key, value=list(lengths.values()), status="required",
                               purpose=("the batch loop's row offsets, the token loop's bound, cur_seq and its "
                                        "pypto.cond come from the cumulative actual_seq_q / actual_seq_kv (TND); "
                                        "issue them from the host early" if spec.layout == "TND" else
                                        "cur_seq and its pypto.cond come from kv_act_seqs; "
                                        "issue it from the host early"),
                               source=f"SK-01 configuration ({rec.when}), AT-21"))
    rec = next(r for r in card.config if r.key == "sg_set_scope")
    entries.append(ConfigEntry(key=rec.key, value=rec.value, status=rec.status,
                               purpose="C1, V1 and C2 of a pass in one sub-graph (SK-02-R4)"
                                       + (f"; {rec.when}" if rec.when else ""),
                               source=f"{card.id} configuration"))
    # the value is the plan's own cube tile (what the pseudocode sets); the card's [128,128]x3 is its starting point
    rec = next(r for r in card.config if r.key == "tile_shapes.cube")
    c1 = fit.cube["C1"]
    planned = [list(c1.m), list(c1.k), list(c1.n)]
    purpose = ("one cube tile for C1 and C2, set once outside the loops (SK-02-R5)"
               + (f"; {rec.when}" if rec.when else ""))
    if planned != rec.value:
        purpose += (f"; the card's {rec.value} with m = {c1.m[1]}: a pass holds q_tile {fit.q_tile} query rows "
                    f"(heads of one KV group), aligned up to {c1.m[1]} for the cube (C-TILE-05); a 128-row m block "
                    f"would pad {128 - fit.q_tile} of 128 rows"
                    if c1.m[1] < 128 else f"; the card's {rec.value} resized to the plan's tiles (C-TILE-05)")
    entries.append(ConfigEntry(key=rec.key, value=planned, status=rec.status, purpose=purpose,
                               source=f"{card.id} configuration, C-TILE-05"))
    entries = [documented(e) for e in entries]
    primary, outputs, module_count, module_reason, modules = _interfaces(spec, golden_module_count)
    rtol, atol = spec.tolerance
    packed = spec.layout == "TND"
    loops = [
        LoopRow(name="b_idx", loop_kind="pypto.loop", bound="batch", step="1",
                dependence="independent; rows [cum[b-1], cum[b]) of actual_seq_q / actual_seq_kv (cum[-1] = 0)"
                if packed else "independent"),
        LoopRow(name="s_idx", loop_kind="pypto.loop", bound="q_len = actual_seq_q[b] - q_start" if packed else "seq_q",
                step="1 token",
                dependence="independent; cur_seq = clamp(kv_len - q_len + 1 + s, 0, TOPK), a runtime variable" if packed
                else "independent; cur_seq = clamp(kv_act_seqs[b] - seq_q + 1 + s, 0, TOPK), a runtime variable"),
        LoopRow(name="kv_h", loop_kind=head_kind, bound="num_kv_heads", step="1", dependence="independent"),
        LoopRow(name="g_idx", loop_kind=head_kind, bound=f"ceildiv(group {group}, Q_TILE)", step="Q_TILE heads",
                dependence="independent (one root each); no KV loop inside (SK-02-R3)"),
    ]
    sched = schedule(device.aic_cores, root_count, root_count, 1, text("sched.chain.single_pass"))
    counts += schedule_counts(sched, device.ref("aic_cores"))
    return with_checks(Plan(
        op_name=spec.op_name, device=spec.device, dtype=spec.dtype, layout=spec.layout, mask=spec.mask,
        kv_cache=spec.kv_cache, quant=spec.quant, direction=spec.direction,
        head_dim=s.head_dim, num_heads=s.num_heads, num_kv_heads=s.num_kv_heads, group_size=group,
        seq_q=s.seq_q, seq_kv=s.seq_kv, batch=s.batch,
        skeleton=Choice(id="SK-02", title=card.title,
                        reason=f"top-k sparse attention with a compile-time topk {s.topk}: the whole top-k row "
                               "fits one pass (all three SK-02 conditions hold)"),
        atoms=_atoms(cat, norm),
        form="baseline",
        form_reason="SK-02 has one form; the SK-01 performance-form conditions do not apply (no KV loop)",
        form_checks=[], skeleton_checks=checks, variant="Sparse Attn (top-k, single pass)", topk=s.topk,
        q_tile=q_tile, kv_tile=s2, q_tiles=g_tiles, kv_tiles=1, kv_loop="none",
        tile_decisions=tile_decisions, cube_tiles=fit.cube, vec_tiles=fit.vec,
        unroll=Unroll(candidates=[], unroll_factor=1, unroll_list=[],
                      remainder_rule="no KV loop, so nothing to unroll: one pass covers S2_TILE >= topk",
                      reason="SK-02-R3: no loop_unroll (there is no KV loop)", source="SK-02-R3"),
        unroll_factor=1, batch_lengths=lengths if packed else {}, root_count=root_count, task_count=root_count,
        work_per_root_macs=work, counts=counts,
        ub_budget=fit.ub, l1_budget=fit.l1, l0_budgets=fit.l0, expansion=exp, loops=loops, state=[],
        config=config, config_entries=entries, primary_inputs=primary, final_outputs=outputs, modules=modules,
        module_count=module_count, module_reason=module_reason, scale=1.0 / sqrt(s.head_dim), rtol=rtol, atol=atol,
        **spec_echo(spec),
        risks=_risks(spec, fit, exp, root_count, device),
        hardware=hardware(spec, device, rtol, atol), schedule=sched,
    ), COMMON_ROWS + (Row("SK-02-R3", "SK-02-R3", no_kv_loop_state), Row("SK-02-R1", "SK-02-R1", whole_row_fits)))


def _atoms(cat, norm: str) -> list[Choice]:
    picks = [
        ("AT-12", "C1: S = Q K^T over the gathered top-k rows, scaled by 1/sqrt(head_dim)"),
        ("AT-02", "V1: standard softmax over the whole top-k row, no online state; normalised "
                  + ("after PV (divide O by the row sum)" if norm == "after_pv"
                     else "before PV (divide P by the row sum)")),
        ("AT-13", "C2: O = P V over the gathered top-k rows"),
        ("AT-20", "the effective top-k cur_seq <= TOPK and the last head tile are tails: view + valid_shape"),
        ("AT-21", "sg_set_scope(2) opens before the first computation of the pass (SK-02-R4) "
                  "and closes after assemble"),
    ]
    return [Choice(id=i, title=cat.card(i).title, reason=r) for i, r in picks]


def _interfaces(spec: Spec, golden_module_count: tuple[int, str] | None):
    primary, outputs = io_tensors(spec)
    if spec.layout == "TND":  # q, k, v, the cumulative actual_seq_q / actual_seq_kv, topk_indices [T_q, topk]
        return (primary, outputs, *_module(spec, primary, outputs, golden_module_count))
    # SK-02 reads the per-batch KV length as kv_act_seqs (cur_seq and its pypto.cond) whether seq_kv is
    # varlen or not: it replaces io_tensors' actual_seq_kv, and io_tensors already lists topk_indices
    primary = [t for t in primary if t.name != "actual_seq_kv"]
    if not any(t.name == "topk_indices" for t in primary):
        primary.append(TensorSpec(name="topk_indices", shape=["batch", "seq_q", "topk"], dtype="int32"))
    primary.append(TensorSpec(name="kv_act_seqs", shape=["batch"], dtype="int32"))
    return (primary, outputs, *_module(spec, primary, outputs, golden_module_count))


def _module(spec: Spec, primary: list[TensorSpec], outputs: list[TensorSpec], golden_module_count):
    out = outputs[0]
    module = Module(
        id=1, name=f"{spec.op_name}_sk02",
        description="gather the top-k K/V rows, C1 QK^T -> V1 standard softmax -> C2 PV once per (batch, token, "
                    "kv head, head tile); cur_seq == 0 rows stay zero",
        inputs=[{"name": t.name, "source": "primary"} for t in primary],
        outputs=[{"name": out.name, "shape": out.shape, "dtype": out.dtype}],
    )
    if golden_module_count is not None:
        count, reason = golden_module_count
    else:
        count, reason = 1, ("no golden given; SK-02 runs gather, C1, V1 and C2 once per root with no state to hand "
                            "between modules, so one module")
    return count, reason, [module]


def _risks(spec: Spec, fit: Fit, exp: Expansion, root_count: int, device: DeviceProfile) -> list[str]:
    ub = fit.ub
    out = [f"UB margin {ub.capacity_bytes - ub.total_bytes} B of {ub.capacity_bytes} B "
           f"({100 * ub.total_bytes / ub.capacity_bytes:.1f} % used): a larger topk or q_tile must be re-budgeted "
           "(SK-02-R2, C-TILE-03); when it no longer fits, SK-01 takes over."]
    m = fit.cube["C1"].m[1]
    if m > fit.q_tile:
        out.append(f"cube m tile {m} > q_tile {fit.q_tile}: {m - fit.q_tile} padded rows per matmul "
                   "(C-TILE-05 alignment); the UB budget, not the cube, limits the head tile.")
    if root_count < device.aic_cores:
        out.append(f"{root_count} roots on {device.aic_cores} cube cores: {device.aic_cores - root_count} cores "
                   "idle; decode-sized batches are latency-bound (FAI load balance: with few blocks use fewer cores).")
    out.append("SK-02-R4 keeps C1, V1 and C2 in one sg_set_scope(2) while AT-21 reports F41007 for a cube and "
               "a vector op in one scope: if the target release rejects it, narrow scope 2 to the V1 chain.")
    out.append("index contract: slots past cur_seq are never used as keys (clamped to 0, outside valid_shape), "
               "so -1 there is a convention; every slot before cur_seq must be a valid position < "
               + ("the token's own batch KV length (positions relative to kv_start = actual_seq_kv[b-1], "
                  "not packed rows)" if spec.layout == "TND" else "kv_act_seqs[b]")
               + ". An indexer that fills fewer slots than cur_seq breaks the kernel "
                 "(the scaffold's golden follows the indices).")
    if spec.layout == "TND":
        out.append("packed layout: actual_seq_q / actual_seq_kv must be non-decreasing cumulative end offsets "
                   "with the last equal to T_q / T_kv; a per-batch length given there instead reads the wrong rows.")
    out.append(f"expression expansion: whole traced body {exp.body_total} against {exp.limit} (C-TILE-04 estimate "
               f"on the whole body, largest op {exp.max_per_op}; confirm with the real compile).")
    return out
