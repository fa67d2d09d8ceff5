"""Errors that carry user-facing problems: one line each, naming the field and what is allowed."""

from __future__ import annotations

from dataclasses import dataclass

# Control characters and line breaks as their escapes: a value that carries a newline must not end the line or
# forge another `error:` line, and no byte of it may reach the terminal as a control sequence.
_ESCAPED = {code: ascii(chr(code))[1:-1] for code in (*range(32), 127, 0x85, 0x2028, 0x2029)}


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        line = f"{self.path}: {self.message}" if self.path else self.message
        return line.translate(_ESCAPED)


class InputError(Exception):
    """Bad input (config, flags, files): reported as one line per problem, exit code 2."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
