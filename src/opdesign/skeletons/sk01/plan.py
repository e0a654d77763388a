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
from opdesign.plan.checks import COMMON_ROWS, Row, fp32_accumulators, single_unroll, with_checks
from opdesign.plan.config import config_entries
from opdesign.plan.fields import batch_lengths, check_supported, schedule_counts, spec_echo
from opdesign.plan.hardware import hardware
from opdesign.plan.interfaces import io_tensors, page_table
from opdesign.plan.models import Choice, Decision, Phrase, Plan, text
from opdesign.plan.pins import TilePins
from opdesign.plan.schedule import schedule
from opdesign.plan.tiles import align_up, axis_hi, choose_cube_tiles, cube_align
from opdesign.skeletons.sk01.budget import ub_budget
from opdesign.skeletons.sk01.parts import (
    choose_vec_tiles,
    expansion,
    form_checks,
    loop_rows,
    module,
    state_rows,
    vec_tiles,
)
from opdesign.skeletons.sk01.variants import choose_unroll, fp8_tolerance, sk01_variant, varlen_balance
from opdesign.spec import DTYPE_BYTES, Spec

STATE_ITEMS = ("sumUb", "maxUb", "expUb")  # FAI's UB softmax state (opdesign.plan.buffers.softmax_state_items)
SUPPORTED = {"direction": ("forward",), "mask": ("none", "causal", "sliding_window", "tensor", "topk"),
             "layout": ("BNSD", "BSND", "TND")}
# TND (packed varlen) is planned with contiguous or paged K/V (paged: packed Q rows, K/V pages through
# block_table with per-batch kv_act_seqs), FP8 on the paged path only, and every mask (tensor: attn_mask
# [T_q, seq_kv]; topk: topk_indices [T_q, topk], indices into the token's own batch); the rest is refused by
# field (this version's scope, not an SK-01 card exclusion)
TND_SUPPORTED = {"kv_cache": ("contiguous", "paged"), "quant": ("none", "fp8"),
                 "mask": ("none", "causal", "sliding_window", "tensor", "topk")}
TND_FP8_SUPPORTED = {"kv_cache": ("paged",)}  # the PageAttn FP8 row; V's per-token scale of packed K/V is not planned


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
            Decision(name="q_tile", value=q_tile, basis=text("sk01.q_tile.perf", sq=sq, per_head=per_head),
                     source="SK-01 perf invariant 1"),
            Decision(name="kv_tile", value=kv_tile,
                     basis=text("sk01.kv_tile.perf", safe=safe, skv=skv, max_static=max_static),
                     source="SK-01 perf invariant 2"),
        ]
    q_tile = min(safe, align_up(sq, align))
    kv_tile = min(safe, align_up(skv, align))
    if spec.kv_cache == "paged":
        kv_tile = align_up(kv_tile, spec.shape.block_size)
        return q_tile, kv_tile, [
            Decision(name="q_tile", value=q_tile, basis=text("sk01.q_tile.safe", safe=safe, align=align, sq=sq),
                     source="SK-01 safe baseline"),
            Decision(name="kv_tile", value=kv_tile,
                     basis=text("sk01.kv_tile.paged", safe=safe, skv=skv, block_size=spec.shape.block_size),
                     source="SK-01 safe baseline, AT-17 (a KV tile gathers whole pages)"),
        ]
    return q_tile, kv_tile, [
        Decision(name="q_tile", value=q_tile, basis=text("sk01.q_tile.safe", safe=safe, align=align, sq=sq),
                 source="SK-01 safe baseline, FAI BLOCK_BASE_SIZE 128"),
        Decision(name="kv_tile", value=kv_tile, basis=text("sk01.kv_tile.safe", safe=safe, align=align, skv=skv),
                 source="SK-01 safe baseline, FAI L1TileShape <128,128,128>"),
    ]


