"""A model's minimum replicas by time of week (pure): windows that tile the week, each with its minimum, in one time
zone; KEDA cron triggers that raise the minimum ahead of each window by the replica's start-up budget, so the
replicas serve when the window opens (docs/serving.md "Scale to zero and schedules").

KEDA's cron scaler (keda.sh/docs/2.20/scalers/cron, kedacore/keda v2.20.0 pkg/scalers/cron_scaler.go): `timezone`
(IANA), `start` and `end` (five-field cron, different), `desiredReplicas` (1 or more: 0 is refused). Between start
and end it asks for desiredReplicas, and the HPA takes the largest of every trigger's ask, so the window's count
acts as a minimum; outside, it is inactive. A window at the floor needs no trigger: minReplicaCount is the floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
CRON_DAY = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
WEEK_MINUTES = 7 * 24 * 60


def clock_minutes(text: str) -> int:
    """Minutes after midnight of "HH:MM" (00:00-24:00); ValueError saying what is allowed."""
    hours, _, minutes = text.partition(":")
    if not (len(hours) == 2 and len(minutes) == 2 and hours.isdigit() and minutes.isdigit()):
        raise ValueError(f"{text!r} is not a time of day: HH:MM, 00:00 to 24:00")
    value = int(hours) * 60 + int(minutes)
    if int(minutes) > 59 or value > 24 * 60:
        raise ValueError(f"{text!r} is not a time of day: HH:MM, 00:00 to 24:00")
    return value


@dataclass(frozen=True)
class Span:
    """A stretch of the week in minutes from Monday 00:00, [start, end), and its window's index."""

    start: int
    end: int
    window: int


def spans(windows: Sequence[tuple[Sequence[str], str, str]]) -> list[Span]:
    """Each window's (days, from, to) as one span per day, sorted."""
    found = []
    for index, (days, start, end) in enumerate(windows):
        for day in days:
            base = DAYS.index(day) * 24 * 60
            found.append(Span(base + clock_minutes(start), base + clock_minutes(end), index))
    return sorted(found, key=lambda s: (s.start, s.end))


def _at(minute: int) -> str:
    minute %= WEEK_MINUTES
    day, rest = divmod(minute, 24 * 60)
    return f"{DAYS[day].capitalize()} {rest // 60:02d}:{rest % 60:02d}"


def tiling_problems(windows: Sequence[tuple[Sequence[str], str, str]]) -> list[tuple[int, str]]:
    """(window index, what is wrong) for windows that end before they start, overlap, or leave part of the week
    without a minimum: one problem of each kind per window (a window on five days overlapping another says so once)."""
    problems: list[tuple[int, str]] = []
    for index, (_, start, end) in enumerate(windows):
        if clock_minutes(end) <= clock_minutes(start):
            problems.append((index, f"ends at {end}, not after it starts ({start}): split a window past midnight"))
    if problems:
        return problems
    said: set[tuple[int, str]] = set()

    def say(index: int, kind: str, why: str) -> None:
        if (index, kind) not in said:
            said.add((index, kind))
            problems.append((index, why))

    cursor, last = 0, None
    for span in spans(windows):
        if span.start < cursor and last is not None:
            overlap = f"overlaps windows[{last.window}] from {_at(span.start)} to {_at(min(cursor, span.end))}"
            say(span.window, f"overlap {last.window}", overlap)
        elif span.start > cursor:
            say(span.window, "gap", f"the week from {_at(cursor)} to {_at(span.start)} has no window")
        if span.end > cursor:
            cursor, last = span.end, span
    if cursor < WEEK_MINUTES and not problems:
        problems.append((len(windows) - 1, f"the week from {_at(cursor)} to Mon 00:00 has no window"))
    return problems


@dataclass(frozen=True)
class CronTrigger:
    """One KEDA cron trigger: `desired` replicas from `start` to `end` (five-field cron) in `timezone`."""

    timezone: str
    start: str
    end: str
    desired: int


def _cron(minute_of_week: int) -> tuple[int, int, int]:
    """(minute, hour, cron weekday) of a minute of the week."""
    minute_of_week %= WEEK_MINUTES
    day, rest = divmod(minute_of_week, 24 * 60)
    return rest % 60, rest // 60, CRON_DAY[DAYS[day]]


def cron_triggers(
    timezone: str, windows: Sequence[tuple[Sequence[str], str, str, int]], floor: int, lead_seconds: float
) -> list[CronTrigger]:
    """A trigger per window (and per day) whose minimum is above `floor`, starting `lead_seconds` (the start-up
    budget, rounded up to the minute) before the window opens. Days whose times agree share a trigger."""
    lead = math.ceil(lead_seconds / 60)
    grouped: dict[tuple[int, int, int, int, int], list[tuple[int, int]]] = {}
    for span in spans([(days, start, end) for days, start, end, _ in windows]):
        desired = windows[span.window][3]
        if desired <= floor:
            continue
        s_min, s_hour, s_day = _cron(span.start - lead)
        e_min, e_hour, e_day = _cron(span.end)
        grouped.setdefault((s_min, s_hour, e_min, e_hour, desired), []).append((s_day, e_day))
    triggers = []
    for (s_min, s_hour, e_min, e_hour, desired), days in grouped.items():
        start_days = ",".join(str(start) for start, _ in sorted(days))
        end_days = ",".join(str(end) for _, end in sorted(days))
        triggers.append(
            CronTrigger(timezone, f"{s_min} {s_hour} * * {start_days}", f"{e_min} {e_hour} * * {end_days}", desired)
        )
    return triggers


def minimum_at(windows: Sequence[tuple[Sequence[str], str, str, int]], minute_of_week: int) -> int:
    """The scheduled minimum at a minute of the week (0 where no window covers it)."""
    minute_of_week %= WEEK_MINUTES
    for span in spans([(days, start, end) for days, start, end, _ in windows]):
        if span.start <= minute_of_week < span.end:
            return windows[span.window][3]
    return 0


def _cron_days(field: str) -> list[int]:
    if field == "*":
        return list(range(7))
    days: list[int] = []
    for part in field.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"day of week {field!r}: numbers 0-7, lists and ranges only")
        days += range(int(low), int(high or low) + 1)
    return sorted({d % 7 for d in days})  # 7 is Sunday too


def cron_minutes(expression: str) -> list[int]:
    """The minutes of the week (from Monday 00:00) a five-field cron of one minute, one hour, any day of the month
    and any month fires at; ValueError for other forms (the twin plays no other)."""
    fields = expression.split()
    if len(fields) != 5 or fields[2] != "*" or fields[3] != "*" or not fields[0].isdigit() or not fields[1].isdigit():
        raise ValueError(f"{expression!r}: the twin reads cron of the form 'M H * * DAYS'")
    minute, hour = int(fields[0]), int(fields[1])
    if minute > 59 or hour > 23:
        raise ValueError(f"{expression!r}: minute 0-59, hour 0-23")
    monday_first = {0: 6, 1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5}  # cron's Sunday-first weekdays from Monday
    return sorted(monday_first[d] * 24 * 60 + hour * 60 + minute for d in _cron_days(fields[4]))


def cron_windows(start: str, end: str) -> list[tuple[int, int]]:
    """(start, end) minutes of the week of a cron trigger: each start runs to the first end after it."""
    starts, ends = cron_minutes(start), cron_minutes(end)
    windows = []
    for s in starts:
        following = [e for e in ends if e > s] or [e + WEEK_MINUTES for e in ends]
        windows.append((s, min(following) % WEEK_MINUTES))
    return windows
