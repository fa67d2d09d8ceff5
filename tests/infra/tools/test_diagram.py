"""The stacks picture: SVG and PNG files that really render, every component of the demo stacks labelled,
and the registry bridge read from what the stacks declare."""

from __future__ import annotations

import os
import shutil
import struct
import xml.etree.ElementTree as ET

import pytest

from infra.cli import main
from infra.tools.diagram.bridge import accesses
from infra.tools.diagram.cli import stacks_with_references
from infra.tools.diagram.dot import to_dot, write
from infra.tools.diagram.graph import DEMO_STACKS, build

BUCKET = "mlinfra-registry-123456789012-us-east-1"


def needs_dot():
    if shutil.which("dot") is None:
        if os.environ.get("CI") == "true":  # .ci/run installs it
            pytest.fail("Graphviz's dot is missing; .ci/run installs it")
        pytest.skip("Graphviz's dot is not installed (apt-get install graphviz)")


@pytest.fixture(scope="module")
def previews():
    return stacks_with_references(list(DEMO_STACKS))


def component_labels(previews) -> set[tuple[str, str]]:
    """(noun, name) of every component the demo stacks declare, read from the previews directly."""
    return {
        (s.type.rsplit(":", 1)[-1], s.name)
        for p in previews
        for s in p.steps
        if not s.custom and s.type.startswith("mlinfra:")
    }


def test_default_picture_is_the_three_demo_stacks(previews):
    assert [p.stack for p in previews] == list(DEMO_STACKS)
    assert len(component_labels(previews)) >= 10