def _budgets(spec: Spec, form: str, q_tile: int, kv_tile: int, sk01, device, cube=None):
    """Cube and vector tiles for (q_tile, kv_tile) and the UB, L1 and L0 budgets they imply."""
    cube = cube or choose_cube_tiles(spec, form, q_tile, kv_tile, sk01)
    vec = choose_vec_tiles(spec, form, q_tile, kv_tile, cube, device, sk01)
    ub = ub_budget(device, q_tile=q_tile, head_dim=spec.shape.head_dim,
                          resident_state=form == "baseline", cube=cube, vec=vec)
    nbuf = next((r.value for r in sk01.config if r.key == "pass_options.cube_nbuffer_setting" and not r.when), {-1: 1})
    l1 = l1_budget(device, cube, nbuf.get(-1, 1))  # SK-01 cube_nbuffer_setting {-1: n}
    l0 = [b for t in cube.values() for b in l0_budgets(device, t)]
    return cube, vec, ub, l1, l0


def _over(ub, l1, l0) -> list:
    return [b for b in [ub, l1, *l0] if not b.fits]


def _overflow(over: list) -> list[Phrase]:
    """One ``buffer total B > capacity B`` phrase per budget that does not fit."""
    return [text("budget.over", buffer=b.buffer, total=b.total_bytes, capacity=b.capacity_bytes) for b in over]


def _fit(spec: Spec, form: str, sk01, device):
    """Tiles of ``form`` and their budgets; the baseline halves the Q tile while a budget overflows
    (C-TILE-03). Returns ``(q_tile, kv_tile, tile_decisions, cube, vec, ub, l1, l0)``."""
    q_tile, kv_tile, decisions = _tiles(spec, form, sk01)
    cube, vec, ub, l1, l0 = _budgets(spec, form, q_tile, kv_tile, sk01, device)
    while _over(ub, l1, l0) and form == "baseline" and q_tile > 16:
        why = _overflow(_over(ub, l1, l0))
        if not ub.fits:  # name the reading of the FAI UB items that forced the smaller tile
            state = sum(i.bytes for i in ub.items if i.name in STATE_ITEMS)
            if ub.total_bytes - state <= ub.capacity_bytes:
                why = [*why, text("sk01.q_tile.reading", state=state, without=ub.total_bytes - state,
                                  capacity=ub.capacity_bytes)]
        q_tile //= 2
        cube, vec, ub, l1, l0 = _budgets(spec, form, q_tile, kv_tile, sk01, device)
        decisions[0] = Decision(name="q_tile", value=q_tile,
                                basis=text("sk01.q_tile.halved", q_tile=q_tile, device=device.name,
                                           before=q_tile * 2, why=why),
                                source="SK-01 safe baseline, C-TILE-03")
    return q_tile, kv_tile, decisions, cube, vec, ub, l1, l0


def _pinned(spec: Spec, form: str, sk01, device, pins: TilePins, fitted):
    """``fitted`` with the pinned knobs in place: pinned q / kv tiles (their decisions say so), cube tiles
    from the pinned QK / PV tiles, the pinned V1 tile (else the form's rule for the new tiles), budgets."""
    q_tile, kv_tile, decisions = fitted[0], fitted[1], list(fitted[2])
    for i, (name, value) in enumerate((("q_tile", pins.q_tile), ("kv_tile", pins.kv_tile))):
        if value is not None and value != decisions[i].value:
            decisions[i] = Decision(name=name, value=value, basis=text("sk01.tile.pinned", name=name, value=value,
                                                                       default=decisions[i].value),
                                    source="opdesign new --candidate / --tiles (cost-model candidate)")
    q_tile, kv_tile = decisions[0].value, decisions[1].value
    cube = choose_cube_tiles(spec, form, q_tile, kv_tile, sk01, qk_tile=pins.qk_tile, pv_tile=pins.pv_tile)
    if pins.cube_tiles is not None:  # a ranked row's TileShapes as they are (same axes, same operand dtypes)
        cube = {stage: t.model_copy(update={ax: tuple(pins.cube_tiles[stage][ax]) for ax in ("m", "k", "n")})
                for stage, t in cube.items()}
    if pins.vec_tile is not None:
        vec = vec_tiles(spec, q_tile, kv_tile, *pins.vec_tile)
        ub = ub_budget(device, q_tile=q_tile, head_dim=spec.shape.head_dim, resident_state=form == "baseline",
                       cube=cube, vec=vec)
        nbuf = next((r.value for r in sk01.config if r.key == "pass_options.cube_nbuffer_setting" and not r.when),
                    {-1: 1})
        l1 = l1_budget(device, cube, nbuf.get(-1, 1))
        l0 = [b for t in cube.values() for b in l0_budgets(device, t)]
    else:
        cube, vec, ub, l1, l0 = _budgets(spec, form, q_tile, kv_tile, sk01, device, cube)
    return q_tile, kv_tile, decisions, cube, vec, ub, l1, l0


