"""Meaning checks of a serving config (second validation tier): each finding names the field and the fix."""

from __future__ import annotations

import ipaddress

from infra.catalog.accelerators import device, device_of
from infra.catalog.aws import instance_type
from infra.catalog.roles import role_problem, types_for
from infra.core.errors import Problem
from infra.core.network import private_range
from infra.serving import startup
from infra.serving.aws.allocatable import (
    IMAGE_RESERVE_GIB,
    Resources,
    allocatable,
    disk_needed,
    holds,
    larger_type,
    replica,
    usable_disk,
)
from infra.serving.aws.config import AwsModelSpec, NodePoolSpec, ServingSpec
from infra.serving.aws.mirror import CREDENTIAL_SECRET_PREFIX, DOCKER_HUB, upstream_of
from infra.serving.aws.node_pools import accelerator_plans, holding_types, replicas_of
from infra.serving.aws.zones import pinned_pool_problem, pinned_zone_problems, pool_zone_ids, pool_zone_problem
from infra.serving.checks import ENDPOINT_KEY, GATEWAY_KEY, endpoint_findings, gateway_findings, replica_bound_findings
from infra.serving.families import AWS_FAMILIES, FAMILIES
from infra.serving.fit import fit_findings
from infra.serving.variants import variant_problem

P = "mlinfra:serving."
SURGE = 1  # the model Deployments' rollingUpdate.maxSurge (manifests.py), with maxUnavailable 0


def device_of_family(family: str) -> str:
    """The instance catalog's accelerator model of a family's device ("A10G", "Inferentia2", ...)."""
    (name,) = FAMILIES[family].devices
    return device(name).catalog_names["aws"]


# The accelerator each pool is built for, as the instance catalog names it (facts, not name prefixes).
POOL_ACCELERATOR_MODEL = {name: device_of_family(name) for name in AWS_FAMILIES}
# Artefact variants each pool's model server loads.


def serving_findings(spec: ServingSpec, region: str | None) -> list[Problem]:
    findings = endpoint_findings(spec.cluster.endpoint) + _public_endpoint_findings(spec)
    findings += _mirror_findings(spec, region) + _zone_findings(spec, region)
    findings += _gateway_findings(spec, region)
    sound = set()  # pools without findings: their types and bounds can be counted on
    for family, pool in spec.node_pools.declared().items():
        found = _pool_findings(family, pool, region)
        findings += found
        if not found:
            sound.add(family)
    refused = set()  # pools with a model refused alone: their sum would repeat it
    for index, model in enumerate(spec.models):
        found = _model_findings(index, model, spec)
        found = found or (_rollout_findings(index, model, spec) if model.accelerator in sound else [])
        found = found or _zero_findings(index, model, spec)
        if found:
            refused.add(model.accelerator)
        findings += found
    for family in sorted(sound - refused):
        findings += _shared_pool_findings(family, spec)
    return findings


def _public_endpoint_findings(spec: ServingSpec) -> list[Problem]:
    """EKS applies publicAccessCidrs to its public endpoint only, which sees public source addresses: a private
    range there (RFC 1918, shared CGNAT space, loopback, link-local) admits nobody, and is most likely meant for the
    VPC or a VPN, which reach the private endpoint without it. Documentation ranges (RFC 5737) are left alone: they
    are placeholders, as in the demo."""
    findings = []
    for index, cidr in enumerate(spec.cluster.endpoint.public_access_cidrs):
        if private_range(ipaddress.IPv4Network(cidr, strict=False)):
            findings.append(
                Problem(
                    f"{ENDPOINT_KEY}.publicAccessCidrs[{index}]",
                    f"{cidr} is a private range: the public endpoint sees only public sources, so it admits nobody; "
                    "list your runners' and VPN's public egress (the VPC reaches the private endpoint already, "
                    "and so does a VPN into it)",
                )
            )
    return findings


def _gateway_findings(spec: ServingSpec, region: str | None) -> list[Problem]:
    gateway = spec.gateway
    if gateway is None:
        return []
    findings = gateway_findings(gateway, "apiKeysSecretArn", gateway.api_keys_secret_arn, "Secrets Manager")
    if region is not None and gateway.certificate_region != region:
        findings.append(
            Problem(
                f"{GATEWAY_KEY}.certificateArn",
                f"the certificate is in {gateway.certificate_region}, the stack in {region}: a load balancer uses "
                f"ACM certificates of its own region only; request or import the certificate in {region}",
            )
        )
    return findings


