"""`python -m infra simulate`: the figures printed and the picture written, the same for the same seed; bad
input exits 2 with one line naming the flag."""

from __future__ import annotations

import json
import xml.dom.minidom

import pytest

from infra.cli import main
from infra.serving.twin import accel


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_same_seed_prints_the_same_figures_and_writes_the_picture(capsys, tmp_path):
    picture = tmp_path / "demo.svg"
    args = ("--stack", "serving-demo", "--trace", "burst", "--hours", "0.5", "--model", "mistral-7b", "--json")
    code, first, err = _run(capsys, *args, "--picture", str(picture))
    assert (code, err) == (0, "")
    again = _run(capsys, *args, "--picture", str(picture))[1]
    assert first == again
    document = json.loads(first)
    (model,) = document["models"]
    assert model["model"] == "mistral-7b"
    assert document["engine"] == accel.ENGINE in ("compiled", "python")
    assert model["requests"] == sum(
        model[k] for k in ("completed", "timedOut", "refused", "rateLimited", "killedMidRequest")
    )
    assert set(model["ttftMs"]) == {"p50", "p95", "p99"}
    assert model["costUsd"] > 0 and model["usdPerMillionOutputTokens"] > 0
    svg = xml.dom.minidom.parse(str(picture))
    assert svg.documentElement.tagName == "svg"
    assert len(svg.getElementsByTagName("polyline")) == 3


def test_text_output_names_each_figure(capsys, tmp_path):
    code, out, _ = _run(
        capsys, "--stack", "serving-demo", "--trace", "steady", "--hours", "0.25", "--model", "mistral-7b",
        "--picture", str(tmp_path / "p.svg"),
    )  # fmt: skip
    assert code == 0
    assert "TTFT p50/p95/p99:" in out and "TPOT p50/p95/p99:" in out and "per million output tokens" in out
    assert out.rstrip().endswith(f"picture: {tmp_path / 'p.svg'}\ntwin: {accel.describe()}")
    assert accel.describe().startswith(("compiled (mypyc ", "python ("))


def test_compare_against_another_configuration(capsys, tmp_path):
    code, out, _ = _run(
        capsys, "--stack", "serving-demo", "--trace", "steady", "--hours", "0.25", "--model", "mistral-7b",
        "--compare-config", "mlinfra:serving.models[1].schedule.windows[1].minReplicas=4", "--start", "mon-12:00",
        "--picture", str(tmp_path / "p.svg"),
    )  # fmt: skip
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("mistral-7b: p95 TTFT"))
    assert " -> " in line and "cost $" in line


def test_a_request_log_is_replayed(capsys, tmp_path):
    log = tmp_path / "requests.csv"
    log.write_text(
        "timestamp,prompt_tokens,output_tokens\n" + "".join(f"{i},200,50\n" for i in range(120)), encoding="utf-8"
    )
    code, out, _ = _run(
        capsys, "--stack", "serving-demo", "--trace", str(log), "--model", "mistral-7b", "--json",
        "--picture", str(tmp_path / "p.svg"), "--start", "tue-10:00",  # in its office hours
    )  # fmt: skip
    assert code == 0
    (model,) = json.loads(out)["models"]
    assert (model["requests"], model["completed"]) == (120, 120)
    assert model["outputTokens"] == 120 * 50


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("--rate", "0"), "error: --rate: 0 must be a positive number"),
        (("--rate", "inf"), "error: --rate: inf must be a positive number"),
        (("--timeout-s", "nan"), "error: --timeout-s: nan must be a positive number"),
        (("--hours", "1e6"), "error: --hours: 1e+06 is more than 8,784"),
        (
            ("--rate", "1e6"),
            "error: --rate: 1e+06 requests/s for 0.1 h is 360,000,000 requests per model; the twin runs at most "
            "20,000,000 (lower --rate or --hours)",
        ),
        (
            ("--spot-interruptions-per-node-hour", "inf"),
            "error: --spot-interruptions-per-node-hour: inf must be from 0 to 60",
        ),
        (("--callers", "0"), "error: --callers: 0 must be between 1 and 100000"),
        (("--model", "gpt"), "error: --model: gpt not in the preview; its models: llama-3-8b-neuron, mistral-7b"),
        (("--trace", "nowhere.csv"), "error: --trace: nowhere.csv: No such file or directory"),
        (
            ("--prompt-tokens", "9:3"),
            "error: --prompt-tokens: '9:3' is not MEAN:P95 tokens with 0 < MEAN <= P95 <= 10,000,000",
        ),
        (
            ("--output-tokens", "nan"),
            "error: --output-tokens: 'nan' is not MEAN:P95 tokens with 0 < MEAN <= P95 <= 10,000,000",
        ),
        (("--picture", "/no-such-dir/p.svg"), "error: --picture: directory '/no-such-dir' does not exist"),
        (("--picture", "/"), "error: --picture: '/' is a directory; name the SVG file to write"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, tmp_path, args, error):
    code, out, err = _run(capsys, "--stack", "serving-demo", "--hours", "0.1", "--picture", str(tmp_path / "p"), *args)
    assert (code, out, err.strip()) == (2, "", error)


