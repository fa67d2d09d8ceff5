"""Every command mlinfra runs in an image, against what that image's Dockerfile installs (facts in
data/images.json, with the Dockerfile's repository, path and commit): a program or Python module the image
lacks fails the pod at start on a real cluster, as `optimum-cli` did in the Neuron DLC."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.core.project import load_project, stack_config
from infra.kinds import load
from infra.ops.promotion import evaluation, jobs
from infra.ops.promotion.recipes import CONVERTER_PYTHON, RECIPES, VARIANTS
from infra.ops.promotion.sizing import Resources
from infra.serving import manifests
from infra.serving.spec import ModelSpec
from infra.serving.variants import facts
from tests.helpers import ROOT

IMAGES: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "images.json").read_text(encoding="utf-8"))[
    "images"
]
SHELL_WORDS = {
    "set", "unset", "umask", "echo", "exit", "exec", "export", "case", "esac", "for", "in", "done", "do",
    "if", "then", "else", "fi", "[", "test", "true", "false", ":", "{", "}", "!", "while", "break", "return",
    "until", "continue", "trap", "wait",
}  # fmt: skip
KEYWORDS = re.compile(r"^(?:(?:then|do|else|exec|if|while|until|!|\{)\s+)+")
ASSIGNMENTS = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+")
HEREDOC = re.compile(r"<<'?(\w+)'?\n(.*?)\n\1\n", re.S)
IMPORT_LINES = re.compile(r"(?:^|[;'\"])\s*(?:from\s+([A-Za-z_]\w*)|import\s+([\w., ]+))", re.M)
CONVERTER_IMAGE = "mlinfra-converter:0.33.0-llmc0.14.0.1"  # images/converter/Dockerfile, as its comment tags it


def imported(code: str) -> set[str]:
    """Top-level modules of `import a, b as c` and `from a import b` statements."""
    found = set()
    for module, names in IMPORT_LINES.findall(code):
        found |= {module} if module else {n.strip().split(" ")[0].split(".")[0] for n in names.split(",") if n.strip()}
    return found


def programs(container: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(programs, Python modules) a container's command runs."""
    command = container["command"]
    found, modules = {command[0].rsplit("/", 1)[-1]}, set()
    if command[0] in ("/bin/sh", "sh") and command[1] == "-c":
        script = command[2]
        for _, body in HEREDOC.findall(script):
            if "import " in body:
                modules |= imported(body)
        script = HEREDOC.sub("\n", script)
        modules |= {m for chunk in re.findall(r"python3 -c '([^']*)'", script) for m in imported(chunk)}
        found |= shell_commands(script)
    elif command[:2] == ["python3", "-c"]:
        modules |= imported(command[2])
    elif command[:2] == ["python3", "-m"]:
        modules.add(command[2].split(".")[0])
    for c in container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])[:1]:
        found.add(c)
    return found, modules - set(sys.stdlib_module_names)


def shell_commands(script: str) -> set[str]:
    """The programs a /bin/sh script calls: the first word of every simple command, its own and those inside
    $(...), after its variable assignments and the shell's keywords; quoted text and redirections are data."""
    script = re.sub(r"'[^']*'", "''", script)
    script = script.replace("$(", "\n")
    script = re.sub(r'"[^"\n]*"', '""', script)
    script = re.sub(r"\d*>&\d+|\d*>>?\s*\S+|<\s*\S+", " ", script)
    script = re.sub(r"(?m)^\s*[^\s()]+\)", " ", script)  # case labels
    words = set()
    for segment in re.split(r"&&|\|\||;;?|\||\n", script):
        segment = ASSIGNMENTS.sub("", KEYWORDS.sub("", segment.strip()))
        word = segment.split(" ", 1)[0].strip('")')
        if word and "=" not in word and word not in SHELL_WORDS and not word.startswith(("$", "/work/")):
            words.add(word.rsplit("/", 1)[-1])
    return words


