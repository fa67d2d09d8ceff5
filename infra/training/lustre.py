"""What a run needs from its Lustre file system, whatever the cloud sells (pure): each cloud sizes its own
service (FSx for Lustre, Managed Lustre) from the same intents. Sizes in GiB, throughput in MB/s
(1 MB = 10^6 bytes), read targets in Gbit/s (1 Gbit/s = 125 MB/s)."""

from __future__ import annotations

import math
from dataclasses import dataclass

MB_PER_GIB = 1073.741824
MB_PER_GBIT = 125.0  # 10^9 bits over 8, in 10^6 bytes


class LustreSizingError(ValueError):
    """The intent cannot be met or is malformed; the message names the field and what is allowed."""


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class LustreIntent:
    """What the run needs from its file system; sizes in GiB."""

    dataset_gib: float
    checkpoint_gib: float
    checkpoint_write_seconds: float  # target time to write one checkpoint
    read_throughput_gbps: float  # aggregate read target in Gbit/s, as the key's name says (1 Gbit/s = 125 MB/s)
    headroom: float = 1.2

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise LustreSizingError("; ".join(problems))

    def problems(self) -> list[str]:
        problems = [
            f"{name} must be a number >= 0 (got {value!r})"
            for name, value in (
                ("dataset_gib", self.dataset_gib),
                ("checkpoint_gib", self.checkpoint_gib),
                ("read_throughput_gbps", self.read_throughput_gbps),
            )
            if not is_number(value) or value < 0
        ]
        if not is_number(self.checkpoint_write_seconds) or self.checkpoint_write_seconds <= 0:
            problems.append(f"checkpoint_write_seconds must be > 0 (got {self.checkpoint_write_seconds!r})")
        if not is_number(self.headroom) or self.headroom < 1:
            problems.append(f"headroom must be >= 1.0 (got {self.headroom!r})")
        return problems

    @property
    def capacity_needed_gib(self) -> float:
        """Dataset plus two checkpoints (the one being written and the last good one), with headroom."""
        return (self.dataset_gib + 2 * self.checkpoint_gib) * self.headroom

    @property
    def write_mbps_needed(self) -> float:
        return self.checkpoint_gib * MB_PER_GIB / self.checkpoint_write_seconds

    @property
    def read_mbps_needed(self) -> float:
        return self.read_throughput_gbps * MB_PER_GBIT
