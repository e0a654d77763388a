"""Spec -> Plan for SK-01 forward attention: pure arithmetic, every number with its rule.

SK-01 covers forward attention with mask ``none`` / ``causal`` /
``sliding_window`` / ``tensor``, contiguous or paged KV (AT-17), no quantization
or FP8 P·V (AT-08 / AT-06), MHA / GQA / MQA; ``mask: topk`` when SK-02's
conditions fail (the registry, :mod:`opdesign.skeletons.registry`, falls back here).

Numbers read from the catalog (never hard-coded here): SK-01 ``parameters``
(performance-form thresholds, safe tiles), C-TILE-02 ``align_bytes``,
C-TILE-03 ``tensor_count``, C-TILE-04 ``expansion_limit``, C-TILE-05
``cube_align_elems``, the device profile capacities.
"""

from __future__ import annotations

from math import ceil, sqrt

from opdesign.catalog import load_catalog
from opdesign.errors import SpecError
from opdesign.plan.blocks import balance, kv_block_ranges
from opdesign.plan.buffers import l0_budgets, l1_budget
from opdesign.plan.config import config_entries
from opdesign.plan.fields import batch_lengths, check_supported, spec_echo
from opdesign.plan.interfaces import io_tensors
from opdesign.plan.models import Choice, Decision, Plan
from opdesign.plan.tiles import align_up, axis_hi, choose_cube_tiles, cube_align
from opdesign.plan.checks import COMMON_ROWS, Row, fp32_accumulators, single_unroll, with_checks
from opdesign.skeletons.sk01.budget import ub_budget
from opdesign.skeletons.sk01.parts import choose_vec_tiles, expansion, form_checks, loop_rows, module, state_rows
from opdesign.skeletons.sk01.variants import choose_unroll, fp8_tolerance, sk01_variant
from opdesign.spec import Spec

SUPPORTED = {"direction": ("forward",), "mask": ("none", "causal", "sliding_window", "tensor", "topk"),
             "layout": ("BNSD", "BSND")}


def _tiles(spec: Spec, form: str, sk01) -> tuple[int, int, list[Decision]]:
    align = cube_align(spec.dtype)
    safe = sk01.param("safe_cube_tile")
    sq, skv = axis_hi(spec, "seq_q"), axis_hi(spec, "seq_kv")
    if form == "performance":
        per_head = sk01.param("perf_q_tiles_per_head")
        q_tile = align_up(ceil(sq / per_head), align)
        max_static = sk01.param("static_kv_max_tiles")
        kv_tile = align_up(ceil(skv / max_static), max(safe, spec.shape.block_size or 1))
        return q_tile, kv_tile, [
            Decision(name="q_tile", value=q_tile, basis=f"align16(ceil(seq_q {sq} / {per_head})): at most {per_head} Q tiles per (batch, head)",
                     source="SK-01 perf invariant 1"),
            Decision(name="kv_tile", value=kv_tile, basis=f"align{safe}(ceil(seq_kv {skv} / {max_static})): k_tile_count <= {max_static} so the K loop is a static range",
                     source="SK-01 perf invariant 2"),
        ]
    q_tile = min(safe, align_up(sq, align))
    kv_tile = min(safe, align_up(skv, align))
    if spec.kv_cache == "paged":
        kv_tile = align_up(kv_tile, spec.shape.block_size)
        return q_tile, kv_tile, [
            Decision(name="q_tile", value=q_tile, basis=f"min(safe tile {safe}, align{align}(seq_q hi {sq}))",
                     source="SK-01 safe baseline"),
            Decision(name="kv_tile", value=kv_tile,
                     basis=f"min(safe tile {safe}, seq_kv hi {skv}) rounded up to whole pages of block_size {spec.shape.block_size}",
                     source="SK-01 safe baseline, AT-17 (a KV tile gathers whole pages)"),
        ]
    return q_tile, kv_tile, [
        Decision(name="q_tile", value=q_tile, basis=f"min(safe tile {safe}, align{align}(seq_q hi {sq}))",
                 source="SK-01 safe baseline, FAI BLOCK_BASE_SIZE 128"),
        Decision(name="kv_tile", value=kv_tile, basis=f"min(safe tile {safe}, align{align}(seq_kv hi {skv}))",
                 source="SK-01 safe baseline, FAI L1TileShape <128,128,128>"),
    ]