def estimate_sk01(spec: Spec, golden_module_count: tuple[int, str] | None = None, pins: TilePins | None = None,
                  **overrides) -> Plan:
    """Plan a SPEC with the SK-01 online flash attention skeleton.

    ``overrides`` are extra :class:`Plan` fields set by a caller that falls back
    to SK-01 (e.g. ``fallback_from``, ``skeleton_checks`` from SK-02). ``pins`` replaces the
    form's tiles by a ranked candidate's or hand-pinned ones (the form stays the SPEC's);
    the caller checks the pinned tiles against the hard rules (``opdesign.workflows.new``).

    The performance form is taken when its four conditions hold and its tiles fit the device;
    when they do not fit, the plan goes back to the safe baseline (SK-01 card: breaking an
    invariant sends the design back to the baseline) and ``form_reason`` names the overflowing
    budgets and the tiles.

    Args:
        spec: a validated SPEC.
        golden_module_count: ``(module_count, reason)`` from the golden estimator, if any.

    Raises:
        SpecError: the SPEC asks for a variant this version does not plan, or no
            legal tiling exists within the device's buffers.
    """
    check_supported(spec, SUPPORTED, "SK-01")
    if spec.layout == "TND":
        check_supported(spec, TND_SUPPORTED, "SK-01 with layout TND")
        if spec.quant == "fp8":
            check_supported(spec, TND_FP8_SUPPORTED, "SK-01 with layout TND and quant fp8")
    cat = load_catalog()
    sk01 = cat.card("SK-01")
    device = cat.device(spec.device)
    s = spec.shape
    q_tile_perf = align_up(ceil(axis_hi(spec, "seq_q") / sk01.param("perf_q_tiles_per_head")), 16)
    checks = form_checks(spec, sk01, q_tile_perf)
    failed = [c for c in checks if not c.passed]
    form = "baseline" if failed else "performance"
    fitted = _fit(spec, form, sk01, device)
    if form == "performance" and _over(*fitted[5:]):
        form_reason = text("sk01.form.no_fit", q_tile=fitted[0], kv_tile=fitted[1], why=_overflow(_over(*fitted[5:])))
        form = "baseline"
        fitted = _fit(spec, form, sk01, device)
    elif form == "performance":
        form_reason = text("sk01.form.performance")
    else:
        form_reason = text("sk01.form.baseline", failed=[
            text("sk01.form.failed", id=c.id, condition=c.condition, observed=c.observed) for c in failed])
    if pins is not None:
        fitted = _pinned(spec, form, sk01, device, pins, fitted)
    q_tile, kv_tile, tile_decisions, cube, vec, ub, l1, l0 = fitted
    q_tiles, kv_tiles = ceil(s.seq_q / q_tile), ceil(s.seq_kv / kv_tile)
    variant = sk01_variant(spec)
    over = _over(ub, l1, l0)
    if over and pins is None:  # pinned tiles: the caller names the broken rule (opdesign.workflows.pin)
        raise SpecError(
            "shape: no legal tiling: " + "; ".join(f"{b.buffer} {b.total_bytes} B > {b.capacity_bytes} B" for b in over)
            + " (C-TILE-03)"
        )
    unroll = choose_unroll(spec, sk01, variant, kv_tile, form)
    if pins is not None and pins.unroll_factor is not None and pins.unroll_factor != unroll.unroll_factor:
        unroll = unroll.model_copy(update={"unroll_factor": pins.unroll_factor, "unroll_list": [pins.unroll_factor],
                                           "reason": text("sk01.unroll.pinned", factor=pins.unroll_factor,
                                                          default=unroll.unroll_factor),
                                           "remainder_rule": text("unroll.factor_1") if pins.unroll_factor == 1
                                           else text("sk01.unroll.remainder", factor=pins.unroll_factor)})
    kv_loop = "range" if form == "performance" else ("loop_unroll" if unroll.unroll_factor > 1 else "pypto.loop")
    exp = expansion(q_tile, kv_tile, s.head_dim, vec, kv_tiles if kv_loop == "range" else 1,
                    fp8=spec.quant == "fp8")

    root_count = s.batch * s.num_heads * q_tiles
    ranges = kv_block_ranges(spec.mask, s.seq_q, s.seq_kv, q_tile, kv_tile, s.window)
    per_q_block = [n for _, n in ranges]
    task_count = s.batch * s.num_heads * sum(per_q_block)
    task_basis = (text("sk01.task_count.dense", root_count=root_count, kv_tiles=kv_tiles)
                  if spec.mask in ("none", "tensor", "topk")
                  else text("sk01.task_count.banded", per_q_block=per_q_block))
    bal = varlen_balance(spec, q_tile, kv_tile, device.aic_cores)
    if spec.mask in ("causal", "sliding_window"):
        bal = balance(per_q_block, device.aic_cores, repeats=s.batch * s.num_heads)
        varlen = [a.name for a in spec.dynamic_axes if not a.uniform and a.name in ("seq_q", "seq_kv")]
        if spec.layout == "TND" or varlen:  # the banded split counts every batch at the full lengths
            bal = bal.model_copy(update={"assumption": text(
                "balance.full_length_tnd" if spec.layout == "TND" else "balance.full_length_varlen",
                seq_q=s.seq_q, seq_kv=s.seq_kv, axes=" / ".join(varlen))})
    work = q_tile * s.seq_kv * s.head_dim
    counts = [
        Decision(name="q_tiles", value=q_tiles, basis=text("sk01.q_tiles", seq_q=s.seq_q, q_tile=q_tile),
                 source="SK-01 loop nest"),
        Decision(name="kv_tiles", value=kv_tiles, basis=text("sk01.kv_tiles", seq_kv=s.seq_kv, kv_tile=kv_tile),
                 source="SK-01 loop nest"),
        Decision(name="root_count", value=root_count,
                 basis=text("sk01.root_count", batch=s.batch, num_heads=s.num_heads, q_tiles=q_tiles),
                 source="SK-01 structural table (root count)"),
        Decision(name="task_count", value=task_count, basis=text("sk01.task_count", basis=task_basis),
                 source="SK-01 structural table, FAI example 49 pipeline (KERNEL_TASK_NUM)"),
        Decision(name="work_per_root_macs", value=work,
                 basis=text("sk01.work_per_root", q_tile=q_tile, seq_kv=s.seq_kv, head_dim=s.head_dim),
                 source="SK-01 structural table (task granularity)"),
        Decision(name="cores_busy", value=min(root_count, device.aic_cores),
                 basis=text("sk01.cores_busy", aic_cores=device.aic_cores),
                 source=f"devices.yaml {device.ref('aic_cores')}"),
    ]
    if spec.kv_cache == "paged":
        bs = s.block_size
        counts.append(Decision(name="seq_kv_paged", value=align_up(s.seq_kv, bs),
                               basis=text("sk01.seq_kv_paged", seq_kv=s.seq_kv, block_size=bs),
                               source="FAI example 49 paged attention (kvSeqlen = RoundUp(kvSeqlen, blockSize)), "
                                      "AT-17"))
        counts.append(Decision(name="pages_per_kv_tile", value=kv_tile // bs,
                               basis=text("sk01.pages_per_kv_tile", kv_tile=kv_tile, block_size=bs),
                               source="AT-17 (block_num pages per tile)"))
    if spec.layout == "TND":  # the counts above take every batch at the typical per-batch length
        packed = (("t_q_max", "q", "seq_q", s.seq_q),) + (  # paged K / V rows come from the block table
            () if spec.kv_cache == "paged" else (("t_kv_max", "kv", "seq_kv", s.seq_kv),))
        counts += [Decision(name=count, value=s.batch * length, basis=text(
                       "sk01.packed_rows", axis=axis, batch=s.batch, length=length, tensor=batch_lengths(spec)[name]),
                       source="layout TND (packed rows, cumulative actual_seq_q / actual_seq_kv)")
                   for count, axis, name, length in packed]
    if spec.mask in ("causal", "sliding_window"):
        chain, chain_basis = max(per_q_block, default=0), text("sched.chain.banded", mask=spec.mask)
    elif bal is not None:  # varlen: the longest modelled batch walks all its KV tiles
        chain, chain_basis = kv_tiles, text("sched.chain.varlen", kv_tiles=kv_tiles)
    else:
        chain, chain_basis = kv_tiles, text("sched.chain.kv_tiles", kv_tiles=kv_tiles)
    # varlen: the steps at the modelled per-batch lengths (the balance's weights), else the plan's task_count
    sched = schedule(device.aic_cores, root_count, bal.total_valid_blocks if bal is not None else task_count,
                     chain, chain_basis)
    counts += schedule_counts(sched, device.ref("aic_cores"))
    config, entries = config_entries(spec, sk01)
    primary, outputs = io_tensors(spec)
    modules = [module(spec, primary, outputs[0])]
    if golden_module_count is not None:
        module_count, module_reason = golden_module_count
    else:
        module_count = 1
        module_reason = text("sk01.module.no_golden")
    rtol, atol = fp8_tolerance(*spec.tolerance) if spec.quant == "fp8" else spec.tolerance
    plan = Plan(
        op_name=spec.op_name, device=spec.device, dtype=spec.dtype, layout=spec.layout, mask=spec.mask,
        kv_cache=spec.kv_cache, quant=spec.quant, direction=spec.direction,
        head_dim=s.head_dim, num_heads=s.num_heads, num_kv_heads=s.num_kv_heads,
        group_size=s.num_heads // s.num_kv_heads, seq_q=s.seq_q, seq_kv=s.seq_kv, batch=s.batch,
        skeleton=Choice(id="SK-01", title=sk01.title,
                        reason=text("sk01.skeleton")),
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
        risks=_waste(spec, device, q_tile, q_tiles, root_count) + _risks(spec, ub, exp, q_tile, kv_tile, form)
        + ([text("sk01.risk.varlen_order")] if bal is not None and bal.method == "lpt" else []),
        cv_handover=text("flow.ub_to_l1" if device.ub_to_l1 else "flow.via_gm", device=device.name),
        hardware=hardware(spec, device, rtol, atol), schedule=sched,
        variant=variant, balance=bal, batch_lengths=batch_lengths(spec), block_size=s.block_size,
        page_table=page_table(s.block_size), quick_factor=_quick_factor(form, s.seq_q, s.seq_kv, q_tile, kv_tile),
        window=s.window, topk=s.topk,
        pins=pins, **overrides,
    )
    return with_checks(plan, COMMON_ROWS + (Row("C-LOOP-05", "C-LOOP-05", single_unroll),
                                            Row("SK-01-R6", "SK-01-R6", fp32_accumulators)))


