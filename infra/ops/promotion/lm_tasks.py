"""Task scores of one model by lm-evaluation-harness, the quality gate's task half (a program; it runs where
lm-eval is installed: the converter environment, images/converter/requirements.txt).

    python3 lm_tasks.py --model DIR --data DIR --out scores.json

The evaluation data prefix (datasets/evals/<name>/) names the tasks. With an `lm-eval/` directory, its task
YAMLs (lm-eval's own format, their data files beside them, referenced relative to it) and `lm-eval/tasks.json`,
`{"tasks": [names], "limit": n}` (limit optional: the first n documents of each), are what is run: the tasks a
team keeps for the model. Without one, the default set is the prefix's own tasks.jsonl as one lm-eval task,
`mlinfra_exact_match`: greedy generation from each prompt until a newline (at most 32 tokens), exact match with
the answer. Nothing is downloaded: tasks read their local files only (offline, as the Job's pod is).

With --serve (the engine flags of the model's server, a JSON list), the model is scored as it is served: the
program starts `vllm serve` on it (the image's own vLLM, on the Job's accelerator) at 127.0.0.1, waits for its
/health, and gives lm-eval's OpenAI-compatible client (`local-completions`: token ids in, echoed log-probabilities
and greedy generations out) its /v1/completions, the model directory's tokenizer on the client side; the server
is stopped before the program ends. Without it, the model is loaded as evaluate.py loads it (transformers; a
compressed-tensors artefact decompressed) and given to lm-eval's Hugging Face backend as an object.

scores.json: per task its numeric metrics (lm-eval's
`<metric>,<filter>` keys), the number of documents, and `higherIsBetter` per metric; the gate compares the
reference's and the variant's (evaluate.py --task-scores, quality.py).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

DEFAULT_TASK = "mlinfra_exact_match"
TASKS_FILE = "tasks.json"
LM_EVAL_DIR = "lm-eval"
_DEFAULT_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{answer}}}}"
target_delimiter: ""
generation_kwargs:
  until: ["\\n"]
  do_sample: false
  max_gen_toks: 32
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


SERVED_NAME = "mlinfra-candidate"  # the model's name on the Job's own server
SERVER_PORT = 8011  # inside the pod, where nothing else listens (--serve-port)


class BadTasks(ValueError):
    pass


class EngineDidNotStart(RuntimeError):
    pass


def start_server(
    model: str, flags: list[str], wait_seconds: float, log_path: str, port: int = SERVER_PORT
) -> subprocess.Popen[bytes]:
    """`vllm serve` on `model` with the server's engine flags, once its /health answers; EngineDidNotStart with the
    end of its log when it exits or does not answer in time."""
    command = ["vllm", "serve", model, "--served-model-name", SERVED_NAME, "--host", "127.0.0.1",
               "--port", str(port), *flags]  # fmt: skip
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)  # --work: made only for the default task otherwise
    with open(log_path, "wb") as log:  # the server keeps its own handle on it
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
                if answer.status == 200:
                    return server
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            stop_server(server)
            with open(log_path, "rb") as written:
                tail = written.read()[-4000:].decode(errors="replace")
            why = f"exited with {server.returncode}" if server.returncode is not None else "did not answer in time"
            raise EngineDidNotStart(f"vllm serve {model} {why}:\n{tail}")
        time.sleep(2)


def stop_server(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _sibling(name: str) -> ModuleType:
    return importlib.import_module(f"{__package__}.{name}" if __package__ else name)


def task_set(data: Path, work: Path) -> tuple[list[str], Path, int | None]:
    """(task names, lm-eval include path, limit) for the data prefix `data`; the default task's YAML goes to `work`."""
    own = data / LM_EVAL_DIR
    if own.is_dir():
        listing = own / TASKS_FILE
        try:
            spec = json.loads(listing.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise BadTasks(f"{listing}: {error}") from None
        names, limit = spec.get("tasks") if isinstance(spec, dict) else None, spec.get("limit")
        if not (isinstance(names, list) and names and all(isinstance(n, str) and n for n in names)):
            raise BadTasks(f'{listing}: needs "tasks", a list of lm-eval task names')
        if limit is not None and not (isinstance(limit, int) and limit >= 1):
            raise BadTasks(f'{listing}: "limit" must be a whole number of documents, at least 1')
        return names, own, limit
    tasks = data / "tasks.jsonl"
    if not tasks.is_file():
        raise BadTasks(f"{data}: no {LM_EVAL_DIR}/ and no tasks.jsonl: nothing to score")
    _sibling("evaluate").read_jsonl(tasks, ("prompt", "answer"))  # a bad line exits 2 naming file and line
    work.mkdir(parents=True, exist_ok=True)
    yaml = _DEFAULT_YAML.format(name=DEFAULT_TASK, data=json.dumps(str(tasks.resolve())))
    (work / f"{DEFAULT_TASK}.yaml").write_text(yaml, encoding="utf-8")
    return [DEFAULT_TASK], work, None


def scores(results: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """lm-eval's results, per task: its numeric metrics (no standard errors), documents and directions."""
    found = {}
    for name in names:
        figures = results["results"].get(name)
        if figures is None:
            raise BadTasks(f"lm-eval ran no task {name}")
        metrics = {
            key: float(value)
            for key, value in figures.items()
            if "," in key and "_stderr" not in key and isinstance(value, int | float) and not isinstance(value, bool)
        }
        better = results.get("higher_is_better", {}).get(name, {})
        found[name] = {
            "metrics": metrics,
            "documents": int(results.get("n-samples", {}).get(name, {}).get("effective", 0)),
            "higherIsBetter": {key: bool(better.get(key.split(",")[0], True)) for key in metrics},
        }
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="task scores of one model by lm-evaluation-harness")
    parser.add_argument("--model", required=True, help="a Hugging Face directory (the reference or the variant)")
    parser.add_argument("--data", required=True, type=Path, help="the evaluation data prefix")
    parser.add_argument("--out", required=True, type=Path, help="scores.json to write")
    parser.add_argument("--work", type=Path, help="where the default task is written (default: beside --out)")
    parser.add_argument(
        "--serve", type=json.loads, help="score the model served by vLLM with these engine flags (a JSON list)"
    )
    parser.add_argument("--serve-wait", type=float, default=1800.0, help="seconds the engine may take to start")
    parser.add_argument("--serve-port", type=int, default=SERVER_PORT, help="the engine's port on 127.0.0.1")
    args = parser.parse_args(argv)
    evaluate = _sibling("evaluate")
    try:
        names, include, limit = task_set(args.data, args.work or args.out.parent / "lm-eval-tasks")
    except (BadTasks, evaluate.BadEvaluationData) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HOME", str(args.out.parent / "hf-home"))  # the datasets cache, in the work volume
    import lm_eval
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(include), include_defaults=False)
    unknown = [n for n in names if n not in manager.all_tasks]
    if unknown:
        print(f"error: {include}: no lm-eval task {', '.join(unknown)} there", file=sys.stderr)
        return 2
    if args.serve is None:
        from lm_eval.models.huggingface import HFLM

        model, tokenizer, device = evaluate.transformers_model(args.model)
        lm: Any = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=1, device=device)
        results = lm_eval.simple_evaluate(model=lm, tasks=names, task_manager=manager, limit=limit, log_samples=False)
    else:
        try:
            log = str((args.work or args.out.parent) / "vllm-serve.log")
            flags = [str(flag) for flag in args.serve]
            server = start_server(args.model, flags, args.serve_wait, log, args.serve_port)
        except EngineDidNotStart as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        try:
            results = lm_eval.simple_evaluate(
                model="local-completions",
                model_args={
                    "base_url": f"http://127.0.0.1:{args.serve_port}/v1/completions",
                    "model": SERVED_NAME,
                    "tokenizer": args.model,
                    "tokenizer_backend": "huggingface",
                    "tokenized_requests": True,
                    "num_concurrent": 1,
                    "max_retries": 3,
                },
                tasks=names,
                task_manager=manager,
                limit=limit,
                log_samples=False,
            )
        finally:
            stop_server(server)
    found = scores(results, names)
    report = {"lmEval": lm_eval.__version__ if hasattr(lm_eval, "__version__") else "unknown", "tasks": found}
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
