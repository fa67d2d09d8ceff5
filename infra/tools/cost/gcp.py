"""GCP resources a stack declares: GKE's cluster management fee, node pools priced from the GCP machine
catalog (infra/catalog/data/gcp_machines.json, the system pool's general-purpose types included) and Cloud NAT
per VM it serves. Prices without a source are 'unknown'."""

from __future__ import annotations

from collections.abc import Callable

from infra.catalog.gcp import UnknownMachineType, general_purpose_type, machine_type
from infra.catalog.services import service_price
from infra.core.shapes import dict_at, list_at
from infra.providers import tokens
from infra.tools.cost.gcp_guard import GCP_GUARD_PRICERS
from infra.tools.cost.lines import hourly, line, usage
from infra.tools.cost.managed import Priced
from infra.tools.cost.model import Line
from infra.tools.cost.resources import Resources, whole
from infra.tools.preview_json import PolicyResource

CLUSTER = tokens.GCP_CONTAINER_CLUSTER
NODE_POOL = tokens.GCP_CONTAINER_NODE_POOL
ROUTER_NAT = tokens.GCP_COMPUTE_ROUTER_NAT
COMPUTE_INSTANCE = tokens.GCP_COMPUTE_INSTANCE
LUSTRE_INSTANCE = tokens.GCP_LUSTRE_INSTANCE


def gke_cluster(r: PolicyResource, res: Resources) -> Priced:
    return [hourly(r, res, "control plane", "gke.cluster", 1, "GKE cluster management fee")]


def pool_nodes(r: PolicyResource) -> tuple[int, int, str] | None:
    """(nodes at the pool's lower bound, at its upper bound, where they are) of a GKE node pool, or None."""
    scaling = dict_at(r.props, "autoscaling")
    zones = len(list_at(r.props, "nodeLocations"))
    if scaling and ("totalMinNodeCount" in scaling or "totalMaxNodeCount" in scaling):
        # Total bounds over the pool's zones: the counts are the pool's, whatever the zones.
        low, high = whole(scaling.get("totalMinNodeCount", 0)), whole(scaling.get("totalMaxNodeCount"))
        where = f" (in total over {zones} zones)" if zones else " (in total over the zones GKE chose)"
        per_pool = 1
    else:
        low = whole(scaling.get("minNodeCount")) if scaling else whole(r.props.get("nodeCount"))
        high = whole(scaling.get("maxNodeCount")) if scaling else low
        per_zone = f"{low}" if low == high else f"{low}-{high}"
        where = f" ({per_zone} per zone in {zones} zones)" if zones else " (per zone; zones not declared: at least one)"
        per_pool = zones or 1
    if low is None or high is None:
        return None
    return low * per_pool, high * per_pool, where


def node_pool(r: PolicyResource, res: Resources) -> Priced:
    name = str(dict_at(r.props, "nodeConfig").get("machineType") or "")
    bounds = pool_nodes(r)
    if bounds is None or not name:
        return [line(r, res, "compute", basis="unknown", what="NodePool: unknown (machine type or bounds not known)")]
    return [_machines(r, res, name, *bounds)]


def _machines(r: PolicyResource, res: Resources, name: str, low: int, high: int, where: str = "") -> Line:
    """`low`-`high` VMs of machine type `name`: its catalog price (an accelerator type's, or a general-purpose
    type's), or unknown with the reason and the sourced host part."""
    nodes = f"{low}" if low == high else f"{low}-{high}"
    try:
        mtype = machine_type(name)
    except UnknownMachineType:
        host = general_purpose_type(name)
        if host is None:
            return _unknown_machines(
                r,
                res,
                high,
                f"{nodes} x {name or 'machine'}: unknown ({name} is not in the GCP machine catalog)" + where,
            )
        price = host.price
    else:
        if mtype.price is None:
            host_part = mtype.host_price_excluding_gpu
            part = f"; its vCPU and memory alone are ${host_part:.3f}/h" if host_part is not None else ""
            gpus = f"{mtype.accelerator.count} x {mtype.accelerator.model}"
            return _unknown_machines(
                r, res, high, f"{nodes} x {name} ({gpus}): unknown (no sourced price for its GPUs{part}){where}"
            )
        price = mtype.price
    return line(
        r,
        res,
        "compute",
        basis="hourly",
        what=f"{nodes} x {name} at ${price:.3f}/h{where}",
        low=low * price,
        high=high * price,
        nodes=high,
        node_usd=price,
    )


def _unknown_machines(r: PolicyResource, res: Resources, nodes: int, what: str) -> Line:
    return line(r, res, "compute", basis="unknown", nodes=nodes, what=what)


NAT_VM_CAP = 32  # cloud.google.com/nat/pricing: the per-VM gateway rate is capped at 32 VM instances


