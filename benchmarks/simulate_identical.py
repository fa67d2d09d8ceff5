"""Check (not a test): the twin's figures are byte-identical between two checkouts (issue 21, the twin's speed).

    python benchmarks/simulate_identical.py [OTHER_CHECKOUT | --pure] [--record DIR] [--against DIR]

Runs `python -m infra simulate` with the cases below in this checkout and in OTHER_CHECKOUT (e.g. a worktree of
main), each from its own tree, and compares stdout and the SVG picture byte for byte. `--record DIR` keeps this
checkout's outputs; `--against DIR` compares with outputs recorded before instead of running OTHER_CHECKOUT.
`--pure` compares this checkout's twin as it runs (compiled, where built: infra/serving/twin/accel.py) with the
same checkout run from its source (MLINFRA_TWIN_PURE=1). The line (or JSON key) naming which twin ran is left
out of the comparison. Exit 1 if a case differs, naming it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = (
    "-c", "mlinfra:serving.models[1].maxReplicas=40", "-c", "mlinfra:serving.nodePools.g5.maxSize=40",
    "--model", "mistral-7b", "--rate", "50",
)  # fmt: skip
CASES: dict[str, tuple[str, ...]] = {
    "diurnal-json": ("--trace", "diurnal", "--json"),
    "diurnal-text": ("--trace", "diurnal"),
    "burst-json": ("--trace", "burst", "--json"),
    "ramp-json": ("--trace", "ramp", "--json"),
    "steady-seed7-spot": ("--trace", "steady", "--seed", "7", "--spot-interruptions-per-node-hour", "0.5", "--json"),
    "burst-rate8-6h": ("--trace", "burst", "--rate", "8", "--hours", "6", "--json"),
    "fixed-lengths": ("--trace", "ramp", "--prompt-tokens", "300:300", "--output-tokens", "100:400", "--json"),
    "bench-50rps-1h": (*BENCH, "--hours", "1", "--json"),
}


ENGINE = re.compile(rb'^(twin: .*|  "engine": "[a-z]+",?)\n', re.MULTILINE)  # which twin ran (simulate's last line)


def run_case(tree: Path, name: str, args: tuple[str, ...], out: Path, pure: bool = False) -> bytes:
    picture = out / f"{name}.svg"
    env = {k: v for k, v in os.environ.items() if k != "MLINFRA_TWIN_PURE"}
    if pure:
        env["MLINFRA_TWIN_PURE"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "infra", "simulate", "--stack", "serving-demo", *args, "--picture", str(picture)],
        cwd=tree, capture_output=True, check=False, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{name} in {tree}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
    stdout = ENGINE.sub(b"", done.stdout.replace(str(picture).encode(), b"PICTURE"))
    return stdout + b"\n--- picture ---\n" + picture.read_bytes()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, nargs="?", help="the other checkout (e.g. main's worktree)")
    parser.add_argument("--record", type=Path, help="keep this checkout's outputs in DIR")
    parser.add_argument("--against", type=Path, help="compare with outputs recorded in DIR")
    parser.add_argument("--pure", action="store_true", help="compare with this checkout run from its source")
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        for name, case in CASES.items():
            mine = run_case(ROOT, name, case, tmp)
            if args.record:
                args.record.mkdir(parents=True, exist_ok=True)
                (args.record / f"{name}.out").write_bytes(mine)
            if args.against:
                theirs = (args.against / f"{name}.out").read_bytes()
            elif args.other or args.pure:
                theirs = run_case(args.other.resolve() if args.other else ROOT, name, case, tmp, pure=args.pure)
            else:
                print(f"{name}: recorded ({len(mine)} bytes)")
                continue
            same = mine == theirs
            failed += not same
            print(f"{name}: {'identical' if same else 'DIFFERENT'} ({len(mine)} bytes)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