def _quick_factor(form: str, seq_q: int, seq_kv: int, q_tile: int, kv_tile: int) -> int:
    """The largest f in 8, 4, 2 that divides the performance form's lengths and tiles for ``--quick`` and
    keeps Q_TILE a multiple of 16, KV_TILE of 128 and the same Q_TILES x KV_TILES loop; 1 when none does
    (and in the baseline form, whose lengths are dynamic)."""
    if form != "performance":
        return 1
    for f in (8, 4, 2):
        qt, kt = q_tile // f, kv_tile // f
        if (q_tile % (16 * f) == 0 and kv_tile % (128 * f) == 0 and ceil(ceil(seq_q / f) / qt) == ceil(seq_q / q_tile)
                and ceil(ceil(seq_kv / f) / kt) == ceil(seq_kv / kv_tile)):
            return f
    return 1


def _atoms(spec: Spec, cat) -> list[Choice]:
    picks = [("AT-12", text("sk01.atom.at12")), ("AT-01", text("sk01.atom.at01")), ("AT-13", text("sk01.atom.at13")),
             ("AT-20", text("sk01.atom.at20")), ("AT-21", text("sk01.atom.at21"))]
    if spec.kv_cache == "paged":
        picks.append(("AT-17", text("sk01.atom.at17", block_size=spec.shape.block_size)))
    if spec.quant == "fp8":
        picks += [("AT-08", text("sk01.atom.at08")), ("AT-06", text("sk01.atom.at06"))]
    return [Choice(id=i, title=cat.card(i).title, reason=r) for i, r in picks]


