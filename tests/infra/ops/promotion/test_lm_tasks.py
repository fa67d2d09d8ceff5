"""The gate's task scores by lm-evaluation-harness, for real on the CPU: lm_tasks.py run by the converter
environment's python on the tiny Llama and on llm-compressor's variants of it, merged by evaluate.py, judged by
quality.py. A broken scale fails the gate by its task score."""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from infra.ops.promotion import evaluate, lm_tasks, quality
from tests.infra.ops.promotion.conversions import ONE_THREAD, checkpoint
from tests.infra.ops.promotion.test_llm_compressor import CONVERTER, broken_copy, compressed, eval_data


def scored(model: Path, data: Path, out: Path) -> subprocess.CompletedProcess[str]:
    assert CONVERTER.exists(), f"{CONVERTER}: the converter environment is missing; `make test` builds it"
    return subprocess.run(
        [str(CONVERTER), lm_tasks.__file__, "--model", str(model), "--data", str(data), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **ONE_THREAD, "PYTHONPATH": ""},
    )


def scores(model: Path, data: Path, out: Path) -> dict:
    done = scored(model, data, out)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8"))


@functools.cache
def reference_scores(root: Path) -> Path:
    """The reference's scores, computed once for the tests of this session's root."""
    out = root / "reference-scores.json"
    scores(checkpoint(root), eval_data(root), out)
    return out


def gate(root: Path, variant: Path, tmp_path: Path) -> tuple[dict, quality.Verdict]:
    data, reference = eval_data(root), reference_scores(root)
    candidate = scores(variant, data, tmp_path / "variant.json")
    out = tmp_path / "quality.json"
    argv = ["--reference", str(checkpoint(root)), "--variant", str(variant), "--data", str(data), "--out", str(out)]
    assert evaluate.main([*argv, "--task-scores", str(reference), str(tmp_path / "variant.json")]) == 0
    assert candidate["tasks"].keys() == {"mlinfra_exact_match"}
    figures = json.loads(out.read_text(encoding="utf-8"))
    return figures, quality.judge(figures, quality.Budget())


def test_the_default_task_scores_the_facts_as_the_builtin_exact_match_does(root, tmp_path):
    figures, verdict = gate(root, compressed(root, "int4")[0], tmp_path)
    task = figures["lmEval"]["mlinfra_exact_match"]
    assert task["metric"] == "exact_match,none" and task["documents"] == 24
    # lm-eval's generation and mlinfra's greedy continuation agree on the reference's 24 facts
    assert task["reference"] == figures["exactMatch"]["reference"] == 1.0
    assert verdict.passed, verdict.reasons


def test_a_broken_scale_fails_the_gate_by_the_task_score(root, tmp_path):
    broken = broken_copy(compressed(root, "int4")[0], tmp_path / "broken")
    figures, verdict = gate(root, broken, tmp_path)
    assert figures["lmEval"]["mlinfra_exact_match"]["drop"] > 0.5
    assert any(reason.startswith("lm-eval task mlinfra_exact_match: exact_match,none ") for reason in verdict.reasons)