def test_without_picture_nothing_is_written(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "--stack", "serving-demo", "--trace", "steady", "--hours", "0.1", "--json")
    assert (code, err) == (0, "")
    assert "picture" not in json.loads(out)
    code, out, _ = _run(capsys, "--stack", "serving-demo", "--trace", "steady", "--hours", "0.1")
    assert code == 0 and "picture:" not in out
    assert list(tmp_path.iterdir()) == []


def test_a_stack_without_models_to_scale_exits_2(capsys, tmp_path):
    code, _, err = _run(capsys, "--stack", "registry", "--picture", str(tmp_path / "p.svg"))
    assert (code, err.strip()) == (
        2,
        "error: --stack: no model scaled by a KEDA ScaledObject in the preview: not a serving stack",
    )


def test_a_preview_document_is_simulated_as_the_stack(capsys, tmp_path):
    from infra.tools.offline.digest import to_digest
    from infra.tools.offline.engine import preview

    document = tmp_path / "main.json"
    document.write_text(json.dumps(to_digest(preview("serving-demo")), default=str), encoding="utf-8")
    args = ("--trace", "steady", "--hours", "0.25", "--model", "mistral-7b", "--json")
    from_file = json.loads(_run(capsys, "--preview-json", str(document), *args, "--picture", str(tmp_path / "a"))[1])
    from_stack = json.loads(_run(capsys, "--stack", "serving-demo", *args, "--picture", str(tmp_path / "a"))[1])
    assert from_file["models"] == from_stack["models"]
    code, _, err = _run(capsys, "--preview-json", str(document), "--compare-config", "a=b", *args)
    assert (code, err.strip()) == (
        2,
        "error: --compare-config: overrides need --stack (a preview document is fixed); use --compare",
    )


CANARY = ("--stack", "serving-demo", "--model", "mistral-7b", "--trace", "steady", "--hours", "1", "--start",
          "mon-12:00", "--callers", "50", "--json")  # fmt: skip


def test_a_canary_of_a_deliberately_slower_version_rolls_back_at_its_first_step(capsys):
    """The new version serves 2 sequences at once instead of 256 (a misconfigured engine): at 10% of the traffic its
    TTFT p95 is far past the old's and the SLO, so the canary rolls back at its first step, the figures logged."""
    code, out, _ = _run(capsys, *CANARY, "--canary-config", "mlinfra:serving.models[1].maxNumSeqs=2")
    assert code == 0
    (state,) = json.loads(out)["canaries"]
    assert state["status"] == "rolled back" and len(state["log"]) == 1
    (step,) = state["log"]
    assert step["share"] == 10 and step["decision"] == "roll back"
    assert step["new"]["ttft_p95"] > 5 * step["old"]["ttft_p95"]
    assert any("misses the SLO" in reason for reason in step["reasons"])


def test_a_canary_of_the_same_configuration_is_promoted_step_by_step(capsys):
    code, out, _ = _run(capsys, *CANARY, "--canary-config", "mlinfra:serving.models[1].maxNumSeqs=256")
    assert code == 0
    (state,) = json.loads(out)["canaries"]
    assert state["status"] == "promoted"
    assert [(e["share"], e["decision"]) for e in state["log"]] == [(10, "go"), (50, "go"), (100, "go")]


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (("--canary-steps", "10,5,100"), "error: --canary-steps: [10, 5, 100]: the steps must increase"),
        (("--canary-steps", "10,50"), "error: --canary-steps: [10, 50]: the last step must be 100"),
        (("--canary-steps", "ten"), "error: --canary-steps: 'ten': whole percentages"),
        (("--canary-margin", "-0.1"), "error: --canary-margin: -0.1 must be from 0 to 10 (a share)"),
        (("--canary-window-s", "0"), "error: --canary-window-s: 0 must be a positive number"),
    ],
)
def test_a_canary_that_cannot_run_exits_2_naming_the_flag(capsys, flags, error):
    code, _, err = _run(capsys, *CANARY, "--canary-config", "mlinfra:serving.models[1].maxNumSeqs=8", *flags)
    assert code == 2
    assert err.splitlines()[0].startswith(error), err
