"""Extract the command line of vLLM's OpenAI server (`python3 -m vllm.entrypoints.openai.api_server`) and the
fields of its EngineArgs, from vLLM's own parser at one version, into tests/contracts/data/vllm/vllm-<v>.json.

Run it from the repository root in a throwaway virtual environment holding that vLLM wheel (installed with
--no-deps, plus what its argument modules import: transformers at the version the wheel asks for, torch's CPU
build, pydantic, fastapi, openai, ...); no GPU is needed, platform detection is set to the CPU platform
because the parser builds a DeviceConfig:

    /tmp/vllmenv/bin/python -m tests.contracts.extract_vllm_args --out tests/contracts/data/vllm

What is kept (facts, not code): per option its spellings, destination, nargs, choices, whether it is a flag,
and the kind of value it converts to; the EngineArgs field names (the keyword arguments `LLM(...)` accepts).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import sys
from pathlib import Path
from typing import Any

from tests.contracts.facts_file import write_facts


def value_kind(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "flag"
    kind = getattr(action.type, "__name__", "") or type(action.type).__name__
    if kind in ("int", "float", "str"):
        return kind
    if kind == "human_readable_int":
        return "int"
    if kind in ("_parse_type", "loads") or "json" in kind.lower():
        return "json"
    return "str"


def action_facts(action: argparse.Action) -> dict[str, Any]:
    return {
        "options": list(action.option_strings),
        "dest": action.dest,
        "nargs": action.nargs if isinstance(action.nargs, str | int) or action.nargs is None else str(action.nargs),
        "choices": sorted(map(str, action.choices)) if action.choices else None,
        "kind": value_kind(action),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "data" / "vllm"))
    args = parser.parse_args(argv)

    import vllm
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()  # type: ignore[attr-defined]
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils import FlexibleArgumentParser

    server = make_arg_parser(FlexibleArgumentParser())
    facts = {
        "vllm": vllm.__version__,
        "source": f"https://pypi.org/project/vllm/{vllm.__version__}/ (the wheel's own make_arg_parser)",
        "extracted": datetime.date.today().isoformat(),
        "allowAbbrev": server.allow_abbrev,
        "options": [action_facts(a) for a in server._actions if a.option_strings and a.dest != "help"],
        "engineArgs": sorted(f.name for f in dataclasses.fields(EngineArgs)),
    }
    write_facts(args.out, f"vllm-{vllm.__version__}", facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