def _waste(spec: Spec, device, q_tile: int, q_tiles: int, root_count: int) -> list[Phrase]:
    """What the plan wastes at the typical shape, first in Risks: padded Q rows and per-head KV re-reads
    of a short query (decode), and cube cores left idle by too few roots (with the split that fills them)."""
    s = spec.shape
    out = []
    group = s.num_heads // s.num_kv_heads
    if q_tiles == 1 and 2 * s.seq_q <= q_tile:  # half or more of the one Q tile is padding
        v_bytes = 1 if spec.quant == "fp8" else DTYPE_BYTES[spec.dtype]
        kv_bytes = s.seq_kv * s.head_dim * (DTYPE_BYTES[spec.dtype] + v_bytes)
        fold = group * s.seq_q
        out.append(text("sk01.risk.decode_waste", seq_q=s.seq_q, q_tile=q_tile, padded=q_tile - s.seq_q,
                        pct=100 * (q_tile - s.seq_q) / q_tile, group=group, kv_bytes=kv_bytes,
                        reread=group * kv_bytes, fold_rows=fold, fold_tile=align_up(fold, cube_align(spec.dtype)))
                   if group > 1 else
                   text("sk01.risk.pad_rows", seq_q=s.seq_q, q_tile=q_tile, padded=q_tile - s.seq_q,
                        pct=100 * (q_tile - s.seq_q) / q_tile))
    cores = device.aic_cores
    if root_count < cores:
        heads = s.batch * s.num_heads
        per_head = ceil(cores / heads)
        q_fill = align_up(ceil(s.seq_q / per_head), cube_align(spec.dtype))
        roots_fill = heads * ceil(s.seq_q / q_fill)
        kv_split = ceil(cores / root_count)
        out.append(text("sk01.risk.idle_cores", roots=root_count, cores=cores, idle=cores - root_count,
                        pct=100 * (cores - root_count) / cores, device=device.name, q_tile=q_tile, q_fill=q_fill,
                        roots_fill=roots_fill, waves=ceil(roots_fill / cores), kv_split=kv_split,
                        tasks=root_count * kv_split)
                   if q_fill < q_tile and roots_fill >= cores else
                   text("sk01.risk.idle_cores_kv", roots=root_count, cores=cores, idle=cores - root_count,
                        pct=100 * (cores - root_count) / cores, device=device.name, kv_split=kv_split,
                        tasks=root_count * kv_split))
    return out


