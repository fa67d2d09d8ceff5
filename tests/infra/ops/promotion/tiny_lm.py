"""A tiny causal language model, built and trained by the tests in seconds on the bundled corpus
(data/quality/: train.txt, held-out.txt, facts.txt, written for these tests), for the quality gate's programs.

Character level: a two-layer pre-norm transformer decoder (causal self-attention, MLP), learned positions, an
untied lm_head. It learns the prose and memorises the facts ("code of amber is 840."), so exact match on the
facts is a task score that quantisation can break while perplexity on the prose moves less.
"""

from __future__ import annotations

import fcntl
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn

DATA = Path(__file__).parent / "data" / "quality"
CONTEXT = 96  # longer than any line of the corpus
SHARED_DIR = "MLINFRA_TESTS_SHARED_DIR"  # set by tests/conftest.py under pytest-xdist: one directory per run
Model = TypeVar("Model", bound=nn.Module)


@dataclass(frozen=True)
class Corpus:
    train: str
    held_out: list[str]
    facts: list[str]
    vocabulary: str

    def encode(self, text: str) -> list[int]:
        return [self.vocabulary.index(c) for c in text]

    def tasks(self) -> list[tuple[list[int], list[int]]]:
        """(prompt, answer) per fact: "code of amber is " -> "840."."""
        pairs = []
        for fact in self.facts:
            prompt, _, answer = fact.rpartition(" ")
            pairs.append((self.encode("\n" + prompt + " "), self.encode(answer)))
        return pairs


def corpus() -> Corpus:
    train = (DATA / "train.txt").read_text()
    facts = (DATA / "facts.txt").read_text().splitlines()
    held_out = (DATA / "heldout.txt").read_text().splitlines()
    vocabulary = "".join(sorted(set(train + "\n".join(facts) + "\n".join(held_out) + "\n")))
    return Corpus(train, held_out, facts, vocabulary)


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(w, dim=2)
        q, k, v = (t.reshape(b, n, self.heads, w // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, n, w))
        return x + self.down(nn.functional.gelu(self.up(self.norm2(x))))


class TinyLM(nn.Module):
    def __init__(self, vocabulary: int, width: int = 64, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.position = nn.Embedding(CONTEXT, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocabulary)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids[:, -CONTEXT:]
        x = self.embed(ids) + self.position(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))


def _batches(text: list[int], steps: int, batch: int, generator: torch.Generator) -> list[torch.Tensor]:
    data = torch.tensor(text)
    starts = torch.randint(0, len(text) - CONTEXT - 1, (steps, batch), generator=generator)
    return [torch.stack([data[s : s + CONTEXT + 1] for s in row]) for row in starts]


@functools.cache
def trained(steps: int = 250, seed: int = 0) -> tuple[TinyLM, Corpus]:
    """The model after `steps` of AdamW on the training prose and the facts (facts repeated, shuffled lines).

    One thread: the tier runs beside other tests, and a second thread buys little for a model this small."""
    text = corpus()
    return trained_once(f"tiny-lm-{steps}-{seed}", lambda: TinyLM(len(text.vocabulary)), text, steps, seed), text


def trained_once(name: str, build: Callable[[], Model], text: Corpus, steps: int, seed: int) -> Model:
    """`build()` trained by `train`, once per test run: under pytest-xdist the first worker to ask trains it and
    leaves its weights in the run's shared directory; the others wait for them and load them (a state dict is
    bit for bit the trained model). The model is built from the seed either way, so torch's global random state
    afterwards is the same whichever worker trained it."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    model = build()
    shared = os.environ.get(SHARED_DIR)
    if shared is None:
        return train(model, text, steps, seed)
    weights = Path(shared) / f"{name}.pt"
    with open(Path(shared) / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if weights.exists():
            model.load_state_dict(torch.load(weights))
            return model.eval()
        train(model, text, steps, seed)
        torch.save(model.state_dict(), weights.with_suffix(".part"))
        weights.with_suffix(".part").replace(weights)
        return model


def train(model: nn.Module, text: Corpus, steps: int, seed: int) -> nn.Module:
    """`model` (any (batch, n) ids -> logits module) trained as `trained` trains the TinyLM, put in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    lines = text.train.splitlines() + text.facts * 12
    order = torch.randperm(len(lines), generator=generator).tolist()
    stream = text.encode("\n".join(lines[i] for i in order) + "\n")
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=1e-2, total_steps=steps)
    for chunk in _batches(stream, steps, 16, generator):
        logits = model(chunk[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
    model.eval()
    return model
