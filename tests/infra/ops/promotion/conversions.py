"""The conversion tests' shared artefacts (one module, so that test_quantised_conversion.py and test_awq.py share
its caches: pytest imports test modules under another name): the tiny Llama's checkpoint, calibration data, AWQ
scales and artefacts, each written once per session root by the programs run as the Jobs run them."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from infra.ops.promotion import quantize
from tests.infra.ops.promotion import tiny_llama

# The programs run on one thread wherever they run (directly here, or through a Job's script with its own bare
# environment): AWQ's search picks each scale by the smallest of several float sums, and a sum's last bits follow
# the thread count, so two runs under different counts could pick differently where two candidates tie.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# What else picks torch's kernels (the CPU capability, BLAS's reproducibility mode and threading): a run with a bare
# environment gets the same as the direct run.
KERNEL_VARIABLES = ("OMP_", "MKL_", "KMP_", "OPENBLAS_", "ATEN_CPU_CAPABILITY")


def kernel_env() -> dict[str, str]:
    """This process's kernel-choosing variables, on one thread: for a program run with an otherwise bare env."""
    return {**{k: v for k, v in os.environ.items() if k.startswith(KERNEL_VARIABLES)}, **ONE_THREAD}


PROGRAM = Path(quantize.__file__)
SCHEMES = {"cuda-fp8": "fp8", "cuda-int8": "int8", "cuda-int4": "int4"}
AWQ_BUILT = {"cuda-int4"}  # variants whose recipe folds AWQ's scales in
JOB_PROGRAMS = ("quantize.py", "awq.py", "evaluate.py")  # what the cuda-int4 Job writes into /work


@functools.cache
def checkpoint(root: Path) -> Path:
    model, text = tiny_llama.trained()
    path = root / "checkpoint"
    tiny_llama.save_checkpoint(model, text, path)
    return path


def calibration_lines() -> list[str]:
    """The calibration data: the training distribution's lines (prose and facts), one of each."""
    _, text = tiny_llama.trained()
    return [line for line in text.train.splitlines() + text.facts if line.strip()]


@functools.cache
def calibration(root: Path) -> Path:
    """A datasets/calibration/<name>/ prefix as the Job fetches it: calibration.jsonl."""
    path = root / "calibration"
    path.mkdir()
    (path / "calibration.jsonl").write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in calibration_lines()), encoding="utf-8"
    )
    return path


def programs(work: Path, names: tuple[str, ...] = ("quantize.py",)) -> Path:
    """The program files alone, in a directory of their own, as the Job writes them."""
    work.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(PROGRAM.with_name(name), work / name)
    return work


@functools.cache
def awq_scales(root: Path) -> tuple[Path, dict[str, object]]:
    """AWQ's scales of the tiny checkpoint on the calibration data, by awq.py run as the Job runs it."""
    work = programs(root / "program-awq", JOB_PROGRAMS)
    done = subprocess.run(
        [sys.executable, str(work / "awq.py"), "--checkpoint", str(checkpoint(root)), "--calibration",
         str(calibration(root)), "--out", str(root / "awq-scales.safetensors")],
        capture_output=True, text=True, check=False, cwd=work, env={**os.environ, **ONE_THREAD},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root / "awq-scales.safetensors", json.loads(done.stdout.strip().splitlines()[-1])


@functools.cache
def converted(root: Path, scheme: str, shard_bytes: int = 1 << 30, awq: bool = False) -> tuple[Path, dict[str, object]]:
    """The artefact, written by the program as the Job runs it (with AWQ's scales folded in when `awq`)."""
    work = programs(root / f"program-{scheme}-{shard_bytes}-{awq}")
    out = root / f"out-{scheme}-{shard_bytes}-{'awq' if awq else 'rtn'}"
    scales = ["--scales", str(awq_scales(root)[0])] if awq else []
    done = subprocess.run(
        [sys.executable, str(work / "quantize.py"), "convert", "--scheme", scheme, "--checkpoint",
         str(checkpoint(root)), "--out", str(out), "--shard-bytes", str(shard_bytes), *scales],
        capture_output=True, text=True, check=False, cwd=work, env={**os.environ, **ONE_THREAD},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out, json.loads(done.stdout.strip().splitlines()[-1])


def built(root: Path, variant: str) -> tuple[Path, dict[str, object]]:
    """The variant's artefact as its recipe builds it."""
    return converted(root, SCHEMES[variant], awq=True) if variant in AWQ_BUILT else converted(root, SCHEMES[variant])