def _risks(spec: Spec, ub, exp, q_tile: int, kv_tile: int, form: str) -> list[Phrase]:
    s = spec.shape
    out = [text("risk.ub_margin", margin=ub.capacity_bytes - ub.total_bytes, capacity=ub.capacity_bytes,
                pct=100 * ub.total_bytes / ub.capacity_bytes)]
    if s.seq_q % q_tile or s.seq_kv % kv_tile:
        out.append(text("risk.tails", seq_q=s.seq_q, q_tile=q_tile, q_rem=s.seq_q % q_tile, seq_kv=s.seq_kv,
                        kv_tile=kv_tile, kv_rem=s.seq_kv % kv_tile))
    if spec.mask in ("causal", "sliding_window"):
        out.append(text("sk01.risk.uneven", mask=spec.mask))
    if spec.mask == "topk":
        out.append(text("sk01.risk.topk"))
    if spec.mask in ("causal", "sliding_window", "topk"):
        out.append(text("sk01.risk.mask_helpers"))
    if form == "performance":
        out.append(text("sk01.risk.perf_invariants"))
    out.append(text("risk.expansion", body_total=exp.body_total, max_per_op=exp.max_per_op, limit=exp.limit)
               if exp.within_limit else
               text("risk.expansion_over", body_total=exp.body_total, ratio=exp.body_ratio, limit=exp.limit,
                    copies=exp.traced_copies, max_per_op=exp.max_per_op))
    return out
