"""Whether Kubernetes NetworkPolicies let one pod reach another, decided as Kubernetes does.

No cluster runs in the tests, so this reads the policies' selectors the way the API
documents them (networking.k8s.io/v1): a pod that no policy selects for a direction
accepts everything in it; once selected, traffic passes only where some rule of some
selecting policy admits it (policies add up, none subtracts). A peer with only a
``podSelector`` means pods of the policy's own namespace; ``namespaceSelector`` and
``podSelector`` in one peer must both match; ``ports`` absent means every port; a named
port is looked up in the destination's container ports. ``ipBlock`` peers (addresses
outside the cluster) admit no pod here.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pod:
    """A pod as the policies see it: its namespace, labels and named container ports."""

    namespace: str
    labels: dict[str, str]
    named_ports: dict[str, int] = field(default_factory=dict)


def selects(selector: dict | None, labels: dict[str, str]) -> bool:
    """A label selector (``matchLabels`` and ``matchExpressions``); ``{}`` selects all."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        present = key in labels
        matched = {
            "In": present and labels[key] in values,
            "NotIn": not present or labels[key] not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]
        if not matched:
            return False
    return True


def namespace_labels(name: str, labels: dict[str, str] | None = None) -> dict[str, str]:
    """A namespace's labels, with the one Kubernetes sets on every namespace."""
    return {**(labels or {}), "kubernetes.io/metadata.name": name}


def _peer_matches(peer: dict, pod: Pod, policy_namespace: str, namespaces: dict) -> bool:
    if "ipBlock" in peer:
        return False
    if "namespaceSelector" in peer:
        labels = namespaces.get(pod.namespace, namespace_labels(pod.namespace))
        if not selects(peer["namespaceSelector"], labels):
            return False
    elif pod.namespace != policy_namespace:
        return False
    return "podSelector" not in peer or selects(peer["podSelector"], pod.labels)


def _port_matches(ports: list[dict] | None, port: int, destination: Pod) -> bool:
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != "TCP":
            continue
        wanted = entry.get("port")
        if wanted is None:
            return True
        if isinstance(wanted, str):
            wanted = destination.named_ports.get(wanted)
        if wanted is not None and wanted <= port <= entry.get("endPort", wanted):
            return True
    return False


def _types(spec: dict) -> list[str]:
    return spec.get("policyTypes") or ["Ingress", *(["Egress"] if "egress" in spec else [])]


def _rule_admits(
    rule: dict, peers_key: str, peer: Pod, policy: dict, port: int, dest: Pod, namespaces: dict
) -> bool:
    if not _port_matches(rule.get("ports"), port, dest):
        return False
    peers = rule.get(peers_key)
    if not peers:  # no from/to: every peer
        return True
    namespace = policy["metadata"]["namespace"]
    return any(_peer_matches(entry, peer, namespace, namespaces) for entry in peers)


def allows(
    policies: list[dict], source: Pod, destination: Pod, port: int, namespaces: dict
) -> bool:
    """Whether a TCP connection from ``source`` to ``destination``'s ``port`` is admitted
    by both ends' policies. ``namespaces`` maps names to labels (``namespace_labels``)."""
    ends = (("Ingress", destination, "from", source), ("Egress", source, "to", destination))
    for direction, pod, peers_key, peer in ends:
        selecting = [
            policy
            for policy in policies
            if policy["metadata"].get("namespace") == pod.namespace
            and direction in _types(policy["spec"])
            and selects(policy["spec"].get("podSelector", {}), pod.labels)
        ]
        if selecting and not any(
            _rule_admits(rule, peers_key, peer, policy, port, destination, namespaces)
            for policy in selecting
            for rule in policy["spec"].get(direction.lower(), [])
        ):
            return False
    return True