def _short(values: list[int]) -> str:
    """A list for a basis text: in full when short, else its ends and its length."""
    if len(values) <= 12:
        return str(values)
    return f"[{', '.join(map(str, values[:6]))}, ..., {', '.join(map(str, values[-2:]))}] ({len(values)} q blocks)"


def _budgets(spec: Spec, form: str, q_tile: int, kv_tile: int, sk01, device):
    """Cube and vector tiles for (q_tile, kv_tile) and the UB, L1 and L0 budgets they imply."""
    cube = choose_cube_tiles(spec, form, q_tile, kv_tile, sk01)
    vec = choose_vec_tiles(spec, form, q_tile, kv_tile, cube, device, sk01)
    ub = ub_budget(device, q_tile=q_tile, head_dim=spec.shape.head_dim,
                          resident_state=form == "baseline", cube=cube, vec=vec)
    nbuf = next((r.value for r in sk01.config if r.key == "pass_options.cube_nbuffer_setting" and not r.when), {-1: 1})
    l1 = l1_budget(device, cube, nbuf.get(-1, 1))  # SK-01 cube_nbuffer_setting {-1: n}
    l0 = [b for t in cube.values() for b in l0_budgets(device, t)]
    return cube, vec, ub, l1, l0


def _over(ub, l1, l0) -> list:
    return [b for b in [ub, l1, *l0] if not b.fits]


