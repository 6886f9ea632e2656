"""A stand-in for Kueue's flavor assignment, for the tests that check the shipped queue
admits what the flags make. No Kueue runs here; this follows Kueue's own documents
(site/content/en/docs/concepts/resource_flavor.md and cluster_queue.md in
kubernetes-sigs/kueue): a ClusterQueue's resource group gives a pod set one flavor for all
the group's resources, trying the flavors in their listed order and taking the first
whose free nominal quota holds the requests, whose NoSchedule/NoExecute ``nodeTaints``
the pods tolerate, and whose ``nodeLabels`` the pods' node selector does not contradict.
A resource no group covers is never admitted. Cohorts, borrowing and preemption are out
of its scope: one workload against an empty queue.
"""

from __future__ import annotations

from kubernetes.utils import parse_quantity

ENFORCED_EFFECTS = ("NoSchedule", "NoExecute")  # PreferNoSchedule is ignored


def assign_flavor(
    cluster_queue: dict,
    flavors: dict[str, dict],
    requests: dict[str, str],
    tolerations: list[dict],
    node_selector: dict[str, str],
) -> str | None:
    """The flavor an empty ``cluster_queue`` gives a pod set asking for ``requests``, or
    None where none can (a resource no group covers, or no flavor that fits)."""
    asked = {name: parse_quantity(value) for name, value in requests.items()}
    groups = cluster_queue["spec"]["resourceGroups"]
    if any(not any(name in g["coveredResources"] for g in groups) for name in asked):
        return None
    chosen = None
    for group in groups:
        wanted = {name: q for name, q in asked.items() if name in group["coveredResources"]}
        if not wanted:
            continue
        fitting = [
            flavor["name"]
            for flavor in group["flavors"]
            if _holds(flavor, wanted)
            and _tolerated(flavors[flavor["name"]], tolerations)
            and _selectable(flavors[flavor["name"]], node_selector)
        ]
        if not fitting:
            return None
        chosen = fitting[0]
    return chosen


def _holds(flavor: dict, wanted: dict) -> bool:
    quota = {r["name"]: parse_quantity(str(r["nominalQuota"])) for r in flavor["resources"]}
    return all(quota.get(name, 0) >= amount for name, amount in wanted.items())


def _tolerated(flavor: dict, tolerations: list[dict]) -> bool:
    taints = [
        t for t in flavor.get("spec", {}).get("nodeTaints", []) if t["effect"] in ENFORCED_EFFECTS
    ]
    return all(any(_tolerates(t, taint) for t in tolerations) for taint in taints)


def _tolerates(toleration: dict, taint: dict) -> bool:
    """Kubernetes' rule: the key matches (or is empty with Exists), the effect matches (or
    is empty), and Exists, or Equal with the taint's value."""
    if toleration.get("key") not in (taint["key"], None, ""):
        return False
    if toleration.get("effect") not in (taint["effect"], None, ""):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return toleration.get("value", "") == taint.get("value", "")


def _selectable(flavor: dict, node_selector: dict[str, str]) -> bool:
    labels = flavor.get("spec", {}).get("nodeLabels", {})
    return all(node_selector.get(key, value) == value for key, value in labels.items())
