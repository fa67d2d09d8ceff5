"""No pod the stacks declare runs privileged or reaches into its node: no `privileged` container, no
`hostNetwork`, `hostPID` or `hostIPC`, no `hostPath` volume. A model server or Job with any of these can read
other pods' memory and tokens, the node's credentials and the kubelet's files; one compromised model server
becomes the node.

Device plugins need one host path (the kubelet's device-plugin socket directory, Kubernetes "Device Plugins"
docs); `EXCEPTIONS` names each such workload by kind, namespace and name with the paths it may mount and why.
The demo stacks install the device plugins as Helm releases, whose DaemonSets a preview does not show."""

from __future__ import annotations

from dataclasses import dataclass

from infra.core.shapes import dict_at
from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import as_list
from policies.readers.workloads import POD_KINDS, any_pod_spec, metadata, namespace_of

NAME = "pods-without-host-access"
KINDS = POD_KINDS
HOST_FLAGS = {"hostNetwork": "network namespace", "hostPID": "process IDs", "hostIPC": "IPC namespace"}
DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"


@dataclass(frozen=True)
class Exception_:
    kind: str
    namespace: str
    name: str
    host_paths: tuple[str, ...]
    reason: str


EXCEPTIONS = (
    Exception_(
        "DaemonSet",
        "kube-system",
        "nvidia-device-plugin-daemonset",
        (DEVICE_PLUGIN_DIR,),
        "the NVIDIA device plugin registers with the kubelet through its socket directory",
    ),
    Exception_(
        "DaemonSet",
        "kube-system",
        "neuron-device-plugin-daemonset",
        (DEVICE_PLUGIN_DIR,),
        "the Neuron device plugin registers with the kubelet through its socket directory",
    ),
)


def _allowed_paths(resource: Resource) -> tuple[str, ...]:
    meta = metadata(resource)
    kind, namespace, name = KINDS[resource.type], namespace_of(meta), meta.get("name")
    for exception in EXCEPTIONS:
        if (exception.kind, exception.namespace, exception.name) == (kind, namespace, name):
            return exception.host_paths
    return ()


def check(resource: Resource) -> list[str]:
    spec = any_pod_spec(resource)
    problems = []
    for flag, shared in HOST_FLAGS.items():
        if spec.get(flag) is True:
            problems.append(f"the pod sets {flag}: true, which shares the node's {shared} with it; remove it")
    allowed = _allowed_paths(resource)
    for volume in as_list(spec.get("volumes")):
        host = dict_at(volume).get("hostPath")
        if not isinstance(host, dict):
            continue
        path = host.get("path")
        if is_unknown(path) or path in allowed:
            continue
        problems.append(
            f"volume '{dict_at(volume).get('name')}' mounts the node's {path}; use an emptyDir, a ConfigMap or a "
            "CSI volume (only device plugins named in the rule's EXCEPTIONS may mount host paths)"
        )
    for part in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(as_list(spec.get(part))):
            context = dict_at(dict_at(container).get("securityContext"))
            if context.get("privileged") is True:
                problems.append(
                    f"{part}[{i}] '{dict_at(container).get('name')}' is privileged, with every device and capability "
                    "of the node; drop privileged and request the device through its resource name"
                )
    return problems


RULE = ResourceRule(
    NAME,
    "Pods run unprivileged, without host network, PID, IPC or host paths (device plugins excepted by name).",
    "mandatory",
    tuple(KINDS),
    check,
)
