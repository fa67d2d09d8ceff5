"""The tiny models' trained weights, recorded once and loaded by every test (data/trained/<name>.safetensors).

Training is where a CPU shows: 250 AdamW steps amplify the last-bit differences of another CPU's matrix kernels
(AVX2 or AVX-512, MKL's blocking) into another model, whose quantised variants then sit elsewhere against the
gate's budget (seen: an AWQ int4 variant's perplexity increase from -0.022 to +0.041 across kernels, against 0.05).
So the tests quantise and evaluate recorded weights, the same bytes on every machine; what stays CPU-dependent is
the evaluation's own rounding (about 1e-6 relative), far from every threshold. test_trained_weights.py trains from
scratch and checks the recipe still learns, with margins a CPU cannot cross.

Each file carries the fingerprint of what made it (the corpus, the steps and seed, the source of the model and of
the training loop). A file that is missing or was made by another recipe fails the test that asks for it, naming
the command that records it anew:

    .venv/bin/python -m tests.infra.ops.promotion.trained_weights
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from tests.helpers import ROOT

TRAINED = Path(__file__).resolve().parent / "data" / "trained"  # messages name it from the checkout's ROOT
RECORD = "python -m tests.infra.ops.promotion.trained_weights"
Model = TypeVar("Model", bound=nn.Module)


def fingerprint(corpus_files: Sequence[Path], steps: int, seed: int, recipe: Sequence[Any]) -> str:
    """What decides the trained weights: the corpus' bytes, steps, seed and the source of each part of `recipe`
    (the model's classes and functions, the training loop)."""
    digest = hashlib.sha256(f"steps={steps} seed={seed}\n".encode())
    for path in corpus_files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for part in recipe:
        digest.update(inspect.getsource(part).encode() + b"\0")
    return digest.hexdigest()


def load(name: str, model: Model, want: str) -> Model:
    """`model` with the recorded weights of `name`, in eval mode; fails the asking test when there are none for
    this recipe."""
    path = TRAINED / f"{name}.safetensors"
    where = path.relative_to(ROOT)
    if not path.exists():
        pytest.fail(f"{where} is missing: record it with `{RECORD}`", pytrace=False)
    with safe_open(str(path), framework="pt") as handle:
        found = (handle.metadata() or {}).get("fingerprint")
    if found != want:
        pytest.fail(
            f"{where} was trained by another recipe (corpus, steps, seed or the model's source changed): "
            f"record it anew with `{RECORD}`",
            pytrace=False,
        )
    model.load_state_dict(load_file(str(path)))
    return model.eval()


def record(name: str, trained: nn.Module, want: str) -> Path:
    """Write `trained`'s weights as `name`, with the fingerprint of the recipe that trained them."""
    TRAINED.mkdir(parents=True, exist_ok=True)
    path = TRAINED / f"{name}.safetensors"
    state = {k: v.detach().contiguous() for k, v in trained.state_dict().items()}
    save_file(state, str(path), metadata={"fingerprint": want, "torch": torch.__version__})
    return path


def main() -> int:
    from tests.infra.ops.promotion import tiny_llama, tiny_lm

    for recipe in (tiny_lm.RECIPE, tiny_llama.RECIPE):
        path = recipe.record()
        print(f"recorded {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