def estimate_sk01(spec: Spec, golden_module_count: tuple[int, str] | None = None, **overrides) -> Plan:
    """Plan a SPEC with the SK-01 online flash attention skeleton.

    ``overrides`` are extra :class:`Plan` fields set by a caller that falls back
    to SK-01 (e.g. ``fallback_from``, ``skeleton_checks`` from SK-02).

    Args:
        spec: a validated SPEC.
        golden_module_count: ``(module_count, reason)`` from the golden estimator, if any.

    Raises:
        SpecError: the SPEC asks for a variant this version does not plan, or no
            legal tiling exists within the device's buffers.
    """
    check_supported(spec, SUPPORTED, "SK-01")
    cat = load_catalog()
    sk01 = cat.card("SK-01")
    device = cat.device(spec.device)
    s = spec.shape
    q_tile_perf = align_up(ceil(axis_hi(spec, "seq_q") / sk01.param("perf_q_tiles_per_head")), 16)
    checks = form_checks(spec, sk01, q_tile_perf)
    form = "performance" if all(c.passed for c in checks) else "baseline"
    failed = [c for c in checks if not c.passed]
    form_reason = (
        "all four SK-01 performance-form conditions hold"
        if form == "performance"
        else "safe baseline: failed " + "; ".join(f"{c.id} ({c.condition}: {c.observed})" for c in failed)
    )
    q_tile, kv_tile, tile_decisions = _tiles(spec, form, sk01)
    q_tiles, kv_tiles = ceil(s.seq_q / q_tile), ceil(s.seq_kv / kv_tile)
    variant = sk01_variant(spec)

    cube, vec, ub, l1, l0 = _budgets(spec, form, q_tile, kv_tile, sk01, device)
    while _over(ub, l1, l0) and form == "baseline" and q_tile > 16:
        # C-TILE-03: halve the Q tile until the resident state and results fit
        why = "; ".join(f"{b.buffer} {b.total_bytes} B > {b.capacity_bytes} B" for b in _over(ub, l1, l0))
        q_tile //= 2
        cube, vec, ub, l1, l0 = _budgets(spec, form, q_tile, kv_tile, sk01, device)
        tile_decisions[0] = Decision(
            name="q_tile", value=q_tile,
            basis=f"safe tile halved to {q_tile} (largest power of two that fits {device.name}; "
                  f"at {q_tile * 2}: {why})",
            source="SK-01 safe baseline, C-TILE-03")
        q_tiles = ceil(s.seq_q / q_tile)
    over = _over(ub, l1, l0)
    if over:
        raise SpecError(
            "shape: no legal tiling: " + "; ".join(f"{b.buffer} {b.total_bytes} B > {b.capacity_bytes} B" for b in over)
            + " (C-TILE-03)"
        )
    unroll = choose_unroll(spec, sk01, variant, kv_tile, form)
    kv_loop = "range" if form == "performance" else ("loop_unroll" if unroll.unroll_factor > 1 else "pypto.loop")
    exp = expansion(q_tile, kv_tile, s.head_dim, vec, kv_tiles if kv_loop == "range" else 1,
                    fp8=spec.quant == "fp8")

    root_count = s.batch * s.num_heads * q_tiles
    ranges = kv_block_ranges(spec.mask, s.seq_q, s.seq_kv, q_tile, kv_tile, s.window)
    per_q_block = [n for _, n in ranges]
    task_count = s.batch * s.num_heads * sum(per_q_block)
    task_basis = (f"root_count {root_count} x kv_tiles {kv_tiles}" if spec.mask in ("none", "tensor", "topk")
                  else f"batch x num_heads x sum(valid kv blocks per q block {_short(per_q_block)})")
    bal = None
    if spec.mask in ("causal", "sliding_window"):
        bal = balance(per_q_block, device.aic_cores, repeats=s.batch * s.num_heads)
    work = q_tile * s.seq_kv * s.head_dim
    counts = [
        Decision(name="q_tiles", value=q_tiles, basis=f"ceildiv(seq_q {s.seq_q}, q_tile {q_tile})", source="SK-01 loop nest"),
        Decision(name="kv_tiles", value=kv_tiles, basis=f"ceildiv(seq_kv {s.seq_kv}, kv_tile {kv_tile})", source="SK-01 loop nest"),
        Decision(name="root_count", value=root_count, basis=f"batch {s.batch} x num_heads {s.num_heads} x q_tiles {q_tiles}",
                 source="SK-01 structural table (root count)"),
        Decision(name="task_count", value=task_count, basis=task_basis + " (one C1-V1-C2 step per task)",
                 source="SK-01 structural table, FAI pipeline (domain.md §7)"),
        Decision(name="work_per_root_macs", value=work, basis=f"q_tile {q_tile} x seq_kv {s.seq_kv} x head_dim {s.head_dim} per matmul stage",
                 source="SK-01 structural table (task granularity)"),
        Decision(name="cores_busy", value=min(root_count, device.aic_cores),
                 basis=f"min(root_count, aic_cores {device.aic_cores})", source=f"devices.yaml {device.name}.aic_cores"),
    ]
    if spec.kv_cache == "paged":
        bs = s.block_size
        counts.append(Decision(name="seq_kv_paged", value=align_up(s.seq_kv, bs),
                               basis=f"RoundUp(seq_kv {s.seq_kv}, block_size {bs}): tiling statistics count whole pages",
                               source="FAI paged attention (domain.md §7), AT-17"))
        counts.append(Decision(name="pages_per_kv_tile", value=kv_tile // bs, basis=f"kv_tile {kv_tile} // block_size {bs}",
                               source="AT-17 (block_num pages per tile)"))
    if bal is not None:
        counts.append(Decision(name="core_imbalance", value=bal.imbalance,
                               basis=f"max / mean valid KV blocks per core over {bal.cores} cores",
                               source="FAI load balance (domain.md §7)"))
    config, entries = config_entries(spec, sk01)
    primary, outputs = io_tensors(spec)
    modules = [module(spec, primary, outputs[0])]
    if golden_module_count is not None:
        module_count, module_reason = golden_module_count
    else:
        module_count = 1
        module_reason = ("no golden given; SK-01 keeps C1 -> V1 -> C2 and the online-softmax state in one "
                         "module (the softmax chain and the state it carries belong together)")
    rtol, atol = fp8_tolerance(*spec.tolerance) if spec.quant == "fp8" else spec.tolerance
    plan = Plan(
        op_name=spec.op_name, device=spec.device, dtype=spec.dtype, layout=spec.layout, mask=spec.mask,
        kv_cache=spec.kv_cache, quant=spec.quant, direction=spec.direction,
        head_dim=s.head_dim, num_heads=s.num_heads, num_kv_heads=s.num_kv_heads,
        group_size=s.num_heads // s.num_kv_heads, seq_q=s.seq_q, seq_kv=s.seq_kv, batch=s.batch,
        skeleton=Choice(id="SK-01", title=sk01.title,
                        reason="forward attention iterating KV tiles with an online softmax (QK^T -> softmax -> PV)"),
        atoms=_atoms(spec, cat),
        form=form, form_reason=form_reason, form_checks=checks,
        q_tile=q_tile, kv_tile=kv_tile, q_tiles=q_tiles, kv_tiles=kv_tiles, kv_loop=kv_loop,
        tile_decisions=tile_decisions, cube_tiles=cube, vec_tiles=vec,
        unroll=unroll, unroll_factor=unroll.unroll_factor,
        root_count=root_count, task_count=task_count, work_per_root_macs=work, counts=counts,
        ub_budget=ub, l1_budget=l1, l0_budgets=l0, expansion=exp,
        loops=loop_rows(spec, kv_loop), state=state_rows(spec, q_tile, form),
        config=config, config_entries=entries,
        primary_inputs=primary, final_outputs=outputs, modules=modules,
        module_count=module_count, module_reason=module_reason,
        scale=1.0 / sqrt(s.head_dim), rtol=rtol, atol=atol,
        **spec_echo(spec),
        risks=_risks(spec, ub, exp, q_tile, kv_tile, form),
        variant=variant, balance=bal, batch_lengths=batch_lengths(spec), block_size=s.block_size, window=s.window, topk=s.topk,
        **overrides,
    )
    return with_checks(plan, COMMON_ROWS + (Row("C-LOOP-05", "C-LOOP-05", single_unroll), Row("SK-01-R6", "SK-01-R6", fp32_accumulators)))