def pool_types(family: str) -> list[str]:
    """Serving types whose accelerator is the pool's, from the catalog."""
    return [t for t in types_for("serving") if instance_type(t).accelerator_model == POOL_ACCELERATOR_MODEL[family]]


def _pool_findings(family: str, pool: NodePoolSpec, region: str | None) -> list[Problem]:
    where = f"{P}nodePools.{family}."
    findings = []
    for i, name in enumerate(pool.instance_types):
        problem = role_problem(name, "serving")
        if problem:
            findings.append(Problem(f"{where}instanceTypes[{i}]", problem))
            continue
        itype = instance_type(name)
        if itype.accelerator_model != POOL_ACCELERATOR_MODEL[family]:
            findings.append(
                Problem(
                    f"{where}instanceTypes[{i}]",
                    f"{name} has {itype.accelerator_model or 'no'} accelerators, not "
                    f"{POOL_ACCELERATOR_MODEL[family]}; the {family} pool takes: {', '.join(pool_types(family))}",
                )
            )
        elif region and not itype.azs(region):
            findings.append(
                Problem(
                    f"{where}instanceTypes[{i}]",
                    f"{name} is not offered in {region}; regions that offer it: {', '.join(itype.regions)}",
                )
            )
    if region and not findings and (zones := pool_zone_problem(region, family, pool.instance_types)):
        findings.append(zones)
    if len(set(pool.instance_types)) != len(pool.instance_types):
        findings.append(Problem(f"{where}instanceTypes", "lists a type twice; give two or more different sizes"))
    if pool.max_size < pool.min_size:
        findings.append(
            Problem(
                f"{where}maxSize", f"{pool.max_size} is below minSize ({pool.min_size}); use at least {pool.min_size}"
            )
        )
    return findings


def _zone_findings(spec: ServingSpec, region: str | None) -> list[Problem]:
    """Pinned zone IDs: as many as availabilityZones says, the region's, supported by EKS, one for every pool."""
    cluster, pinned = spec.cluster, spec.cluster.availability_zone_ids
    if not pinned:
        return []
    findings = []
    if "availability_zones" in cluster.model_fields_set and cluster.availability_zones != len(pinned):
        findings.append(
            Problem(
                f"{P}cluster.availabilityZones",
                f"{cluster.availability_zones}, but availabilityZoneIds lists {len(pinned)}; leave availabilityZones "
                "out or make them agree",
            )
        )
    if region:
        findings += pinned_zone_problems(region, pinned)
        for family, pool in spec.node_pools.declared().items():
            offered = pool_zone_ids(region, pool.instance_types)
            if offered and not set(offered) & set(pinned):
                findings.append(pinned_pool_problem(region, family, pool.instance_types, pinned))
    return findings


def _mirror_findings(spec: ServingSpec, region: str | None) -> list[Problem]:
    """Docker Hub images go through the cache only with a credential; its secret lives in the stack's region."""
    mirror = spec.image_mirror
    if not mirror.enabled:
        return []
    field = f"{P}imageMirror.dockerHubCredentialArn"
    if mirror.docker_hub_credential_arn is None:
        hub = [m.name for m in spec.models if (found := upstream_of(m.image)) and found[0] is DOCKER_HUB]
        if hub:
            return [
                Problem(
                    field,
                    (
                        f"models {', '.join(hub)} use Docker Hub images"
                        if len(hub) > 1
                        else f"model {hub[0]} uses a Docker Hub image"
                    )
                    + ", which ECR's pull-through cache mirrors only with a Docker Hub credential: name a Secrets "
                    f"Manager secret ({CREDENTIAL_SECRET_PREFIX}...), use an image from ECR Public or your own ECR, "
                    "or set imageMirror.enabled: false to pull from Docker Hub directly",
                )
            ]
        return []
    secret_region = mirror.docker_hub_credential_arn.split(":")[3]
    if region and secret_region != region:
        return [Problem(field, f"the secret is in {secret_region}; ECR reads it in the stack's region, {region}")]
    return []


