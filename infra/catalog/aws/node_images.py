"""The Deep Learning AMIs training nodes boot, and what the node bootstrap relies on in each, as data
(data/aws_node_images.json): every fact with its source, and how the node checks it before anything runs.

Pure library: no pulumi imports, no I/O until the first lookup.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from types import MappingProxyType
from typing import Any, Literal

FactCheck = Literal["command", "command-ok", "library"]


@dataclass(frozen=True)
class ImageFact:
    """One thing the bootstrap relies on. `check` says how the node proves it: `command` (on the bootstrap's
    PATH), `command-ok` (the command line exits 0), `library` (the first existing file of `values`)."""

    what: str
    check: FactCheck
    values: tuple[str, ...]
    status: Literal["stated", "not stated"]
    source: str


@dataclass(frozen=True)
class DlamiFacts:
    key: str  # "gpu" / "neuron"
    description: str
    ssm_parameter: str  # public SSM parameter holding the latest image id
    torchrun: str  # absolute path of torchrun on the image
    pytorch: str  # the PyTorch version torchrun's flags were checked against
    release_notes: str
    facts: tuple[ImageFact, ...]

    def fact(self, check: FactCheck) -> tuple[ImageFact, ...]:
        return tuple(f for f in self.facts if f.check == check)


def _fact(raw: Mapping[str, Any]) -> ImageFact:
    value = raw["value"]
    return ImageFact(
        what=raw["what"],
        check=raw["check"],
        values=tuple(value) if isinstance(value, list) else (value,),
        status=raw["status"],
        source=raw["source"],
    )


@functools.cache
def _images() -> tuple[str, Mapping[str, DlamiFacts]]:
    raw = json.loads((files("infra.catalog") / "data" / "aws_node_images.json").read_text(encoding="utf-8"))
    images = {
        key: DlamiFacts(
            key=key,
            description=row["description"],
            ssm_parameter=row["ssmParameter"],
            torchrun=row["torchrun"],
            pytorch=row["pytorch"],
            release_notes=row["releaseNotes"],
            facts=tuple(_fact(f) for f in row["facts"]),
        )
        for key, row in raw["images"].items()
    }
    return raw["asOf"], MappingProxyType(images)


def dlami_facts(key: str) -> DlamiFacts:
    """The image for accelerator kind `key` ("gpu" or "neuron")."""
    return _images()[1][key]


def node_images_as_of() -> str:
    return _images()[0]
