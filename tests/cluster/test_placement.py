"""Where the train task runs: quantities Kubernetes accepts, labels, limits, the trip as JSON."""

from __future__ import annotations

import pytest

from components.cluster.placement import Placement


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cpu": "0"}, "CPU request above 0 and at most a million cores, found '0'"),
        ({"cpu": "two"}, "CPU quantity such as 3, 1.5 or 500m, found 'two'"),
        ({"memory": "12GB"}, "memory as a quantity .* found '12GB'"),
        ({"shm_size": "-2Gi"}, "shm_size as a quantity .* found '-2Gi'"),
        ({"queue_name": "Team A GPUs"}, "queue_name as Kueue's object name and a label value"),
        ({"queue_name": "q" * 64}, "queue_name as Kueue's object name and a label value"),
        ({"priority_class": "high\nx"}, "priority_class as Kueue's object name"),
        ({"gpu_resource": "gpu"}, "GPU resource as an extended resource name"),
        ({"gpu_resource": "nvidia.com/mig 1g"}, "GPU resource as an extended resource name"),
        # native, or a quota's name: Kubernetes refuses both on a container
        ({"gpu_resource": "kubernetes.io/gpu"}, "outside kubernetes.io/, not requests"),
        ({"gpu_resource": "requests.nvidia.com/gpu"}, "outside kubernetes.io/, not requests"),
        ({"gpu_resource": "example.com/" + "g" * 64}, "GPU resource as an extended"),
    ],
)
def test_quantities_labels_and_gpu_resources_kubernetes_would_refuse_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        Placement(**fields)


@pytest.mark.parametrize(
    "name", ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu", "gpu.intel.com/i915"]
)
def test_the_gpu_resources_vendors_publish_are_taken(name):
    assert Placement(gpu_resource=name).gpu_resource == name


def test_cpu_limits_are_twice_the_request_in_cores_or_millicores():
    limits = {cpu: Placement(cpu=cpu).cpu_limit for cpu in ("3", "1.5", "500m", "0.25")}
    assert limits == {"3": "6", "1.5": "3", "500m": "1", "0.25": "500m"}


def test_a_placement_survives_the_trip_through_json():
    placement = Placement(cpu="1.5", memory="24Gi", node_selector="pool=gpu")
    assert Placement.from_json(placement.to_json()) == placement
    assert (
        placement.node_label == ("pool", "gpu") and Placement(node_selector="").node_label is None
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"node_selector": "=x"}, "node selector KEY=VALUE that Kubernetes accepts"),
        ({"node_selector": "my key=v a l"}, "node selector KEY=VALUE that Kubernetes accepts"),
        ({"node_selector": "pool=gpu\nx"}, "node selector KEY=VALUE that Kubernetes accepts"),
        ({"toleration_key": "nvidia.com/gpu\nx"}, "expected a taint key"),
        ({"s3_secret": "../UPPER case!"}, "s3_secret as a Kubernetes name"),
        ({"mlflow_secret": ""}, "mlflow_secret as a Kubernetes name"),
        ({"cpu": "99999999999999999999"}, "at most a million cores"),
        ({"memory": "1Ki"}, "memory as a quantity of 1Mi or more"),
        ({"memory": "12.5Gi"}, "memory as a quantity such as 12Gi .* found '12.5Gi'"),
        ({"memory": "99999999999999999999E"}, "memory as a quantity of at most 8Ei"),
        ({"shm_size": "1e3"}, "shm_size as a quantity such as 12Gi"),
        ({"cpu": "0.1m"}, "CPU quantity in whole millicores"),
        ({"memory": "4Gi", "shm_size": "8Gi"}, "shm size at most the memory"),
    ],
)
def test_names_and_sizes_kubernetes_would_refuse_are_refused_when_compiling(fields, message):
    with pytest.raises(ValueError, match=message):
        Placement(**fields)


def test_valid_kubernetes_names_and_sizes_are_kept():
    placement = Placement(
        node_selector="cloud.google.com/gke-accelerator=nvidia-l4",
        toleration_key="example.com/gpu-pool",
        s3_secret="team-a.s3",
        memory="512M",
        shm_size="256M",
    )
    assert placement.node_label == ("cloud.google.com/gke-accelerator", "nvidia-l4")


def test_kueues_labels_are_set_only_where_asked():
    assert Placement().kueue_labels == {}
    assert Placement(queue_name="team-a-gpu", priority_class="high").kueue_labels == {
        "kueue.x-k8s.io/queue-name": "team-a-gpu",
        "kueue.x-k8s.io/priority-class": "high",
    }
