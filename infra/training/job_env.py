"""What a training job may put in its environment and its command, on either cloud (pure).

The node's bootstrap runs as root and renders the job's command and env into a bash script. Its env goes to
the job alone (torchrun's environment), never to the script's own shell, and keys that would still change
what the script, the dynamic loader or the cloud CLI it calls do are refused: a PATH that hides `aws` or
`shutdown` leaves nodes billing with no completion marker, a credentials variable sends the marker and the
checkpoint export to someone else's account, and the settings that choose the collective transport belong to
the fabric gate, which proves that transport before the job starts. Template markers (`@@NAME@@`) and NUL bytes
are refused in every value, so no value can be mistaken for a part of the script.

Both are bounded, so the bootstrap that carries them always fits its cloud's limit (EC2 user data: 16 KB raw;
Compute Engine: 256 KiB per metadata value): at most MAX_COMMAND_ARGS arguments and MAX_COMMAND_BYTES
bytes (UTF-8) of command, MAX_ENV_VARS variables and MAX_ENV_BYTES bytes of `KEY=value`.
"""

from __future__ import annotations

import re

ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TEMPLATE_MARKER = "@@"
# Names the shell, the loader or the script own: bash reads these while it runs the bootstrap.
SCRIPT_OWNED = frozenset(
    {
        "PATH",
        "IFS",
        "SECONDS",
        "SHELLOPTS",
        "BASHOPTS",
        "BASH_ENV",
        "ENV",
        "PS4",
        "BASH_XTRACEFD",
        "HOME",
        "LD_PRELOAD",
        "LD_AUDIT",
    }
)
# Cloud SDK settings a job may set: none of them says whose credentials or which endpoint are used.
CLOUD_ALLOWED = frozenset({"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"})
# Prefixes of settings that choose credentials, endpoints or the metadata service of a cloud SDK.
CLOUD_PREFIXES = ("AWS_", "GOOGLE_", "CLOUDSDK_", "GCE_METADATA_", "BOTO_")
# Settings that choose the collectives' transport: the bootstrap sets them and the fabric gate proves them, so
# a job cannot move its collectives back to TCP sockets (NCCL_NET=Socket) after the gate passed.
FABRIC_OWNED = frozenset({"NCCL_NET", "NCCL_NET_PLUGIN", "FI_PROVIDER"})
# Bounds that keep the rendered bootstrap within EC2's 16 KB user data whatever the values are
# (tests/infra/training/aws/test_userdata_size.py renders the worst case and measures it).
MAX_COMMAND_ARGS = 64
MAX_COMMAND_BYTES = 3072
MAX_ENV_VARS = 64
MAX_ENV_BYTES = 3072


def env_key_problem(key: object) -> str | None:
    """Why `key` may not be a job env key, or None."""
    if not isinstance(key, str) or not ENV_KEY.fullmatch(key):
        return f"env key {key!r} must be a shell variable name (letters, digits, '_', not starting with a digit)"
    if key.startswith("MLINFRA_"):
        return f"env key {key!r} is reserved: MLINFRA_* are the bootstrap's own variables"
    if key in SCRIPT_OWNED or key.startswith("BASH_FUNC_"):
        hint = " (set torchrunPath for a torchrun outside the system path)" if key == "PATH" else ""
        return f"env key {key!r} is reserved: the node's bootstrap and its shell own it{hint}"
    if key in FABRIC_OWNED:
        return (
            f"env key {key!r} is reserved: the bootstrap chooses the collectives' transport and proves it before the "
            "job (job.fabricGate); a job may tune NCCL, not move it off the fabric"
        )
    if key.startswith(CLOUD_PREFIXES) and key not in CLOUD_ALLOWED:
        return (
            f"env key {key!r} is reserved: it would change the credentials or endpoints the node's cloud CLI "
            f"uses (allowed: {', '.join(sorted(CLOUD_ALLOWED))})"
        )
    return None


def value_problem(what: str, value: object) -> str | None:
    """Why `value` may not be rendered into the bootstrap as `what`, or None."""
    if not isinstance(value, str):
        return f"{what} must be a string (got {type(value).__name__})"
    if "\x00" in value:
        return f"{what} must not contain a NUL byte"
    if TEMPLATE_MARKER in value:
        return f"{what} must not contain {TEMPLATE_MARKER!r} (the bootstrap template's markers)"
    return None


# torchrun's options that change what it runs, allowed before the script: a module instead of a file.
SCRIPT_OPTIONS = ("-m", "--module")


def command_problems(command: list[str] | tuple[str, ...]) -> list[str]:
    problems = []
    if not command or not isinstance(command[0], str) or not command[0].strip():
        problems.append("command must name the training script (and its arguments) as torchrun takes them")
    elif command[0].startswith("-"):
        # Anything else before the script is one of torchrun's own options, which mlinfra sets (the rendezvous's
        # address and port, the node count): a leading `--master-addr` would point every node elsewhere.
        script = command[1] if len(command) > 1 and isinstance(command[1], str) else ""
        if command[0] not in SCRIPT_OPTIONS or not script or script.startswith("-"):
            problems.append(
                f"command[0] is {command[0]!r}, a torchrun option: the command starts with the training script (or "
                "-m and a module); torchrun's own options (rendezvous, node count) are set by mlinfra"
            )
    problems += [p for i, arg in enumerate(command) if (p := value_problem(f"command[{i}]", arg))]
    if len(command) > MAX_COMMAND_ARGS:
        problems.append(
            f"command has {len(command)} arguments; at most {MAX_COMMAND_ARGS} (put the rest in a config file)"
        )
    size = sum(len(arg.encode()) for arg in command if isinstance(arg, str))
    if size > MAX_COMMAND_BYTES:
        problems.append(
            f"command is {size} bytes (UTF-8) in all; at most {MAX_COMMAND_BYTES}, so the node bootstrap fits the "
            "cloud's user data limit (put the rest in a config file)"
        )
    return problems


def env_problems(env: dict[str, str]) -> list[str]:
    problems = [p for k, v in env.items() if (p := env_key_problem(k) or value_problem(f"env value for {k!r}", v))]
    if len(env) > MAX_ENV_VARS:
        problems.append(f"env has {len(env)} variables; at most {MAX_ENV_VARS}")
    size = sum(len(f"{k}={v}".encode()) for k, v in env.items() if isinstance(k, str) and isinstance(v, str))
    if size > MAX_ENV_BYTES:
        problems.append(
            f"env is {size} bytes (UTF-8) of KEY=value in all; at most {MAX_ENV_BYTES}, so the node bootstrap fits "
            "the cloud's user data limit"
        )
    return problems


def job_problems(command: list[str] | tuple[str, ...], env: dict[str, str]) -> list[str]:
    """Everything wrong with a job's command and env, in a stable order."""
    return command_problems(command) + env_problems(env)
