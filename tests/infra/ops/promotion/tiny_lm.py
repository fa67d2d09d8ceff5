"""A tiny causal language model, trained on the bundled corpus (data/quality/: train.txt, heldout.txt, facts.txt,
written for these tests), for the quality gate's programs. Its weights are recorded (trained_weights.py), so every
machine evaluates the same model; test_trained_weights.py checks the recipe still learns.

Character level: a two-layer pre-norm transformer decoder (causal self-attention, MLP), learned positions, an
untied lm_head. It learns the prose and memorises the facts ("code of amber is 840."), so exact match on the
facts is a task score that quantisation can break while perplexity on the prose moves less.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tests.infra.ops.promotion import trained_weights

DATA = Path(__file__).parent / "data" / "quality"
CORPUS_FILES = ("train.txt", "facts.txt", "heldout.txt")
CONTEXT = 96  # longer than any line of the corpus


@dataclass(frozen=True)
class Corpus:
    train: str
    held_out: list[str]
    facts: list[str]
    vocabulary: str

    def encode(self, text: str) -> list[int]:
        return [self.vocabulary.index(c) for c in text]

    def write_evaluation(self, data: Path) -> Path:
        """The held-out prose and the facts as a datasets/evals/<name>/ prefix holds them (held-out.jsonl,
        tasks.jsonl), into the directory `data`, which must not exist yet."""
        data.mkdir(parents=True)
        (data / "held-out.jsonl").write_text(
            "".join(json.dumps({"text": "\n" + line}) + "\n" for line in self.held_out), encoding="utf-8"
        )
        (data / "tasks.jsonl").write_text(
            "".join(
                json.dumps({"prompt": "\n" + f.rpartition(" ")[0] + " ", "answer": f.rpartition(" ")[2]}) + "\n"
                for f in self.facts
            ),
            encoding="utf-8",
        )
        return data

    def tasks(self) -> list[tuple[list[int], list[int]]]:
        """(prompt, answer) per fact: "code of amber is " -> "840."."""
        pairs = []
        for fact in self.facts:
            prompt, _, answer = fact.rpartition(" ")
            pairs.append((self.encode("\n" + prompt + " "), self.encode(answer)))
        return pairs


def corpus() -> Corpus:
    train = (DATA / "train.txt").read_text(encoding="utf-8")
    facts = (DATA / "facts.txt").read_text(encoding="utf-8").splitlines()
    held_out = (DATA / "heldout.txt").read_text(encoding="utf-8").splitlines()
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


@dataclass(frozen=True)
class Recipe:
    """How a tiny model is built and trained; its weights are recorded once (trained_weights.py) and loaded."""

    name: str
    build: Callable[[int], nn.Module]  # vocabulary size -> an untrained model
    parts: tuple[Any, ...]  # the classes and functions whose source decides the trained weights
    steps: int = 250
    seed: int = 0

    @property
    def file(self) -> str:
        return f"{self.name}-{self.steps}-{self.seed}"

    def fingerprint(self) -> str:
        files = [DATA / name for name in CORPUS_FILES]
        return trained_weights.fingerprint(files, self.steps, self.seed, (*self.parts, train, _batches, corpus))

    def untrained(self, text: Corpus) -> nn.Module:
        """The model as built from the seed (so torch's global random state afterwards is the same whether its
        weights are then loaded or trained)."""
        torch.manual_seed(self.seed)
        return self.build(len(text.vocabulary))

    def trained(self) -> tuple[nn.Module, Corpus]:
        text = corpus()
        return trained_weights.load(self.file, self.untrained(text), self.fingerprint()), text

    def train_now(self) -> nn.Module:
        """Trained here and now, as the recorded weights were (on one thread: a second buys little at this size)."""
        text = corpus()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return train(self.untrained(text), text, self.steps, self.seed)
        finally:
            torch.set_num_threads(threads)

    def record(self) -> Path:
        return trained_weights.record(self.file, self.train_now(), self.fingerprint())


RECIPE = Recipe("tiny-lm", TinyLM, (Block, TinyLM))


@functools.cache
def trained() -> tuple[TinyLM, Corpus]:
    """The TinyLM after 250 steps of AdamW on the training prose and the facts (facts repeated, shuffled lines),
    with the recorded weights."""
    model, text = RECIPE.trained()
    assert isinstance(model, TinyLM)
    return model, text


def train(model: nn.Module, text: Corpus, steps: int, seed: int) -> nn.Module:
    """`model` (any (batch, n) ids -> logits module) after `steps` of AdamW on the training prose and the facts
    (facts repeated, shuffled lines), put in eval mode."""
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
