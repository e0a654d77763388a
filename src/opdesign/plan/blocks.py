"""KV blocks per Q tile and the multi-core split of them, shared by the skeletons and the cost model.

Sources: AT-01 mask kinds (bottom-right aligned causal / sliding window), the
FlashAttention-Infer load balance (domain.md §7: contiguous greedy split of q
blocks over the cube cores).
"""

from __future__ import annotations

from bisect import bisect_left
from heapq import heapify, heapreplace
from math import ceil

from opdesign.plan.models import Balance, CoreLoad, text


def kv_block_ranges(mask: str, seq_q: int, seq_kv: int, q_tile: int, kv_tile: int,
                    window: int | None = None) -> list[tuple[int, int]]:
    """``(first_kv_block, block_count)`` per q block: the KV tiles a Q tile must visit.

    Row ``r`` of the query sees column ``c`` when (bottom-right aligned, AT-01
    mask kinds): ``causal``: ``c <= r + seq_kv - seq_q``; ``sliding_window``:
    additionally ``c > r + seq_kv - seq_q - window``; ``none``, ``tensor`` and
    ``topk`` (mask values and picks unknown at design time): every column.
    """
    offset = seq_kv - seq_q
    kv_tiles = ceil(seq_kv / kv_tile)
    if mask not in ("causal", "sliding_window"):
        return [(0, kv_tiles)] * ceil(seq_q / q_tile)  # every q block visits every KV tile
    out = []
    for i in range(ceil(seq_q / q_tile)):
        first_row, last_row = i * q_tile, min((i + 1) * q_tile, seq_q) - 1
        hi = min(seq_kv, last_row + offset + 1)  # exclusive column bound
        lo = 0 if mask == "causal" else max(0, first_row + offset - window + 1)
        if hi <= lo:
            out.append((0, 0))
            continue
        first = lo // kv_tile
        out.append((first, ceil(hi / kv_tile) - first))
    return out