def router_nat(r: PolicyResource, res: Resources) -> Priced:
    """A Public NAT gateway: per VM using it (capped at 32), one auto-allocated external address (AUTO_ONLY
    allocates more only past its ports, ~1,000 VMs at the default 64 ports each), and per GiB processed."""
    per_vm, capped = service_price("gcp.cloudNat.vm"), service_price("gcp.cloudNat.gateway")
    address = service_price("gcp.cloudNat.address")
    keys = (per_vm.key, capped.key, address.key, "gcp.cloudNat.data")
    if per_vm.usd is None or capped.usd is None or address.usd is None:  # said, never estimated
        return [line(r, res, "network", basis="unknown", price_keys=keys, what="Cloud NAT: no sourced price")]
    vm_usd, capped_usd, address_usd = per_vm.usd, capped.usd, address.usd
    low, high = _vms(res)

    def gateway(vms: int) -> float:
        return capped_usd if vms > NAT_VM_CAP else vms * vm_usd

    vms = f"{low}" if low == high else f"{low}-{high}"
    return [
        line(
            r,
            res,
            "network",
            basis="hourly",
            low=gateway(low) + address_usd,
            high=gateway(high) + address_usd,
            what=f"Cloud NAT gateway for {vms} VMs at {per_vm.per_unit()} ({capped.per_unit()} past {NAT_VM_CAP} "
            f"VMs), 1 external address at {address.per_unit()}",
            unit_prices=(service_price("gcp.cloudNat.data").per_unit(),),
            price_keys=keys,
        )
    ]


def _vms(res: Resources) -> tuple[int, int]:
    """The stack's VMs at its lower and upper bounds: every node pool's nodes and every plain instance."""
    low = high = 0
    for r in res.declared():
        if r.type == COMPUTE_INSTANCE:
            low, high = low + 1, high + 1
        elif r.type == NODE_POOL and (bounds := pool_nodes(r)) is not None:
            low, high = low + bounds[0], high + bounds[1]
    return low, high


def gcs_bucket(r: PolicyResource, res: Resources) -> Priced:
    return [
        usage(
            r,
            res,
            "registry data",
            "GCS bucket: depends on what is stored (every object version counts) and on writes",
            "gcs.standard.storage",
            "gcs.classA.operation",
        )
    ]


def artifact_registry(r: PolicyResource, res: Resources) -> Priced:
    return [
        usage(
            r,
            res,
            "storage",
            "Artifact Registry: per GB-month of the images it keeps (the remote repository's cache; the nodes' "
            "pulls within its region are free)",
            "gcp.artifactRegistry.storage",
        )
    ]


def kms_key(r: PolicyResource, res: Resources) -> Priced:
    return [
        hourly(
            r,
            res,
            "encryption",
            "gcp.kms.keyVersion",
            1,
            "1 Cloud KMS key version (each rotation adds one)",
            per_month=True,
            usage=("gcp.kms.operation",),
        )
    ]


def transfer_job(r: PolicyResource, res: Resources) -> Priced:
    return [
        usage(
            r,
            res,
            "network",
            "Storage Transfer from S3: per GB copied (S3 egress to the internet; the "
            "transfer service itself is free) and per object",
            "dataTransfer.internetOut",
            "gcp.storageTransfer.agentless",
            "s3.get.request",
            "gcs.classA.operation",
        )
    ]


def mirror_notes() -> list[str]:
    storage, egress = service_price("gcs.standard.storage"), service_price("dataTransfer.internetOut")
    return [
        f"the mirror is usage-based: each GB copied costs ${egress.usd:g} of S3 egress to the internet once (AWS "
        f"list price, us-east-1) and ${storage.usd:g} per GB-month while stored; the transfer service is free and "
        "unchanged objects are not copied again"
    ]


def compute_instance(r: PolicyResource, res: Resources) -> Priced:
    """One VM (a training node): its machine type's catalog price, or unknown with the sourced host part."""
    return [_machines(r, res, str(r.props.get("machineType") or ""), 1, 1)]


LUSTRE_PRICE_KEYS = {125: "gcp.managedLustre.capacity125"}  # the tiers with a sourced price


def lustre_instance(r: PolicyResource, res: Resources) -> Priced:
    capacity, tier = whole(r.props.get("capacityGib")), whole(r.props.get("perUnitStorageThroughput"))
    label = f"Managed Lustre {capacity} GiB at {tier} MB/s/TiB"
    if capacity is not None and tier in LUSTRE_PRICE_KEYS:
        return [hourly(r, res, "storage", LUSTRE_PRICE_KEYS[tier], capacity, label, per_month=True)]
    return [
        line(
            r,
            res,
            "storage",
            basis="unknown",
            what=f"{label}: unknown (no sourced price for this tier; Managed Lustre bills per GiB of provisioned "
            f"capacity by tier: {service_price(LUSTRE_PRICE_KEYS[125]).per_unit()} at 125 MB/s/TiB)",
        )
    ]


GCP_PRICERS: dict[str, Callable[[PolicyResource, Resources], Priced]] = {
    CLUSTER: gke_cluster,
    NODE_POOL: node_pool,
    ROUTER_NAT: router_nat,
    COMPUTE_INSTANCE: compute_instance,
    LUSTRE_INSTANCE: lustre_instance,
    tokens.GCP_STORAGE_BUCKET: gcs_bucket,
    tokens.GCP_ARTIFACT_REGISTRY_REPOSITORY: artifact_registry,
    tokens.GCP_KMS_CRYPTO_KEY: kms_key,
    tokens.GCP_STORAGE_TRANSFER_JOB: transfer_job,
    **GCP_GUARD_PRICERS,
}