def containers() -> list[tuple[str, dict[str, Any]]]:
    """Every container of the demo servers, of their evaluation Jobs and of each variant's conversion Job."""
    project = load_project(ROOT)
    found = []
    for stack, scheme in (("serving-demo", "s3"), ("serving-gcp-demo", "gs")):
        config = load(stack_config(project, stack))
        for model in config.serving.models:  # type: ignore[union-attr]
            pod = manifests.deployment(model, "models", manifests.Registry("b", "us-east-1", scheme))["spec"][
                "template"
            ]["spec"]
            found += [
                (f"{stack}:{model.name}:{c['name']}", c) for c in pod.get("initContainers", []) + pod["containers"]
            ]
            if scheme == "s3":  # the quality gate's evaluation Job runs in the server's image, on its pool
                job = evaluation.evaluation_job(
                    bucket="b", bucket_arn="arn:aws:s3:::b", key_arn="arn:aws:kms:us-east-1:123456789012:key/k",
                    role_arn="arn:aws:iam::123456789012:role/r", region="us-east-1", ns="models",
                    checkpoint="checkpoints/r/s/", checkpoint_bytes=1 << 30, evaluation="datasets/evals/e/",
                    model="m", version="1", variant=model.artefact_variant, run_id="r", server=model,
                )  # fmt: skip
                pod = job["spec"]["template"]["spec"]
                found += [
                    (f"evaluate:{stack}:{model.name}:{c['name']}", c) for c in pod["initContainers"] + pod["containers"]
                ]
    for variant in VARIANTS:
        server = ModelSpec.model_validate(
            {
                "name": "m",
                "version": "1",
                "accelerator": RECIPES[variant].accelerator,
                "image": RECIPES[variant].default_image,
            }
        )
        job = jobs.conversion_job(
            bucket="b", bucket_arn="arn:aws:s3:::b", key_arn="arn:aws:kms:us-east-1:123456789012:key/k",
            role_arn="arn:aws:iam::123456789012:role/r", region="us-east-1", ns="models", checkpoint="checkpoints/r/s/",
            model="m", version="1", variant=variant, run_id="r", resources=Resources(1, 1, 1, 1), server=server,
            calibration="datasets/calibration/c/" if facts(variant).calibrated else None,
            converter_image=CONVERTER_IMAGE,
        )  # fmt: skip
        pod = job["spec"]["template"]["spec"]
        found += [(f"promote:{variant}:{c['name']}", c) for c in pod["initContainers"] + pod["containers"]]
    return found


CONTAINERS = containers()


@pytest.mark.parametrize(("where", "container"), CONTAINERS, ids=[w for w, _ in CONTAINERS])
def test_every_command_runs_what_its_image_installs(where, container):
    image = IMAGES.get(container["image"])
    assert image, f"{where}: no facts for image {container['image']} in tests/contracts/data/images.json"
    called, modules = programs(container)
    assert called <= set(image["executables"]), f"{where} calls {sorted(called - set(image['executables']))}"
    assert modules <= set(image["pythonModules"]), f"{where} imports {sorted(modules - set(image['pythonModules']))}"
    assert not called & set(image["absent"])


def test_the_reader_finds_what_a_command_calls():
    script = {"command": ["/bin/sh", "-c", 'set -eu\nA=1 optimum-cli export x && cp a b\nx="$(jq -r . f)"\n']}
    assert programs(script)[0] == {"sh", "optimum-cli", "cp", "jq"}
    python = {"command": ["/bin/sh", "-c", "python3 -c 'import neuronxcc, torch_neuronx as t; print(1)'\n"]}
    assert programs(python) == ({"sh", "python3"}, {"neuronxcc", "torch_neuronx"})
    refused = {"command": ["/bin/sh", "-c", "set -eu\noptimum-cli export neuron --model /work/checkpoint /work/out\n"]}
    assert "optimum-cli" in programs(refused)[0]  # the old Neuron conversion, which the DLC cannot run


# A full commit, or the abbreviated one a release wheel's setuptools-scm version file records (vLLM 0.33.0: 9 digits).
COMMIT = r"[0-9a-f]{40}|[0-9a-f]{9,39}"


def test_every_fact_names_its_dockerfile():
    for name, image in IMAGES.items():
        if image["source"]["repository"] == "this repository":  # built by the user from a Dockerfile of this tree
            assert (ROOT / image["source"]["path"]).is_file(), name
            continue
        assert image["source"]["repository"].startswith("https://github.com/")
        assert re.fullmatch(COMMIT, image["source"]["commit"]), name
        assert image["source"]["path"].rsplit("/", 1)[-1].startswith("Dockerfile"), name


def test_a_tagged_images_facts_name_that_tags_commit():
    """Facts for an image pinned by tag name the tag and its commit, so a bump of the pin cannot keep the old
    tag's facts, and facts read elsewhere than at the tag say so in `read`."""
    for name, image in IMAGES.items():
        source = image["source"]
        if "tag" not in source:
            continue
        assert name.endswith(":" + source["tag"]), name
        assert re.fullmatch(COMMIT, source["tagCommit"]), name
        if source["commit"] != source["tagCommit"]:
            assert source["read"].startswith("NOT the tag"), name
    vllm = [name for name in IMAGES if re.search(r"(?:^|/)vllm/vllm-openai:v", name)]
    assert vllm and all("tag" in IMAGES[name]["source"] for name in vllm)


def test_the_converter_image_is_the_cuda_server_image_plus_the_converter_environment():
    dockerfile = (ROOT / "images" / "converter" / "Dockerfile").read_text(encoding="utf-8")
    assert f"FROM {RECIPES['cuda'].default_image}\n" in dockerfile
    venv = CONVERTER_PYTHON.removesuffix("/bin/python3")
    assert f"python3 -m venv --system-site-packages {venv}" in dockerfile
    assert f"{venv}/bin/pip install --no-cache-dir -r /tmp/converter-requirements.txt" in dockerfile
    pins = (ROOT / "images" / "converter" / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert "llmcompressor==0.14.0.1" in pins and not [p for p in pins if p.startswith("torch")]
    assert CONVERTER_IMAGE.endswith("llmc0.14.0.1") and CONVERTER_IMAGE in dockerfile