def _model_findings(index: int, model: AwsModelSpec, spec: ServingSpec) -> list[Problem]:
    where = f"{P}models[{index}]."
    declared = spec.node_pools.declared()
    if model.accelerator not in declared:
        return [
            Problem(
                where + "accelerator",
                f"{model.accelerator} has no node pool; declare nodePools.{model.accelerator} (e.g. "
                f"{model.accelerator}: {{}} for its default sizes) or use one of: {', '.join(declared)}",
            )
        ]
    refused = variant_problem(model.artefact_variant, model.accelerator)
    if refused:  # the fit and the engine need a variant the devices run
        return [Problem(where + "variant", refused)]
    findings = replica_bound_findings(where, model)
    pool = declared[model.accelerator]
    known = [instance_type(t) for t in pool.instance_types if role_problem(t, "serving") is None]
    ours = [t for t in known if t.accelerator_model == POOL_ACCELERATOR_MODEL[model.accelerator]]
    devices = [device_of("aws", t.name) for t in ours]
    findings += fit_findings(where, model, devices)
    largest = max(known, key=lambda t: t.accelerator_count, default=None)
    if largest is not None and model.accelerators_per_replica > largest.accelerator_count:
        findings.append(
            Problem(
                where + "acceleratorsPerReplica",
                f"{model.accelerators_per_replica} per replica, but the largest type of the {model.accelerator} "
                f"pool ({largest.name}) has {largest.accelerator_count}; lower it or add a larger size "
                f"to nodePools.{model.accelerator}.instanceTypes",
            )
        )
    elif ours:
        need = replica(model)  # reads modelConfig once for both
        findings += _schedulable_findings(where, model, need, [t.name for t in ours])
        findings += _disk_findings(model, need, pool)
    return findings


def _zero_findings(index: int, model: AwsModelSpec, spec: ServingSpec) -> list[Problem]:
    if model.scale_to_zero is None:
        return []
    pool = spec.node_pools.declared()[model.accelerator]
    budgets = startup.model_budgets(model, holding_types(model, pool))
    return startup.zero_findings(f"{P}models[{index}].", model, budgets, spec.gateway is not None)


def _disk_findings(model: AwsModelSpec, need: Resources, pool: NodePoolSpec) -> list[Problem]:
    """A server that copies its artefact to local disk (Neuron) needs it on the node's root volume: a copy larger
    than its volume is evicted mid-copy, and a request no node's disk holds stays Pending."""
    usable = usable_disk(pool.disk_gib)
    if need.disk_gib <= usable:
        return []
    return [
        Problem(
            f"{P}nodePools.{model.accelerator}.diskGib",
            f"{pool.disk_gib}: a replica of {model.name} copies its artefact ({need.disk_gib} GiB, estimated"
            + (" from modelConfig" if model.architecture_config else " without a modelConfig")
            + f") to the node's disk, and a {pool.disk_gib} GiB root volume leaves {usable:.0f} GiB for it "
            f"(the kubelet's eviction threshold and {IMAGE_RESERVE_GIB} GiB for the OS and images): raise diskGib to "
            f"{disk_needed(need)}",
        )
    ]


def _schedulable_findings(where: str, model: AwsModelSpec, need: Resources, types: list[str]) -> list[Problem]:
    """A replica's CPU and memory requests against what each type of its pool leaves for pods: a replica no node
    holds stays Pending, and `pulumi up` waits out its timeout on it."""
    if any(holds(t, need) for t in types):
        return []
    bigger = larger_type(types, need)
    types = [t for t in types if instance_type(t).accelerator_count >= need.devices]  # the others never can
    room = {t: allocatable(t, 0) for t in types}
    fix = f"add {bigger} to nodePools.{model.accelerator}.instanceTypes" if bigger else "no catalog type holds it"
    asks = f"a replica of {model.name} asks for {model.cpu:g} CPU and {model.memory_gib} GiB of memory"
    found = []
    for field, unit, value, left in (
        ("cpu", "CPU", model.cpu, lambda r: r.cpu),
        ("memoryGib", "GiB of memory", model.memory_gib, lambda r: r.memory_gib),
    ):
        best = max(types, key=lambda t: left(room[t]))
        if value > left(room[best]):
            found.append(
                Problem(
                    where + field,
                    f"{value:g}: {asks}; the largest node of the {model.accelerator} pool for it ({best}) leaves "
                    f"{left(room[best]):.1f} {unit} for pods (EKS AMI reservations and DaemonSets, estimated), so "
                    f"its pods would stay Pending: lower {field} or {fix}",
                )
            )
    if not found:  # each fits some type, but no type fits both
        found.append(
            Problem(
                where.rstrip("."),
                f"{asks}; no type of the {model.accelerator} pool leaves both for pods ("
                + ", ".join(f"{t}: {room[t].cpu:.1f} CPU, {room[t].memory_gib:.1f} GiB" for t in types)
                + f"): {fix}",
            )
        )
    return found


