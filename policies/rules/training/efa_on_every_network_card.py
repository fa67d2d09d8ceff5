"""EFA on every EFA-capable network card of the instance type: EFA on card 0 only gives a p4d 100 of
its 400 Gbps (docs/reference.md, "EFA: getting the whole fabric"). The wanted layout is
infra.training.aws.efa.efa_layout."""

from __future__ import annotations

from infra.catalog.aws import instance_type
from infra.training.aws.efa import EfaUnsupported, Interface, attached_bandwidth_gbps, efa_layout
from policies.model import Resource, ResourceRule
from policies.readers.aws import LAUNCH_TEMPLATE, interfaces, is_efa_interface, number, role_of, span, uses_efa

NAME = "efa-on-every-network-card"


def check(resource: Resource) -> list[str]:
    if role_of(resource) != "training" and not uses_efa(resource):
        return []
    name = resource.get("instanceType")
    if not isinstance(name, str):
        return []
    try:
        itype = instance_type(name)
        layout = efa_layout(itype)
    except LookupError:
        return []  # an unknown type is the role rules' finding
    except EfaUnsupported as error:
        return [f"instanceType: {error}"]
    declared = [
        Interface(
            int(number(ni.get("networkCardIndex") or 0)),
            int(number(ni.get("deviceIndex") or 0)),
            ni["interfaceType"],
            ni["interfaceType"] != "efa-only",
        )
        for ni in interfaces(resource)
        if is_efa_interface(ni)
    ]
    attached = {i.network_card_index for i in declared}
    missing = [i for i in layout if i.is_efa and i.network_card_index not in attached]
    if not missing:
        return []
    wanted = len([i for i in layout if i.is_efa])
    where = f"network card{'s' if len(attached) > 1 else ''} {span(attached)}" if attached else "no network card"
    only = " only" if len(attached) == 1 else ""
    gbps = attached_bandwidth_gbps(itype, tuple(declared))
    adds = []
    if any(i.network_card_index == 0 for i in missing):
        adds.append("networkCardIndex 0 (deviceIndex 1)")
    others = [i.network_card_index for i in missing if i.network_card_index != 0]
    if others:
        adds.append(f"networkCardIndex {span(others)} (deviceIndex 0)")
    return [
        f"{name} has EFA on {where}{only}, {len(attached & {i.network_card_index for i in layout if i.is_efa})} "
        f"of its {wanted} EFA cards ({gbps:g} of {itype.total_bandwidth_gbps:g} Gbps); add interfaceType "
        f"'efa-only' at {' and '.join(adds)}, as infra.training.aws.efa.efa_layout lays out"
    ]


RULE = ResourceRule(
    NAME,
    "Training launch templates attach EFA to every EFA-capable network card.",
    "mandatory",
    (LAUNCH_TEMPLATE,),
    check,
)