def greedy_allocation(weights: list[int], cores: int, repeats: int = 1) -> list[list[tuple[int, int]]]:
    """Contiguous greedy split of q blocks over ``cores`` (FAI load balance), per core.

    The blocks are ``weights`` repeated ``repeats`` times (one copy per
    (batch, head), in order). Block ``j`` goes to core
    ``floor((prefix_j + w_j / 2) / target)`` with ``target = total / cores``: blocks
    stay in (batch, head, q block) order and a block heavier than the target is
    never split. Exact integer arithmetic; the repeats are counted per core in
    closed form, so the cost is ``O(cores x len(weights))``, not per block.
    Returns, per core, ``(position in weights, number of copies)`` pairs.
    """
    alloc: list[list[tuple[int, int]]] = [[] for _ in range(cores)]
    period = sum(weights)
    if period == 0 or repeats == 0:
        return alloc
    denom = 2 * repeats * period  # block j sits on core floor((2 prefix_j + w_j) * cores / denom)
    prefix = 0
    for pos, w in enumerate(weights):
        a = 2 * prefix + w  # position of this block in the first copy, doubled
        prefix += w
        start = 0  # first repeat index not yet placed
        for core in range(cores):
            if core == cores - 1:
                end = repeats
            else:  # repeats r with (2 r period + a) * cores < (core + 1) * denom
                bound = (core + 1) * denom - a * cores
                end = min(repeats, max(0, -(-bound // (2 * period * cores))))
            if end > start:
                alloc[core].append((pos, end - start))
                start = end
            if start == repeats:
                break
    return alloc


class _Split:
    """Closed form of the contiguous greedy split of ``weights`` repeated ``repeats`` times.

    Block ``j`` of copy ``r`` sits at doubled midpoint ``M = 2 (r P + prefix_j) + w_j`` (``P`` the
    pattern's total); it goes to core ``min(cores - 1, floor(M cores / (2 R P)))``. ``M`` never
    decreases along the blocks, so the blocks of cores ``0..c`` are a prefix of the sequence whose
    length (:meth:`ends`) is one division and one bisection per core: ``O(len(weights))`` once,
    then ``O(cores log len(weights))`` per core count (:func:`balance` tries every count).
    """

    def __init__(self, weights: list[int], repeats: int) -> None:
        self.n, self.repeats = len(weights), repeats
        self.prefix = [0] * (self.n + 1)  # prefix[i] = sum(weights[:i])
        self.mid = [0] * self.n  # doubled midpoint of each block in the first copy
        acc = 0
        for j, w in enumerate(weights):
            self.mid[j] = 2 * acc + w
            acc += w
            self.prefix[j + 1] = acc
        self.period = acc

    def _weight_before(self, k: int) -> int:
        """Total weight of the first ``k`` blocks of the repeated sequence."""
        copies, rest = divmod(k, self.n)
        return copies * self.period + self.prefix[rest]

    def ends(self, cores: int) -> list[int]:
        """Blocks on cores ``0..c`` for each core ``c`` (a running count over the repeated sequence)."""
        n, reps, period = self.n, self.repeats, self.period
        last_mid = self.mid[-1]
        out = []
        for core in range(cores - 1):
            bound = (core + 1) * 2 * reps * period  # block on a core <= this one iff M * cores < bound
            full = min(reps, max(0, -(-(bound - last_mid * cores) // (2 * period * cores))))
            part = 0 if full == reps else bisect_left(self.mid, -(-(bound - 2 * full * period * cores) // cores))
            out.append(full * n + part)
        out.append(reps * n)
        return out

    def balance(self, cores: int) -> tuple[list[int], list[int]]:
        """(core weights, q blocks per core)."""
        if cores <= 0:
            return [], []
        if self.period == 0 or self.repeats == 0:
            return [0] * cores, [0] * cores
        loads, counts, start = [], [], 0
        for end in self.ends(cores):
            loads.append(self._weight_before(end) - self._weight_before(start))
            counts.append(end - start)
            start = end
        return loads, counts


def greedy_balance(weights: list[int], cores: int, repeats: int = 1) -> tuple[list[int], list[int]]:
    """(core weights, q blocks per core) of :func:`greedy_allocation`, from the closed form (:class:`_Split`)."""
    return _Split(weights, repeats).balance(cores)


def balance(weights: list[int], cores: int, repeats: int = 1) -> Balance:
    """Per-core weights, ``imbalance = max / mean`` and whether fewer cores would do as well.

    ``weights`` are the valid KV blocks per q block of one (batch, head), repeated
    ``repeats`` times (see :func:`greedy_balance`).
    """
    split = _Split(weights, repeats)
    loads, counts = split.balance(cores)
    total = sum(weights) * repeats
    mean = total / cores if cores else 0.0
    worst = max(loads) if loads else 0
    fewer = None
    for c in range(1, cores):
        if max(split.balance(c)[0]) <= worst:
            fewer = c
            break
    imbalance = worst / mean if mean else 1.0
    note = text("balance.fewer" if fewer else "balance.all", cores=cores, target=total / cores, imbalance=imbalance,
                fewer=fewer, worst=worst)
    return Balance(cores=cores, total_valid_blocks=total, target=round(total / cores, 3) if cores else 0.0,
                   per_core=[CoreLoad(core=i, q_blocks=n, weight=w)
                             for i, (w, n) in enumerate(zip(loads, counts, strict=True))],
                   imbalance=round(imbalance, 4), fewer_cores=fewer, note=note)


def typical_lengths(lo: int, full: int, batch: int) -> list[int]:
    """Modelled valid lengths of a varlen axis, per batch, for a typical shape of length ``full``.

    The scaffold and the kernel's test case draw the lengths in ``[lo, full]`` and keep one
    batch at (nearly) ``full``; the design models them as evenly spread over that range, longest
    first: batch ``b`` holds ``lo + ceil((full - lo) x (batch - b) / batch)``.
    """
    lo = min(max(1, lo), full)
    return [lo + -(-(full - lo) * (batch - b) // batch) for b in range(batch)]


def _lpt_loads(weights: list[int], cores: int) -> tuple[list[int], list[int]]:
    """(core weights, tasks per core): heaviest task first, each onto the least-loaded core (lowest index on ties)."""
    heap = [(0, c) for c in range(cores)]
    heapify(heap)
    loads, counts = [0] * cores, [0] * cores
    for w in sorted(weights, reverse=True):
        load, core = heap[0]
        loads[core], counts[core] = load + w, counts[core] + 1
        heapreplace(heap, (load + w, core))
    return loads, counts


def lpt_balance(weights: list[int], cores: int, lengths: list[int]) -> Balance:
    """Length-aware split of whole tasks over ``cores``: longest processing time first (LPT).

    ``weights`` are the KV tiles of every (batch, head, q block) task at the modelled per-batch
    ``lengths``. A task is never split (domain.md §7: a q block heavier than the target cannot be
    split), so there is no combine stage; LPT keeps the busiest core within 4/3 of the best
    whole-task split (Graham's bound). The note compares the contiguous split in (batch, head) order.
    """
    loads, counts = _lpt_loads(weights, cores) if cores > 0 else ([], [])
    total = sum(weights)
    mean = total / cores if cores else 0.0
    worst = max(loads) if loads else 0
    fewer = next((c for c in range(1, cores) if total and max(_lpt_loads(weights, c)[0]) <= worst), None)
    imbalance = worst / mean if mean else 1.0
    contiguous = max(_Split(weights, 1).balance(cores)[0]) / mean if mean else 1.0
    note = text("balance.lpt_fewer" if fewer else "balance.lpt", cores=cores, tasks=len(weights), lengths=lengths,
                target=total / cores if cores else 0.0, imbalance=imbalance, contiguous=contiguous,
                fewer=fewer, worst=worst)
    return Balance(cores=cores, total_valid_blocks=total, target=round(total / cores, 3) if cores else 0.0,
                   per_core=[CoreLoad(core=i, q_blocks=n, weight=w)
                             for i, (w, n) in enumerate(zip(loads, counts, strict=True))],
                   imbalance=round(imbalance, 4), fewer_cores=fewer, note=note, method="lpt")
