"""EFA network-interface layout for a launch template, computed from the instance catalog (pure).

AWS's current layout (EC2 user guide, "Maximize network bandwidth on accelerated instance types",
efa-acc-inst-types; docs/reference.md "EFA: getting the whole fabric"):

- card 0 / device 0: the primary ENA `interface`, the only interface that takes a VPC IP address;
- card 0 / device 1: `efa-only`, when card 0 is EFA-capable;
- every other EFA-capable card: `efa-only` at device 0.

So a p5.48xlarge gets 32 EFA devices and one IP, not 33 IPs. Cards that are not EFA-capable (e.g.
card 0 of p6-b300.48xlarge, an ENA-only card) get nothing from this layout. Where the catalog says a
card can carry `efa` but not `efa-only` (older EFA generations) the layout falls back to `efa`, which
also takes an IP address; no type in the current catalog needs that fallback.

Everything here reads facts from `InstanceType`; nothing is guessed from the type's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infra.catalog.aws import InstanceType, NetworkCard, instance_type, known_instance_types

InterfaceType = Literal["interface", "efa", "efa-only"]

# How many alternatives an EfaUnsupported message lists.
_SUGGESTIONS = 5


class EfaUnsupported(ValueError):
    """The instance type has no EFA, so it cannot join an EFA training cluster."""

    def __init__(self, itype: InstanceType):
        self.instance_type = itype.name
        self.suggestions = efa_alternatives(itype)
        hint = f", e.g. {', '.join(self.suggestions)}" if self.suggestions else ""
        super().__init__(
            f"{itype.name} does not support EFA (Elastic Fabric Adapter), which multi-node training "
            f"needs on every network card; choose an EFA-capable instance type{hint}"
        )


@dataclass(frozen=True)
class Interface:
    """One network interface of the launch template."""

    network_card_index: int
    device_index: int
    interface_type: InterfaceType
    carries_ip: bool  # takes a private IP address from the subnet

    @property
    def is_efa(self) -> bool:
        return self.interface_type in ("efa", "efa-only")


def efa_layout(itype: InstanceType) -> tuple[Interface, ...]:
    """The launch-template interfaces that attach EFA to every EFA-capable card of `itype`
    (up to its EFA limit) with exactly one IP-bearing interface, ordered by (card, device)."""
    if not itype.efa_supported or not itype.efa_cards or itype.max_efa_interfaces < 1:
        raise EfaUnsupported(itype)
    if not itype.network_cards or itype.network_cards[0].index != 0:
        raise ValueError(f"{itype.name}: catalog lists no network card 0; refresh the catalog")

    # When the type allows fewer EFA interfaces than it has EFA-capable cards, card order decides.
    wanted = min(itype.max_efa_interfaces, len(itype.efa_cards))
    efa_cards = {card.index for card in itype.efa_cards[:wanted]}
    card0 = itype.network_cards[0]

    layout = [Interface(0, 0, "interface", carries_ip=True)]
    if card0.index in efa_cards:
        layout.append(_efa_interface(card0, device_index=1))
    for card in itype.network_cards[1:]:
        if card.index in efa_cards:
            layout.append(_efa_interface(card, device_index=0))

    result = tuple(layout)
    assert efa_device_count(result) == wanted, (itype.name, result)
    return result


def efa_device_count(layout: tuple[Interface, ...]) -> int:
    """EFA devices a node exposes with this layout: what a pod requests as `vpc.amazonaws.com/efa`."""
    return sum(1 for i in layout if i.is_efa)


def attached_bandwidth_gbps(itype: InstanceType, layout: tuple[Interface, ...]) -> float:
    """Baseline bandwidth of the cards that carry an EFA interface in `layout`."""
    cards = {i.network_card_index for i in layout if i.is_efa}
    return sum(c.baseline_gbps for c in itype.network_cards if c.index in cards)


def bandwidth_fraction(itype: InstanceType, layout: tuple[Interface, ...]) -> float:
    """Share of the node's baseline bandwidth that the fabric reaches (1.0 = every card)."""
    total = itype.total_bandwidth_gbps
    return attached_bandwidth_gbps(itype, layout) / total if total else 0.0


def efa_alternatives(itype: InstanceType) -> tuple[str, ...]:
    """EFA-capable catalog types with the same accelerator model (or, failing that, kind), smallest
    first: what to suggest instead of a type without EFA."""
    others = [instance_type(n) for n in known_instance_types()]
    efa = [t for t in others if t.efa_supported and t.efa_cards]
    same = [t for t in efa if itype.accelerator_model and t.accelerator_model == itype.accelerator_model]
    if not same:
        same = [t for t in efa if t.accelerator_kind == itype.accelerator_kind]
    same.sort(key=lambda t: (t.vcpus, t.name))
    return tuple(t.name for t in same[:_SUGGESTIONS])


def _efa_interface(card: NetworkCard, device_index: int) -> Interface:
    if "efa-only" in card.interface_types:
        return Interface(card.index, device_index, "efa-only", carries_ip=False)
    return Interface(card.index, device_index, "efa", carries_ip=True)