def _atoms(spec: Spec, cat) -> list[Choice]:
    picks = [
        ("AT-12", "C1: S = Q K^T scaled by 1/sqrt(head_dim)"),
        ("AT-01", "V1: online softmax carrying mi/li/oi across KV tiles"),
        ("AT-13", "C2: O_ij = P V"),
        ("AT-20", "tails: seq_q / seq_kv need not be multiples of the tiles; view + valid_shape"),
        ("AT-21", "sub-graph scopes keep the softmax chain in one vector graph"),
    ]
    if spec.kv_cache == "paged":
        picks.append(("AT-17", f"paged KV: gather the pages of each KV tile through block_table "
                               f"(block_size {spec.shape.block_size}), negative ids clamped to 0 (SK-01-R7)"))
    if spec.quant == "fp8":
        picks.append(("AT-08", "quantise P per row to FP8 E4M3 between V1 and C2 (SK-01-R8)"))
        picks.append(("AT-06", "dequantise the C2 product by the P row scale and the V channel scale (SK-01-R8)"))
    return [Choice(id=i, title=cat.card(i).title, reason=r) for i, r in picks]


def _risks(spec: Spec, ub, exp, q_tile: int, kv_tile: int, form: str) -> list[str]:
    s = spec.shape
    out = [f"UB margin {ub.capacity_bytes - ub.total_bytes} B of {ub.capacity_bytes} B "
           f"({100 * ub.total_bytes / ub.capacity_bytes:.1f} % used): any added vector buffer must be re-budgeted (C-TILE-03)."]
    if s.seq_q % q_tile or s.seq_kv % kv_tile:
        out.append(f"tails: seq_q {s.seq_q} mod q_tile {q_tile} = {s.seq_q % q_tile}, seq_kv {s.seq_kv} mod kv_tile {kv_tile} = "
                   f"{s.seq_kv % kv_tile}; padded rows/columns must not reach the row max or row sum (AT-20).")
    if spec.mask in ("causal", "sliding_window"):
        out.append(f"{spec.mask} mask: q blocks see different numbers of KV blocks, so per-core work is uneven "
                   "(FAI load balance; see the balance table).")
    if spec.mask == "topk":
        out.append("top-k on SK-01 reads every KV tile and masks the positions the indexer did not pick; the "
                   "index_select gather of the Sparse Attn row would read only the picked rows (tuning direction).")
    if spec.mask in ("causal", "sliding_window", "topk"):
        out.append("the in-block mask helpers of the pseudocode (causal_fill / window_fill / topk_tile_mask) are written against a generic "
                   "triangular-mask API: map them to the mask primitive of the target PyPTO release.")
    if form == "performance":
        out.append("performance form: breaking any SK-01 invariant (Q_TILE = seq_q/2, static K range, SSA state, "
                   "sg_set_scope(6) chain, column-wise l/m) voids it; fall back to the safe baseline.")
    out.append(f"expression expansion: {exp.max_per_op} per op against {exp.limit} (C-TILE-04 estimate; confirm with the real compile).")
    return out