def pods_per_node(name: str, need: Resources, disk_gib: int) -> int:
    """How many replicas of `need` one node of type `name` with a `disk_gib` root volume holds (devices, CPU, memory
    and local disk it leaves for pods)."""
    room, devices = allocatable(name, disk_gib), instance_type(name).accelerator_count
    fits = [devices // max(need.devices, 1), room.cpu // need.cpu, room.memory_gib // need.memory_gib]
    if need.disk_gib:
        fits.append(max(room.disk_gib, 0) // need.disk_gib)
    return int(min(fits))


def _shared_pool_findings(family: str, spec: ServingSpec) -> list[Problem]:
    """Models sharing a pool need its devices for all of them at once: every model at maxReplicas, each surging one
    more in a `pulumi up` that rolls them together. Devices are counted (a replica never shares one), so this
    necessary bound never refuses a pool that could hold them; CPU and memory are checked per model above."""
    models = [m for m in spec.models if m.accelerator == family]
    if len(models) < 2:
        return []
    pool = spec.node_pools.declared()[family]
    groups = accelerator_plans(family, pool, replicas_of(spec.models, family))
    have = sum(group.max_size * group.devices for group in groups)
    need = sum((m.max_replicas + SURGE) * m.accelerators_per_replica for m in models)
    if need <= have:
        return []
    per_node = max(instance_type(t).accelerator_count for t in pool.instance_types)
    return [
        Problem(
            f"{P}nodePools.{family}.maxSize",
            f"{pool.max_size}: the {family} pool's models ("
            + ", ".join(f"{m.name}: {m.max_replicas} + {SURGE} x {m.accelerators_per_replica}" for m in models)
            + f") need {need} accelerators at their maxReplicas with a rollout's surge, but its groups reach {have}: "
            f"raise maxSize to {pool.max_size + -(-(need - have) // per_node)} or lower the models' maxReplicas",
        )
    ]


def _rollout_findings(index: int, model: AwsModelSpec, spec: ServingSpec) -> list[Problem]:
    """At maxReplicas a rollout surges one more pod (maxSurge 1, maxUnavailable 0: manifests.py), so the pool's
    groups whose type holds a replica must reach maxReplicas + 1 replicas, or the surge pod stays Pending and the
    rollout (a promote's `pulumi up`) never ends. Each model is counted alone here; _shared_pool_findings sums a
    pool's models."""
    pool = spec.node_pools.declared()[model.accelerator]
    need = replica(model)
    slots = {t: pods_per_node(t, need, pool.disk_gib) for t in pool.instance_types}
    # The groups the stack declares for the pool (a Spot pool's on-demand baseline among them), each up to its maxSize.
    groups = accelerator_plans(model.accelerator, pool, replicas_of(spec.models, model.accelerator))
    room = sum(group.max_size * slots[group.instance_type] for group in groups)
    base = sum(group.max_size for group in groups if group.baseline)
    peak = model.max_replicas + SURGE
    if room >= peak:
        return []
    holding = [f"{t}: {n} per node" for t, n in slots.items() if n] or ["none"]
    more = max(n for n in slots.values()) if any(slots.values()) else 0
    grow = (
        f"raise nodePools.{model.accelerator}.maxSize to {pool.max_size + -(-(peak - room) // more)} or "
        if more
        else ""
    )
    return [
        Problem(
            f"{P}models[{index}].maxReplicas",
            f"{model.max_replicas}: a rollout at {model.max_replicas} replicas surges one more, {peak} pods, but the "
            f"{model.accelerator} pool holds at most {room} ({', '.join(holding)}; maxSize {pool.max_size} per type"
            + (f", {base} on demand" if base else "")
            + f"): the surge pod would stay Pending and the rollout never end; {grow}lower maxReplicas to "
            f"{max(room - SURGE, 0)}",
        )
    ]
