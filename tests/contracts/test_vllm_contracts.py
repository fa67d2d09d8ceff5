"""The model servers' command lines, parsed by a parser rebuilt from vLLM's own argument parser at the pinned
release (facts in data/vllm/, extracted by extract_vllm_args.py from the release's wheel): a flag the server
does not know, a value outside its choices or of the wrong kind stops the pod at start on a real cluster."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest

from infra.core.project import load_project, stack_config
from infra.kinds import load
from infra.serving import engine, manifests, servers
from infra.serving.spec import ModelSpec
from tests.helpers import ROOT

DATA = Path(__file__).parent / "data" / "vllm"
# Server images whose vLLM release the tag tells: vLLM's own (vllm/vllm-openai:v<release>) and the AWS Neuron
# DLC (pytorch-inference-vllm-neuronx:<release>-neuronx-..., vLLM-Neuron on that release).
RELEASE_TAGS = (
    re.compile(r"(?:^|/)vllm/vllm-openai:v([0-9]+\.[0-9]+\.[0-9]+)$"),
    re.compile(r"/neuron/pytorch-inference-vllm-neuronx:([0-9]+\.[0-9]+\.[0-9]+)-neuronx-"),
)


def vllm_release(image: str) -> str | None:
    """The vLLM release a known server image runs, or None for an image we cannot tell."""
    for pattern in RELEASE_TAGS:
        if found := pattern.search(image):
            return found.group(1)
    return None


def text_or_object(value: str) -> Any:
    """A text option as vLLM's own type functions read it: from 0.10 a `dict[str, Any]` field (--additional-config)
    takes text or a JSON object (arg_utils.union_dict_and_str, 0.33.0 and 0.16.0: a value that looks like {...} is
    parsed as JSON), which the extraction records as the widest kind, text."""
    return json.loads(value) if re.match(r"(?s)^\s*{.*}\s*$", value) else value


KINDS = {"int": int, "float": float, "str": text_or_object, "json": json.loads}


class Refused(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # raise, never exit
        raise Refused(message)


def facts(release: str) -> dict[str, Any]:
    path = DATA / f"vllm-{release}.json"
    assert path.exists(), f"no facts for vLLM {release}: run tests/contracts/extract_vllm_args.py with its wheel"
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def vllm_parser(release: str) -> Parser:
    spec = facts(release)
    parser = Parser(prog=f"vllm-{release}", add_help=False, allow_abbrev=spec["allowAbbrev"])
    for option in spec["options"]:
        if option["kind"] == "flag":
            # Each spelling stores what vLLM's own parser stored for it (an --enable-X/--disable-X pair: True and
            # False); facts from before that was recorded are plain store-true flags.
            sets = option.get("sets") or dict.fromkeys(option["options"], True)
            for spelling, value in sets.items():
                parser.add_argument(spelling, dest=option["dest"], action="store_const", const=value)
            continue
        parser.add_argument(
            *option["options"],
            dest=option["dest"],
            nargs=option["nargs"],
            choices=option["choices"],
            type=KINDS[option["kind"]],
        )
    return parser


def demo_models() -> list[tuple[str, ModelSpec]]:
    project = load_project(ROOT)
    found = []
    for stack in ("serving-demo", "serving-gcp-demo"):
        config = load(stack_config(project, stack))
        found += [(stack, model) for model in config.serving.models]  # type: ignore[union-attr]
    return found


MODELS = demo_models()


@pytest.mark.parametrize(("stack", "model"), MODELS, ids=[f"{s}:{m.name}" for s, m in MODELS])
def test_demo_servers_parse_with_their_vllm_release(stack, model):
    release = vllm_release(model.image)
    assert release, f"{model.image}: no known vLLM release"
    container = manifests.deployment(model, "models", manifests.Registry("bucket", "us-east-1"))["spec"]["template"][
        "spec"
    ]["containers"][0]
    assert container["command"] == servers.server_command(model)
    parsed = vllm_parser(release).parse_args(container["args"])
    spec = facts(release)
    for name, known in (("load_format", "loadFormats"), ("quantization", "quantizationMethods")):
        value = getattr(parsed, name, None)
        if value is not None and known in spec:  # from 0.10 the parser leaves these to the engine's registries
            assert value in spec[known], f"--{name.replace('_', '-')} {value}: vLLM {release} knows {spec[known]}"
    # Every engine setting arrives as the engine keyword the compile and smoke test use (one source).
    settings = engine.engine_settings(model).keywords()
    assert {key: getattr(parsed, key) for key in settings} == settings
    assert parsed.served_model_name == [model.name] and parsed.port == servers.PORT


# The releases the demo stacks and the recipes' default images pin, with the accelerators each serves.
PINNED = {"0.33.0": ("g5",), "0.16.0": ("inf2",)}


@pytest.mark.parametrize("release", sorted(PINNED))
def test_engine_keywords_are_engine_args_of_the_release(release):
    fields = set(facts(release)["engineArgs"])
    for accelerator in PINNED[release]:
        model = ModelSpec.model_validate({"name": "m", "version": "1", "accelerator": accelerator, "image": "i:1"})
        assert set(engine.engine_settings(model).keywords()) <= fields


def test_the_rebuilt_parser_refuses_what_vllm_refuses():
    parser = vllm_parser("0.9.1")
    for bad, said in (
        (["--gcs-bucket", "b"], "unrecognized"),
        (["--load-format", "gcs_streamer"], "invalid choice"),
        (["--max-num-seqs", "eight"], "invalid int value"),
        (["--override-neuron-config", "{not json"], "invalid loads value"),
    ):
        with pytest.raises(Refused, match=said):
            parser.parse_args(["--model", "/m", *bad])
    current = vllm_parser("0.33.0")
    for bad, said in (
        (["--device", "neuron"], "ambiguous option: --device could match"),  # gone: the platforms are plugins
        (["--override-neuron-config", "{}"], "unrecognized"),
        (["--max-model-len", "long"], "invalid int value"),
        (["--dtype", "bf16"], "invalid choice"),
    ):
        with pytest.raises(Refused, match=said):
            current.parse_args(["--model", "/m", *bad])


def test_the_neuron_releases_parser_takes_the_plugins_settings_and_refuses_the_forks():
    """vLLM 0.16.0 (the Neuron DLC's, with the vllm-neuron plugin): the fork's --device and --override-neuron-config
    are gone; the NeuronConfig overrides travel in --additional-config, parsed as JSON."""
    parser = vllm_parser("0.16.0")
    for bad, said in (
        (["--device", "neuron"], "unrecognized|ambiguous"),
        (["--override-neuron-config", "{}"], "unrec"),
    ):
        with pytest.raises(Refused, match=said):
            parser.parse_args(["--model", "/m", *bad])
    parsed = parser.parse_args(
        ["--model", "/m", "--additional-config", '{"override_neuron_config": {"quantized": true}}',
         "--no-enable-prefix-caching", "--num-gpu-blocks-override", "8"]
    )  # fmt: skip
    assert parsed.additional_config == {"override_neuron_config": {"quantized": True}}
    assert parsed.enable_prefix_caching is False and parsed.num_gpu_blocks_override == 8


def test_enable_disable_pairs_store_what_vllm_stores():
    parser = vllm_parser("0.33.0")
    assert parser.parse_args(["--model", "/m", "--disable-log-requests"]).enable_log_requests is False
    assert parser.parse_args(["--model", "/m", "--enable-log-requests"]).enable_log_requests is True


@pytest.mark.parametrize("release", sorted(PINNED))
def test_the_metrics_the_autoscalers_and_the_drain_read_are_exported(release):
    """The KEDA and HPA queries, the preStop drain and the twin read these names (servers.py); the facts list what
    the release's metrics module defines (0.9.1: upstream's, which the Neuron DLC's fork is built on)."""
    exported = set(facts(release)["metrics"])
    assert {servers.QUEUE_METRIC, servers.RUNNING_METRIC} <= exported
    assert exported & set(servers.KV_CACHE_METRICS)


def test_server_images_name_their_release():
    assert vllm_release("docker.io/vllm/vllm-openai:v0.33.0") == "0.33.0"
    assert vllm_release("vllm/vllm-openai:v0.9.1") == "0.9.1"
    assert (
        vllm_release("public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04")
        == "0.16.0"
    )
    assert vllm_release("registry.example.com/own/vllm:latest-build") is None
