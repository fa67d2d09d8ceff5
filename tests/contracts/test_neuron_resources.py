"""The Neuron resource names mlinfra requests (servers, promotion Jobs, the autoscaler's node templates) are
the ones the Neuron device plugin registers, per the Neuron documentation (data/neuron-device-plugin.json)."""

from __future__ import annotations

import json
from pathlib import Path

from infra.serving.aws import node_pools
from infra.serving.aws.config import Inf2PoolSpec
from infra.serving.scheduling import taint
from infra.serving.servers import PROFILES

FACTS = json.loads((Path(__file__).parent / "data" / "neuron-device-plugin.json").read_text(encoding="utf-8"))


def test_neuron_requests_use_a_resource_the_device_plugin_registers():
    resource = PROFILES["inf2"].resource
    assert resource in FACTS["resources"] and resource not in FACTS["retired"]
    assert taint("inf2").key == resource  # the pool's taint tolerates the same name
    tags = node_pools.accelerator_plans("inf2", Inf2PoolSpec())[0].template_tags()
    assert {k.rsplit("/resources/", 1)[1] for k in tags if "/resources/" in k} == {resource}
