"""The pack's process, started as the engine's python shim starts it (see analyzer_client for the protocol).

Apart from the gRPC client so that a verb can start the pack before it imports anything heavy: the pack's
interpreter, SDK and rules then boot on another core while the verb previews the stack (`python -m infra
policy --stack`); the client adopts the process once the preview is done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra.core.errors import InputError, Problem
from infra.core.project import ROOT, engine_config

PACK_DIR = ROOT / "policies"

# The stack config reaches the pack in one environment variable, as the engine hands it over; Linux refuses a
# single variable past MAX_ARG_STRLEN (32 pages: 131,072 bytes with its name and terminator).
MAX_CONFIG_BYTES = 131_072 - len("PULUMI_CONFIG=") - 1
NO_ENGINE = "127.0.0.1:0"  # the engine address argument; Python packs do not dial it


def pack_runtime(pack_dir: Path) -> tuple[list[str], str]:
    """The command the engine's python shim runs for the pack in `pack_dir`, and the manifest's version."""
    manifest = pack_dir / "PulumiPolicy.yaml"
    label = str(manifest)
    try:
        project = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    except OSError:
        raise InputError(Problem(label, "not found; a policy pack directory has a PulumiPolicy.yaml")) from None
    except yaml.YAMLError as error:
        raise InputError(Problem(label, f"not valid YAML: {str(error).splitlines()[0]}")) from None
    runtime = (project or {}).get("runtime")
    name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if name != "python":
        raise InputError(Problem(f"{label}: runtime", f"{name!r} is not supported offline; allowed: python"))
    options = runtime.get("options") or {} if isinstance(runtime, dict) else {}
    python = sys.executable
    virtualenv = options.get("virtualenv")
    if virtualenv:
        venv = (pack_dir / str(virtualenv)).resolve()
        python = str(venv / "bin" / "python")
        if not Path(python).is_file():
            raise InputError(
                Problem(
                    f"{label}: runtime.options.virtualenv",
                    f"{venv} is not a virtual environment (run `make test` to create .venv)",
                )
            )
    return [python, "-u", "-m", "pulumi.policy", NO_ENGINE, "."], str((project or {}).get("version") or "")


@dataclass(frozen=True)
class PackProcess:
    """A started pack: its process, and what it was started for (the engine hands those over in its
    environment, so a pack serves one project, stack and stack config)."""

    pack_dir: Path
    project: str
    stack: str
    stack_config: Mapping[str, str]
    version: str  # PulumiPolicy.yaml's
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, pack_dir: Path, project: str, stack: str, stack_config: Mapping[str, str]) -> PackProcess:
        """Start the pack in `pack_dir`; InputError when its manifest cannot run offline."""
        pack_dir = Path(pack_dir).resolve()
        command, version = pack_runtime(pack_dir)
        env = dict(os.environ)
        env.update(
            {
                "PULUMI_PROJECT": project,
                "PULUMI_STACK": stack,
                "PULUMI_DRY_RUN": "true",
                "PULUMI_ORGANIZATION": "organization",
            }
        )
        if stack_config:
            text = json.dumps(dict(stack_config))
            size = len(text.encode())
            if size > MAX_CONFIG_BYTES:
                raise InputError(
                    Problem(
                        "config",
                        f"the stack config is {size:,} bytes as JSON ({len(stack_config):,} keys); the pack receives "
                        f"it in one environment variable, at most {MAX_CONFIG_BYTES:,} bytes",
                    )
                )
            env["PULUMI_CONFIG"] = text
        env.pop("PYTHONHOME", None)  # as the shim does for a virtualenv
        process = subprocess.Popen(
            command,
            cwd=pack_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        return cls(pack_dir, project, stack, dict(stack_config), version, process)

    def serves(self, pack_dir: Path, project: str, stack: str, stack_config: Mapping[str, str]) -> bool:
        """Whether this process is the pack `pack_dir` started for this project, stack and stack config."""
        wanted = (Path(pack_dir).resolve(), project, stack, dict(stack_config))
        return (self.pack_dir, self.project, self.stack, dict(self.stack_config)) == wanted

    def stop(self) -> None:
        stop_process(self.process)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Terminate a pack's process (killed if it has not ended 10 s later); nothing when it has ended already."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_early(project: str, stack: str, config: Mapping[str, Any], pack_dir: Path = PACK_DIR) -> PackProcess | None:
    """Start the pack for a stack whose preview is still to come (`config`: its stack config, as in the stack
    file), so that the pack boots while the preview runs; `runner.run` takes it over. None where the pack cannot
    start: `runner.run` starts it again in its turn and reports why."""
    try:
        return PackProcess.start(pack_dir, project, stack, engine_config(dict(config))[0])
    except InputError:
        return None
