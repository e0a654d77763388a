"""The hardware a plan assumes: the SKU, the platform file its figures come from, and how it relates to the
one platform the pinned PyPTO release compiles and simulates on (``devices.yaml`` ``sim_platform``).

Every sentence is a phrase with its figures (rendering computes nothing); the statement of what the release
cannot verify is present only when it holds (a device of another NpuArch than SIM's, or FP8 quantisation).
"""

from __future__ import annotations

from pydantic import Field

from opdesign.catalog import DeviceProfile, SimPlatform, load_catalog
from opdesign.plan.core import Phrase, _Model, text
from opdesign.spec import Spec

#: Figures compared between the profile and SIM's platform: (profile attribute, SimPlatform attribute).
_COMPARED = (("aic_cores", "aic_cores"), ("aiv_cores", "aiv_cores"), ("ub_bytes", "ub_bytes"),
             ("l1_bytes", "l1_bytes"), ("l0c_bytes", "l0c_bytes"))


class Hardware(_Model):
    """The SKU the design assumes and what the release's SIM checks of it."""

    device: str = Field(description="the SPEC's device (a family or family/SKU)")
    family: str = Field(description="profile family of devices.yaml (a2, a3, a5)")
    sku: str = Field(description="the SKU the figures describe, e.g. 910B1")
    soc_version: str = Field(description="SoC_version of the platform file, e.g. Ascend910B1")
    npu_arch: str = Field(description="NpuArch of the SKU as PyPTO names it, e.g. DAV_2201")
    platform: str = Field(description="the platform file that describes the SKU")
    aic_cores: int = Field(description="cube cores (AIC) of the SKU")
    aiv_cores: int = Field(description="vector cores (AIV) of the SKU")
    ub_bytes: int = Field(description="UB per vector core (bytes)")
    sources: dict[str, str] = Field(description="figure -> file and key it comes from")
    sim_differs: list[str] = Field(description="figures where the SKU and SIM's platform differ (empty: none)")
    statement: Phrase = Field(description="the SKU and its figures, with the file they come from")
    sim: Phrase = Field(description="the platform SIM runs, and which figures the plan uses where they differ")
    unverified: Phrase | None = Field(None, description="what the release cannot verify for this design (a device "
                                      "of another NpuArch, or FP8): present only when that holds")


def hardware(spec: Spec, device: DeviceProfile, rtol: float, atol: float) -> Hardware:
    """The :class:`Hardware` of a plan on ``device`` (the SPEC's profile); ``rtol`` / ``atol`` are the
    self-check tolerance the scaffold's rounding model is checked with."""
    sim: SimPlatform = load_catalog().sim_platform
    diffs = [(name, getattr(device, name), getattr(sim, other)) for name, other in _COMPARED
             if getattr(device, name) != getattr(sim, other)]
    default = device.name == device.family
    statement = text("hw.sku", device=spec.device, soc=device.soc_version, arch=device.npu_arch, family=device.family,
                     sku=device.sku,
                     default="the family's default SKU" if default else "a SKU named by the SPEC",
                     aic=device.aic_cores, aiv=device.aiv_cores, ub=device.ub_bytes, l1=device.l1_bytes,
                     l0c=device.l0c_bytes, platform=device.platform,
                     shipped=text("hw.shipped", release=sim.release) if device.soc_version == sim.soc_version
                     else text("hw.not_shipped", release=sim.release))
    common = dict(release=sim.release, sim_soc=sim.soc_version, sim_arch=sim.npu_arch, sim_aic=sim.aic_cores,
                  sim_aiv=sim.aiv_cores, sim_ub=sim.ub_bytes)
    if diffs:
        sim_phrase = text("hw.sim_differs", diffs=[text("hw.diff", name=n, planned=p, sim=s) for n, p, s in diffs],
                          **common)
    else:
        sim_phrase = text("hw.sim_same", **common)
    notes = []
    if device.npu_arch != sim.npu_arch:
        notes.append(text("hw.other_arch", release=sim.release, sim_arch=sim.npu_arch, arch=device.npu_arch,
                          sim_soc=sim.soc_version))
    if spec.quant == "fp8":
        notes.append(text("hw.fp8", release=sim.release, sim_arch=sim.npu_arch, rtol=rtol, atol=atol))
    unverified = text("hw.unverified", release=sim.release, notes=notes) if notes else None
    return Hardware(device=spec.device, family=device.family, sku=device.sku, soc_version=device.soc_version,
                    npu_arch=device.npu_arch, platform=device.platform, aic_cores=device.aic_cores,
                    aiv_cores=device.aiv_cores, ub_bytes=device.ub_bytes,
                    sources={k: device.sources[k] for k in ("aic_cores", "aiv_per_aic", "ub_bytes")},
                    sim_differs=[n for n, _, _ in diffs], statement=statement, sim=sim_phrase,
                    unverified=unverified)