def test_svg_is_valid_xml_and_labels_every_component(tmp_path, capsys, previews):
    needs_dot()
    out = tmp_path / "stacks.svg"
    assert main(["diagram", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    for noun, name in component_labels(previews):
        assert noun in texts and name in texts, (noun, name)
    for stack in DEMO_STACKS:
        assert stack in texts
    joined = " ".join(texts)
    assert "writes checkpoints/, runs/" in joined and "reads models/" in joined and "/h" in joined


def test_png_has_a_png_signature_and_a_real_size(tmp_path):
    needs_dot()
    out = tmp_path / "stacks.png"
    assert main(["diagram", "--out", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 400 and height > 200


def test_one_stack_brings_the_stacks_it_references(tmp_path):
    out = tmp_path / "serving.dot"
    assert main(["diagram", "--stack", "serving-demo", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "cluster_0" in text and "ModelRegistry" in text and "training-demo" not in text
    assert 'label="reads models/"' in text


def test_bridge_edges_come_from_grants_and_data_repository_associations(previews):
    graph = build(previews)
    bridge = {
        (
            e.src.split("/")[0],
            e.src.rsplit("/", 2)[-2].rsplit(":", 1)[-1],
            e.dst.split("/")[0],
            e.dst.rsplit("/", 2)[-2].rsplit(":", 1)[-1],
            e.kind,
            e.label,
        )
        for e in graph.edges
        if e.kind in ("writes", "reads", "both")
    }
    assert (
        "training-demo",
        "NodeRole",
        "registry",
        "ModelRegistry",
        "both",
        "writes checkpoints/, runs/\nreads datasets/",
    ) in bridge
    assert (
        "training-demo",
        "RunFileSystem",
        "registry",
        "ModelRegistry",
        "both",
        "exports checkpoints/\nimports datasets/",
    ) in bridge
    served = {e for e in bridge if e[2] == "serving-demo"}
    assert {(e[3], e[4], e[5]) for e in served} == {("ModelServer", "reads", "reads models/")}
    # In serving, only the model converter writes to the registry (models/), reading checkpoints/ (conversion)
    # and datasets/evals/ (the quality gate's evaluation), shown under datasets/.
    assert {e[1:] for e in bridge if e[0] == "serving-demo"} == {
        ("ModelConverter", "registry", "ModelRegistry", "both", "writes models/\nreads checkpoints/, datasets/")
    }


def test_dependency_edges_are_reduced_and_stay_inside_a_stack(previews):
    depends = [e for e in build(previews).edges if e.kind == "depends"]
    assert depends and all(e.src.split("/")[0] == e.dst.split("/")[0] for e in depends)
    pairs = {(e.src, e.dst) for e in depends}
    vpc, eks = (
        "serving-demo/mlinfra:serving:ServingVpc/serving-net",
        "serving-demo/mlinfra:serving:EksCluster/serving-eks",
    )
    assert (vpc, eks) in pairs
    assert (vpc, "serving-demo/mlinfra:serving:ServingNodePool/pool-g5") not in pairs  # implied via the cluster


def test_dot_escapes_labels():
    from infra.tools.diagram.graph import Cluster, Edge, Graph, Node

    graph = Graph(
        (Cluster("s", "training", 'a "quote" & <tag>', (Node("s/n", "T<x>", "n&m", "1 resource"),)),),
        (Edge("s/n", "s/n", "depends", 'say "hi"\nthere'),),
    )
    text = to_dot(graph)
    assert "&lt;tag&gt;" in text and "T&lt;x&gt;" in text and "n&amp;m" in text and 'say \\"hi\\"\\nthere' in text


def test_accesses_read_policies_and_associations():
    policy = {
        "policy": '{"Statement": [{"Effect": "Allow", "Action": ["s3:GetObject"], '
        f'"Resource": ["arn:aws:s3:::{BUCKET}/models/x/1/cuda/*"]}}, '
        '{"Effect": "Deny", "Action": "s3:PutObject", '
        f'"Resource": "arn:aws:s3:::{BUCKET}/datasets/*"}}]}}'
    }
    assert [(a.root, a.mode) for a in accesses("u", "aws:iam/rolePolicy:RolePolicy", policy, {BUCKET})] == [
        ("models/", "reads")
    ]
    assert accesses("u", "aws:iam/rolePolicy:RolePolicy", policy, {"another-bucket"}) == []
    dra = {"dataRepositoryPath": f"s3://{BUCKET}/checkpoints/run-1/", "s3": {"autoExportPolicy": {"events": ["NEW"]}}}
    assert [
        (a.root, a.mode)
        for a in accesses("u", "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", dra, {BUCKET})
    ] == [("checkpoints/", "exports")]


@pytest.mark.parametrize(
    "out, message",
    [
        ("stacks.jpg", "error: --out: 'stacks.jpg' must end in .svg, .png, .dot"),
        ("missing-dir/stacks.svg", "error: --out: directory"),
    ],
)
def test_bad_out_exits_2(tmp_path, capsys, out, message):
    assert main(["diagram", "--stack", "registry", "--out", str(tmp_path / out)]) == 2
    assert capsys.readouterr().err.startswith(message)


def test_missing_graphviz_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("infra.tools.diagram.dot.shutil.which", lambda name: None)
    assert main(["diagram", "--stack", "registry", "--out", str(tmp_path / "x.svg")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out: .svg needs Graphviz's `dot`") and len(err.strip().splitlines()) == 1


def test_docs_picture_is_current(previews):
    """docs/stacks.svg (shown in the README) is rendered from the current previews: regenerate with
    `python -m infra diagram --out docs/stacks.svg` after changing a demo stack's components."""
    from tests.helpers import ROOT

    texts = {t.text for t in ET.parse(ROOT / "docs" / "stacks.svg").getroot().iter("{http://www.w3.org/2000/svg}text")}
    missing = [label for pair in component_labels(previews) for label in pair if label not in texts]
    assert not missing, f"docs/stacks.svg lacks {missing}; regenerate it"


def test_a_dot_that_fails_on_the_shared_rank_is_drawn_without_it(tmp_path, monkeypatch):
    """Graphviz 2.43 fails with "trouble in init_rank" on some cross-cluster `rank=same` orders: the picture
    is still drawn, without the hint, and any other failure still surfaces."""
    fake = tmp_path / "dot"
    fake.write_text(
        "#!/bin/sh\n"
        "input=$(cat)\n"
        'case "$input" in *"rank=same"*) echo "Error: trouble in init_rank" >&2; exit 1;; esac\n'
        'case "$input" in *broken*) echo "syntax error" >&2; exit 1;; esac\n'
        'printf "%s" "$input" > "$3"\n',
        encoding="utf-8",
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    out = tmp_path / "picture.svg"
    write('digraph g {\n  a -> b;\n  { rank=same; "a" "b"; }\n}\n', out)
    assert out.read_text(encoding="utf-8") == "digraph g {\n  a -> b;\n}"  # $(cat) drops the last newline
    with pytest.raises(RuntimeError, match="syntax error"):
        write("digraph broken {\n}\n", out)


def test_a_referenced_stack_is_previewed_once(monkeypatch):
    """serving-demo's preview previews the registry to resolve its StackReference; the picture draws that one."""
    import infra.tools.offline.engine as engine

    previewed: list[str] = []
    real = engine.preview

    def counted(stack, *args, **kwargs):
        previewed.append(stack)
        return real(stack, *args, **kwargs)

    monkeypatch.setattr(engine, "preview", counted)
    found = stacks_with_references(["serving-demo"])
    assert [p.stack for p in found] == ["serving-demo", "registry"]
    assert sorted(previewed) == ["registry", "serving-demo"]
    assert not any(p.errors for p in found)
