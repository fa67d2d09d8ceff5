"""The flags the node bootstrap gives torchrun, against torchrun as the AMIs' pinned PyTorch defines it
(tests/contracts/data/torchrun.json: torch 2.9.0 on the GPU DLAMI, 2.8.0 on the Neuron DLAMI), and parsed for
real by the installed torch's own parser: a static rendezvous whose ranks are the bootstrap's ranks."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from infra.catalog.aws.node_images import dlami_facts
from infra.training.aws.userdata import render_user_data
from tests.infra.training.aws.bootstrap_sim import training_spec

DATA = json.loads((Path(__file__).parent / "data" / "torchrun.json").read_text(encoding="utf-8"))


def static_flags(script: str) -> list[str]:
    """The torchrun flags of the job line, with this node's values in place of the script's variables."""
    block = re.search(r"mlinfra_static_rdzv=\(\n(.*?)\n\)", script, re.S)
    assert block, "the script builds its static rendezvous flags in one array"
    values = {
        "$MLINFRA_NODE_COUNT": "4",
        "$MLINFRA_NPROC_PER_NODE": "8",
        "$MLINFRA_NODE_RANK": "2",
        "$MLINFRA_RENDEZVOUS_HOST": "10.0.1.4",
        "$MLINFRA_RDZV_PORT": "29500",
    }
    flags = shlex.split(block.group(1)) + ['--master-port="$MLINFRA_RDZV_PORT"']
    flags = [shlex.split(flag.replace('"', ""))[0] for flag in flags]
    return [re.sub(r"\$MLINFRA_[A-Z_]+", lambda m: values[m.group(0)], flag) for flag in flags]


@pytest.mark.parametrize("type_name", ["p5.48xlarge", "trn1.32xlarge"])
def test_every_flag_is_one_the_images_torchrun_defines(type_name):
    spec = training_spec(type_name)
    script = render_user_data(spec)
    version = dlami_facts(spec.accelerator_kind).pytorch
    assert DATA["versions"][version]["image"] == spec.accelerator_kind
    aliases = {alias for flag in DATA["flags"].values() for alias in flag["aliases"]}
    for flag in static_flags(script):
        assert flag.split("=", 1)[0] in aliases, flag
    assert "--rdzv-endpoint" not in script and "--rdzv-id" not in script and "--rdzv-backend=c10d" not in script


def test_torchrun_parses_them_as_a_static_rendezvous_on_the_bootstraps_ranks():
    torch_run = pytest.importorskip("torch.distributed.run")
    flags = static_flags(render_user_data(training_spec("p5.48xlarge")))
    args = torch_run.get_args_parser().parse_args([*flags, "train.py"])
    assert (args.rdzv_backend, args.node_rank, args.master_addr, args.master_port) == ("static", 2, "10.0.1.4", 29500)
    config, _, _ = torch_run.config_from_args(args)
    assert (config.min_nodes, config.max_nodes, config.nproc_per_node) == (4, 4, 8)
    assert config.rdzv_backend == "static" and config.rdzv_endpoint == "10.0.1.4:29500"
    assert config.rdzv_configs["rank"] == 2  # torchrun's node rank is the bootstrap's, not one it assigns
