"""How the framework runs a plan's roots on the cube cores: waves and occupancy, not a static per-core table.

PyPTO places tasks dynamically: its AICPU schedulers put every ready sub-graph in a shared queue and hand it
to a free core at run time (runtime_options ``device_sched_mode``, PyPTO docs ``docs/api/config/pypto-jit.md``
at r0.2.0), and SIM spreads one root's tasks over several cores. So a design can state how many roots there
are per core (waves), how full the last wave is, and how long the longest chain of dependent steps is; which
core runs which root is the scheduler's choice, not the design's. Every figure is computed here; the
templates print them.
"""

from __future__ import annotations

from math import ceil

from pydantic import Field

from opdesign.plan.core import Phrase, Text, _Model, text

#: The document the scheduler statement follows.
SCHEDULER_SOURCE = ("PyPTO docs docs/api/config/pypto-jit.md (r0.2.0), runtime_options device_sched_mode: the AICPU "
                    "scheduling threads issue ready sub-graphs to the AI cores at run time; the mode picks the order")


class Schedule(_Model):
    """Waves and occupancy of a plan's roots on the device's cube cores under dynamic placement."""

    scheduler: str = Field(description="who places tasks on cores, and the document that says so")
    cores: int = Field(description="cube cores (AIC) of the device profile")
    roots: int = Field(description="independent roots (root_count)")
    steps: int = Field(description="dependent C1-V1-C2(-V2) steps over all roots (task_count)")
    waves: int = Field(description="ceildiv(roots, cores): rounds if every root took one core")
    full_waves: int = Field(description="roots // cores")
    tail_roots: int = Field(description="roots % cores: roots of the last, partial wave (0: no tail wave)")
    occupancy: float = Field(description="roots / (waves x cores): share of core slots the waves fill")
    longest_chain: int = Field(description="steps of the longest root (its steps depend on each other)")
    mean_chain: float = Field(description="steps / roots")
    step_rounds: int = Field(description="max(ceildiv(steps, cores), longest_chain): no schedule finishes in fewer "
                                         "step rounds")
    chain_basis: Text = Field(description="where the longest chain comes from")
    note: Phrase = Field(description="the schedule in sentences")


def schedule(cores: int, roots: int, steps: int, longest_chain: int, chain_basis: Text) -> Schedule:
    """The :class:`Schedule` of ``roots`` roots with ``steps`` steps in all on ``cores`` cube cores."""
    waves = ceil(roots / cores) if cores else 0
    full, tail = divmod(roots, cores) if cores else (0, 0)
    occupancy = roots / (waves * cores) if waves else 0.0
    mean = steps / roots if roots else 0.0
    rounds = max(ceil(steps / cores) if cores else 0, longest_chain)
    tail_phrase = (text("sched.tail", tail=tail, cores=cores, idle=cores - tail) if tail and full else
                   text("sched.single_partial", roots=roots, cores=cores, idle=cores - roots) if tail else
                   text("sched.no_tail"))
    note = text("sched.note", roots=roots, cores=cores, waves=waves, full=full, tail=tail_phrase,
                occupancy=100 * occupancy, steps=steps, chain=longest_chain, chain_basis=chain_basis, mean=mean,
                rounds=rounds, steps_per_core=ceil(steps / cores) if cores else 0)
    return Schedule(scheduler=SCHEDULER_SOURCE, cores=cores, roots=roots, steps=steps, waves=waves, full_waves=full,
                    tail_roots=tail, occupancy=round(occupancy, 4), longest_chain=longest_chain,
                    mean_chain=round(mean, 3), step_rounds=rounds, chain_basis=chain_basis, note=note)

