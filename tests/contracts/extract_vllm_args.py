"""Extract the command line of vLLM's OpenAI server (`vllm serve`, and `python3 -m
vllm.entrypoints.openai.api_server` before it), the fields of its EngineArgs, its registered load formats and the
Prometheus metrics its engine exports, from vLLM's own code at one version, into
tests/contracts/data/vllm/vllm-<v>.json.

Run it from the repository root in a throwaway virtual environment holding that vLLM wheel (installed with
--no-deps, plus what its argument modules import: transformers at the version the wheel asks for, torch's CPU
build, pydantic, fastapi, openai, xgrammar, ...); no GPU is needed, platform detection is set to the CPU platform
because the parser builds a DeviceConfig:

    /tmp/vllmenv/bin/python -m tests.contracts.extract_vllm_args --out tests/contracts/data/vllm

What is kept (facts, not code): per option its spellings, destination, nargs, choices, and what the option does,
found by trying it: a flag's value per spelling (vLLM's --enable-X/--disable-X pairs set one destination to True
or False), the kind of value an option converts (int, float, json, str: the narrowest that its own type function
accepts); the EngineArgs field names (the keyword arguments `LLM(...)` accepts); the load formats its model
loader registry holds and its quantization methods (--load-format's and --quantization's values: from 0.10 the
parser no longer lists them as choices); each compressed-tensors scheme's minimum compute capability, as the
scheme class answers it; the `vllm:` metric names its metrics module defines.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import inspect
import re
import sys
from pathlib import Path
from typing import Any

from tests.contracts.facts_file import write_facts

# One probe value per kind, and the Python type a type function that takes that kind returns for it.
PROBES = (("int", "12", int), ("float", "0.5", float), ("json", '{"a": 1}', dict), ("str", "abc", str))


def converts(action: argparse.Action, probe: str, kind: type) -> bool:
    if action.type is None:
        return kind is str
    try:
        return isinstance(action.type(probe), kind)  # type: ignore[operator]
    except Exception:  # an argparse type function refuses with whatever it raises
        return False


def value_kind(action: argparse.Action) -> str:
    accepts = [name for name, probe, kind in PROBES if converts(action, probe, kind)]
    # The widest kind the type function takes: any text; else JSON (which parses numbers too); else a float
    # (which takes "12" as 12.0); else an int.
    for kind in ("str", "json", "float", "int"):
        if kind in accepts:
            return kind
    return "str"


def flag_values(server: argparse.ArgumentParser, action: argparse.Action) -> dict[str, Any]:
    """What each spelling of a flag stores, by parsing it."""
    values = {}
    for option in action.option_strings:
        parsed, _ = server.parse_known_args(["--model", "m", option])
        values[option] = getattr(parsed, action.dest)
    return values


def action_facts(server: argparse.ArgumentParser, action: argparse.Action) -> dict[str, Any]:
    flag = action.nargs == 0
    facts: dict[str, Any] = {
        "options": list(action.option_strings),
        "dest": action.dest,
        "nargs": action.nargs if isinstance(action.nargs, str | int) or action.nargs is None else str(action.nargs),
        "choices": sorted(map(str, action.choices)) if action.choices else None,
        "kind": "flag" if flag else value_kind(action),
    }
    if flag:
        facts["sets"] = flag_values(server, action)
    return facts


def load_formats() -> list[str]:
    from vllm.model_executor import model_loader

    registry = getattr(model_loader, "_LOAD_FORMAT_TO_MODEL_LOADER", None)
    return sorted(registry) if registry is not None else []


def quantization_methods() -> list[str]:
    """--quantization's values (from 0.10 the parser no longer lists them as choices)."""
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    return sorted(QUANTIZATION_METHODS)


def scheme_capabilities() -> dict[str, int]:
    """Each compressed-tensors scheme's minimum CUDA compute capability, as the scheme class answers it."""
    from vllm.model_executor.layers.quantization.compressed_tensors import schemes

    found = {}
    for name in dir(schemes):
        scheme = getattr(schemes, name)
        if isinstance(scheme, type) and scheme is not schemes.CompressedTensorsScheme:
            if issubclass(scheme, schemes.CompressedTensorsScheme):
                try:
                    found[name] = scheme.get_min_capability()
                except NotImplementedError:
                    continue
    return found


def metric_names() -> list[str]:
    """The metric names vLLM's V1 metrics module passes to its Prometheus classes."""
    from vllm.v1.metrics import loggers

    return names_in_source(inspect.getsource(loggers))


def names_in_source(source: str) -> list[str]:
    """The `vllm:` names a metrics module's source passes as `name=` (digits too: vllm:e2e_request_latency_seconds)."""
    return sorted(set(re.findall(r'name="(vllm:[a-z0-9_:]+)"', source)))


def release_commit() -> str | None:
    """The commit the wheel was built from, as its setuptools-scm version file names it ('g' + short hash)."""
    try:
        from vllm import _version
    except ImportError:
        return None
    commit = getattr(_version, "commit_id", None)
    return commit.removeprefix("g") if commit else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "data" / "vllm"))
    args = parser.parse_args(argv)

    import vllm
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()  # type: ignore[attr-defined]
    from vllm.engine.arg_utils import EngineArgs

    # Where the server's parser and its parser class live moved, each on its own: make_arg_parser from
    # entrypoints/openai/cli_args to entrypoints/common/cli_args, FlexibleArgumentParser from vllm.utils to
    # vllm.utils.argparse_utils (0.16.0 has the old first and only the new second).
    try:
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    except ImportError:
        from vllm.entrypoints.common.cli_args import make_arg_parser  # type: ignore[no-redef]
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser  # type: ignore[no-redef,attr-defined]

    server = make_arg_parser(FlexibleArgumentParser())
    facts = {
        "vllm": vllm.__version__,
        "source": f"https://pypi.org/project/vllm/{vllm.__version__}/ (the wheel's own make_arg_parser, model loader "
        "registry and vllm/v1/metrics/loggers.py)",
        "commit": release_commit(),
        "extracted": datetime.date.today().isoformat(),
        "allowAbbrev": server.allow_abbrev,
        "options": [action_facts(server, a) for a in server._actions if a.option_strings and a.dest != "help"],
        "engineArgs": sorted(f.name for f in dataclasses.fields(EngineArgs)),
        "loadFormats": load_formats(),
        "quantizationMethods": quantization_methods(),
        "schemeMinCapability": scheme_capabilities(),
        "metrics": metric_names(),
    }
    write_facts(args.out, f"vllm-{vllm.__version__}", facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