def test_a_prefix_names_its_own_lm_eval_tasks_and_their_limit(root, tmp_path):
    data = tmp_path / "evals"
    data.mkdir()
    own = data / "lm-eval"
    own.mkdir()
    rows = [json.loads(line) for line in (eval_data(root) / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]
    (own / "codes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:6]), encoding="utf-8")
    yaml = lm_tasks._DEFAULT_YAML.format(name="team_codes", data=json.dumps(str(own / "codes.jsonl")))
    (own / "team_codes.yaml").write_text(yaml, encoding="utf-8")
    (own / "tasks.json").write_text(json.dumps({"tasks": ["team_codes"], "limit": 4}), encoding="utf-8")
    found = scores(checkpoint(root), data, tmp_path / "scores.json")["tasks"]
    assert list(found) == ["team_codes"] and found["team_codes"]["documents"] == 4
    (own / "tasks.json").write_text(json.dumps({"tasks": ["no_such_task"]}), encoding="utf-8")
    done = scored(checkpoint(root), data, tmp_path / "again.json")
    assert done.returncode == 2 and "no lm-eval task no_such_task there" in done.stderr


@pytest.mark.parametrize(
    ("listing", "said"),
    [
        ("{not json", "tasks.json: "),
        ('{"tasks": []}', 'needs "tasks", a list of lm-eval task names'),
        ('{"tasks": ["t"], "limit": 0}', '"limit" must be a whole number of documents, at least 1'),
    ],
)
def test_a_bad_task_listing_is_refused_with_its_file(tmp_path, listing, said):
    (tmp_path / "lm-eval").mkdir()
    (tmp_path / "lm-eval" / "tasks.json").write_text(listing, encoding="utf-8")
    with pytest.raises(lm_tasks.BadTasks, match=said):
        lm_tasks.task_set(tmp_path, tmp_path / "work")


def test_the_comparison_takes_each_tasks_first_metric_in_its_direction(tmp_path):
    def write(name: str, tasks: dict) -> Path:
        (tmp_path / name).write_text(json.dumps({"tasks": tasks}), encoding="utf-8")
        return tmp_path / name

    def task(value: float, higher: bool) -> dict:
        return {"metrics": {"m,none": value}, "documents": 10, "higherIsBetter": {"m,none": higher}}

    ref = write("r.json", {"acc": task(0.8, True), "loss": task(1.0, False)})
    var = write("v.json", {"acc": task(0.7, True), "loss": task(1.5, False)})
    compared = evaluate.task_comparison(ref, var)
    assert compared["acc"]["drop"] == pytest.approx(0.1) and compared["loss"]["drop"] == pytest.approx(0.5)
    with pytest.raises(evaluate.BadEvaluationData, match="score different tasks"):
        evaluate.task_comparison(ref, write("w.json", {"acc": task(0.7, True)}))


def test_the_jobs_evaluate_step_runs_as_written(root, tmp_path):
    """The reference Job's and then the variant Job's `evaluate` scripts for a variant llm-compressor built, run by sh
    in the converter environment with /in, /out and /tmp moved under tmp_path, the reference's results fetched into
    the variant's /in/reference as its Job fetches them: quality.json holds both halves, and it passes."""
    from infra.ops.promotion.recipes import CONVERTER_PYTHON
    from tests.infra.ops.promotion.test_evaluation_job import job, reference_job

    # the Job's engine on 127.0.0.1:8011, as in the pod: the stand-in `vllm` (the only test on that port)
    env = {"PATH": f"{standin_vllm(tmp_path)}:/usr/bin:/bin", "HOME": str(tmp_path), **ONE_THREAD}
    results = {}
    for name, built, model in (("reference", reference_job(), checkpoint(root)), ("variant", job(), None)):
        seen, out = tmp_path / name / "in", tmp_path / name / "out"
        out.mkdir(parents=True)
        shutil.copytree(model or compressed(root, "int4")[0], seen / "model")
        shutil.copytree(eval_data(root), seen / "data")
        if name == "variant":
            shutil.copytree(results["reference"], seen / "reference")
        evaluate = next(c for c in built["spec"]["template"]["spec"]["initContainers"] if c["name"] == "evaluate")
        script = evaluate["command"][-1].replace(CONVERTER_PYTHON, str(CONVERTER))
        for scratch in ("/tmp/hf-home", "/tmp/lm-eval-tasks"):
            script = script.replace(scratch, f"{tmp_path}{scratch}")
        script = script.replace("/in/", f"{seen}/").replace("/out/", f"{out}/")
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        results[name] = out
    assert sorted(p.name for p in results["reference"].iterdir() if p.suffix == ".json") == [
        "figures.json",
        "tasks.json",
    ]
    figures = json.loads((results["variant"] / "quality.json").read_text(encoding="utf-8"))
    assert set(figures) == {"perplexity", "exactMatch", "lmEval"}
    assert figures["lmEval"]["mlinfra_exact_match"]["documents"] == 24
    assert quality.judge(figures, quality.Budget()).passed


STANDIN_SERVER = Path(__file__).parent / "standin_vllm_server.py"


def standin_vllm(tmp_path: Path) -> Path:
    """A directory with a stand-in `vllm` (standin_vllm_server.py: vLLM's completions API on the CPU), for the PATH
    where the image has vLLM's own."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "vllm").write_text(f'#!/bin/sh\nexec {CONVERTER} {STANDIN_SERVER} "$@"\n', encoding="utf-8")
    (bin_dir / "vllm").chmod(0o755)
    return bin_dir


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def served(
    model: Path, data: Path, out: Path, tmp_path: Path, port: int = 0, **env: str
) -> subprocess.CompletedProcess[str]:
    """lm_tasks.py --serve with the stand-in `vllm`, on a port of its own (the tests run side by side)."""
    bin_dir = standin_vllm(tmp_path)
    flags = json.dumps(["--max-model-len", "512", "--dtype", "float32"])
    argv = [str(CONVERTER), lm_tasks.__file__, "--model", str(model), "--data", str(data), "--out", str(out),
            "--work", str(tmp_path / "work"), "--serve", flags, "--serve-wait", "120",
            "--serve-port", str(port or free_port())]  # fmt: skip
    environment = {**os.environ, **ONE_THREAD, "PYTHONPATH": "", "PATH": f"{bin_dir}:{os.environ['PATH']}", **env}
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=environment, timeout=600)


def test_served_by_its_engine_the_model_scores_what_it_scores_in_process(root, tmp_path):
    """The served path: lm-eval's OpenAI-compatible client against the Job's own server gets the task scores the
    in-process backend gets, and the server is started with the engine flags given and stopped after."""
    log = tmp_path / "server.jsonl"
    out = tmp_path / "served.json"
    port = free_port()
    done = served(checkpoint(root), eval_data(root), out, tmp_path, port, STANDIN_LOG=str(log))
    assert done.returncode == 0, done.stderr[-3000:]
    in_process = json.loads(reference_scores(root).read_text(encoding="utf-8"))["tasks"]
    assert json.loads(out.read_text(encoding="utf-8"))["tasks"] == in_process
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert entries[0]["started"] == [
        "--served-model-name", "mlinfra-candidate", "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", "512", "--dtype", "float32",
    ]  # fmt: skip
    requests = [e["request"] for e in entries[1:]]
    assert requests and all(r["model"] == "mlinfra-candidate" and r["temperature"] == 0 for r in requests)
    assert sum(e["prompts"] for e in entries[1:]) == in_process["mlinfra_exact_match"]["documents"]
    with pytest.raises(OSError):  # stopped
        import urllib.request

        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)


def test_an_engine_that_does_not_start_fails_the_step_with_its_log(root, tmp_path):
    done = served(checkpoint(root), eval_data(root), tmp_path / "s.json", tmp_path, STANDIN_FAIL="1")
    assert done.returncode == 1 and not (tmp_path / "s.json").exists()
    assert f"error: vllm serve {checkpoint(root)} exited with 1:" in done.stderr
    assert "CUDA out of memory (stand-in)" in done.stderr


def test_the_engines_log_goes_where_asked_even_when_no_default_task_made_that_directory(tmp_path, monkeypatch):
    """A prefix with its own lm-eval tasks writes no default task, so nothing has made --work yet: the engine's
    log is still written there, and an engine that dies is still reported with it."""
    monkeypatch.setenv("PATH", f"{standin_vllm(tmp_path)}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_FAIL", "1")
    log = tmp_path / "not-yet" / "vllm-serve.log"
    with pytest.raises(lm_tasks.EngineDidNotStart, match="exited with 1"):
        lm_tasks.start_server("/m", [], 60, str(log), free_port())
    assert "CUDA out of memory (stand-in)" in log.read_text(encoding="utf-8")
