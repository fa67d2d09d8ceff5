"""`python -m infra smoke --stack S`: the real path, after `pulumi up`, as a client sees it. Through the stack's
public endpoint: the certificate verifies for the hostname (and how long it has left), plain HTTP gets no answer,
a call without a key is refused, `/v1/models` lists every model, one chat completion per model answers in OpenAI's
shape, and an unknown model gets OpenAI's 404. Exit 0 when all hold, 1 with the reasons otherwise.

The API key comes from an environment variable (never an argument, which shell history and process lists keep).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from infra.core.errors import InputError, Problem

KEY_ENV = "MLINFRA_API_KEY"
CERTIFICATE_DAYS_WARNING = 14
PROMPT = "Reply with the single word: ready."
UNKNOWN_MODEL = "mlinfra-smoke-no-such-model"


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any  # parsed JSON, or the text when it is not JSON


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Endpoint:
    """`https://host[:port]`, and the name the certificate must carry (the hostname, unless connecting elsewhere)."""

    host: str
    port: int
    server_name: str
    context: ssl.SSLContext
    timeout: float = 60.0
    http_port: int = 80  # where plain HTTP must get no answer

    def _tls(self) -> ssl.SSLSocket:
        """A TLS connection to host:port, verified for `server_name` (SNI and the certificate's name), whatever
        address it goes to."""
        raw = socket.create_connection((self.host, self.port), timeout=self.timeout)
        try:
            return self.context.wrap_socket(raw, server_hostname=self.server_name)
        except BaseException:
            raw.close()
            raise

    def request(self, method: str, path: str, body: dict | None = None, key: str | None = None) -> Answer:
        import http.client

        connection = http.client.HTTPConnection(self.server_name, self.port, timeout=self.timeout)
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        try:
            connection.sock = self._tls()  # used as is: the request goes over the verified connection
            connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            response = connection.getresponse()
            raw = response.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as error:
            return Answer(0, f"no answer: {type(error).__name__}: {error}")
        finally:
            connection.close()
        try:
            return Answer(response.status, json.loads(raw))
        except json.JSONDecodeError:
            return Answer(response.status, raw)

    def certificate(self) -> dict[str, Any]:
        """The server's certificate as verified against the context's CAs for `server_name` (ssl raises if not)."""
        with self._tls() as tls:
            return dict(tls.getpeercert() or {})

    def plain_http_answers(self, timeout: float = 5.0) -> bool:
        """Whether anything answers HTTP on the plain port (an NLB with only a 443 listener lets it time out)."""
        try:
            with socket.create_connection((self.host, self.http_port), timeout=timeout) as raw:
                raw.sendall(
                    f"GET /v1/models HTTP/1.1\r\nHost: {self.server_name}\r\nConnection: close\r\n\r\n".encode()
                )
                return raw.recv(16).startswith(b"HTTP/")
        except OSError:
            return False


def _openai_error(answer: Answer, code: str | None = None) -> bool:
    error = answer.body.get("error") if isinstance(answer.body, dict) else None
    return (
        isinstance(error, dict)
        and isinstance(error.get("message"), str)
        and (code is None or error.get("code") == code)
    )


def _chat_shape(answer: Answer, model: str) -> str | None:
    """Why `answer` is not an OpenAI chat completion of `model`, or None."""
    if answer.status != 200:
        return f"HTTP {answer.status}: {str(answer.body)[:200]}"
    body = answer.body if isinstance(answer.body, dict) else {}
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        return "no choices in the answer"
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        return "choices[0].message.content is not text"
    usage = body.get("usage")
    if not isinstance(usage, dict) or not isinstance(usage.get("total_tokens"), int):
        return "no usage.total_tokens (the token limits count it)"
    if body.get("model") != model:
        return f"answered as model {body.get('model')!r}"
    return None


def certificate_check(endpoint: Endpoint, now: datetime.datetime) -> Check:
    try:
        cert = endpoint.certificate()
    except ssl.SSLCertVerificationError as error:
        return Check(
            "tls", False, f"the certificate does not verify for {endpoint.server_name}: {error.verify_message}"
        )
    except (ssl.SSLError, OSError) as error:
        return Check("tls", False, f"no TLS connection to {endpoint.host}:{endpoint.port}: {error}")
    expires = datetime.datetime.fromtimestamp(ssl.cert_time_to_seconds(cert["notAfter"]), datetime.UTC)
    days = (expires - now).days
    issuer = ", ".join(f"{k}={v}" for part in cert.get("issuer", ()) for k, v in part)
    if days < CERTIFICATE_DAYS_WARNING:
        return Check("tls", False, f"the certificate expires in {days} day(s) ({expires:%Y-%m-%d}); renew it")
    return Check("tls", True, f"verifies for {endpoint.server_name}, issued by {issuer}, {days} days left")


def run_checks(
    endpoint: Endpoint,
    models: Sequence[str],
    key: str | None,
    now: datetime.datetime,
    report: Callable[[Check], None] = lambda c: None,
) -> list[Check]:
    """Every check, each reported as it completes. `key` None: the stack asked for no authentication."""
    checks: list[Check] = []

    def add(check: Check) -> Check:
        checks.append(check)
        report(check)
        return check

    if not add(certificate_check(endpoint, now)).ok:
        return checks  # nothing else can be trusted over this connection
    add(
        Check("http-refused", False, f"plain HTTP on port {endpoint.http_port} answers; only TLS should")
        if endpoint.plain_http_answers()
        else Check("http-refused", True, f"nothing answers plain HTTP on port {endpoint.http_port}")
    )
    chat = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 8, "temperature": 0}
    if key is not None:
        anonymous = endpoint.request("POST", "/v1/chat/completions", {"model": models[0], **chat})
        add(
            Check("auth", True, f"a call without a key gets HTTP {anonymous.status}")
            if anonymous.status in (401, 403)
            else Check("auth", False, f"a call without a key gets HTTP {anonymous.status}, not 401: the door is open")
        )
    listed = endpoint.request("GET", "/v1/models", key=key)
    names = (
        {m.get("id") for m in listed.body.get("data", []) if isinstance(m, dict)}
        if isinstance(listed.body, dict)
        else set()
    )
    missing = [m for m in models if m not in names]
    add(
        Check(
            "models",
            listed.status == 200 and not missing,
            f"HTTP {listed.status}; lists {', '.join(sorted(map(str, names))) or 'nothing'}"
            + (f"; missing {', '.join(missing)}" if missing else ""),
        )
    )
    for model in models:
        started = time.monotonic()
        answer = endpoint.request("POST", "/v1/chat/completions", {"model": model, **chat}, key=key)
        problem = _chat_shape(answer, model)
        took = time.monotonic() - started
        add(Check(f"chat {model}", problem is None, problem or f"answered in {took:.1f}s"))
    unknown = endpoint.request("POST", "/v1/chat/completions", {"model": UNKNOWN_MODEL, **chat}, key=key)
    add(
        Check("unknown-model", True, "HTTP 404 in OpenAI's error shape (model_not_found)")
        if unknown.status == 404 and _openai_error(unknown, "model_not_found")
        else Check("unknown-model", False, f"HTTP {unknown.status} {str(unknown.body)[:120]!r}, not OpenAI's 404")
    )
    return checks


def endpoint_for(
    hostname: str, connect: str | None, ca_bundle: str | None, timeout: float, http_port: int = 80
) -> Endpoint:
    context = ssl.create_default_context(cafile=ca_bundle)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if connect is None:
        return Endpoint(hostname, 443, hostname, context, timeout, http_port)
    try:
        parts = urlsplit(connect if "//" in connect else f"//{connect}")
        port = parts.port or 443
    except ValueError:
        parts, port = None, 443
    if parts is None or not parts.hostname:
        raise InputError(Problem("--connect", f"{connect!r} is not host[:port]"))
    return Endpoint(parts.hostname, port, hostname, context, timeout, http_port)


def add_smoke_parser(verbs: argparse._SubParsersAction) -> None:
    smoke = verbs.add_parser("smoke", help="after `up`: one authenticated call per model through the public endpoint")
    smoke.add_argument("--stack", "-s", required=True, help="serving stack whose front door to call")
    smoke.add_argument(
        "--connect",
        metavar="HOST[:PORT]",
        help="connect here instead of the hostname's DNS record (the load balancer's name, before DNS points at "
        "it); the certificate is still checked for the hostname",
    )
    smoke.add_argument("--ca-bundle", metavar="FILE", help="CA certificates to verify with (default: the system's)")
    smoke.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default 120)")
    smoke.add_argument(
        "--http-port", type=int, default=80, help="the port where plain HTTP must get no answer (default 80)"
    )
    smoke.set_defaults(handler=run_smoke)


def _target(stack: str) -> tuple[str, list[str], bool]:
    """The stack's hostname, its models' names and whether it asks for API keys."""
    from infra.core.project import load_project, stack_config
    from infra.kinds import load

    config = load(stack_config(load_project(), stack))
    serving = getattr(config, "serving", None)
    if serving is None:
        raise InputError(Problem("--stack", f"'{stack}' is not a serving stack"))
    gateway = getattr(serving, "gateway", None)
    if gateway is None:
        raise InputError(
            Problem("--stack", f"'{stack}' declares no front door (mlinfra:serving.gateway): nothing to call")
        )
    return gateway.hostname, [m.name for m in serving.models], gateway.auth == "api-key"


MAX_TIMEOUT_S = 3600.0


def run_smoke(args: argparse.Namespace) -> int:
    if not (math.isfinite(args.timeout) and 0 < args.timeout <= MAX_TIMEOUT_S):
        raise InputError(Problem("--timeout", f"must be a positive number of seconds, at most {MAX_TIMEOUT_S:g}"))
    if not 1 <= args.http_port <= 65535:
        raise InputError(Problem("--http-port", "must be a port number, 1-65535"))
    if args.ca_bundle and not os.path.isfile(args.ca_bundle):
        raise InputError(Problem("--ca-bundle", f"{args.ca_bundle} is not a file"))
    hostname, models, keyed = _target(args.stack)
    key = os.environ.get(KEY_ENV) if keyed else None
    if keyed and not key:
        raise InputError(Problem(KEY_ENV, "set it to one client's API key (the stack authenticates callers)"))
    endpoint = endpoint_for(hostname, args.connect, args.ca_bundle, args.timeout, args.http_port)
    print(f"smoke test of https://{hostname}/v1 ({len(models)} model(s))", flush=True)

    def show(check: Check) -> None:
        print(f"  {'ok  ' if check.ok else 'FAIL'} {check.name}: {check.detail}", flush=True)

    checks = run_checks(endpoint, models, key, datetime.datetime.now(datetime.UTC), show)
    failed = [c for c in checks if not c.ok]
    print(
        f"{len(checks) - len(failed)} of {len(checks)} checks pass"
        + (f"; failed: {', '.join(c.name for c in failed)}" if failed else "")
    )
    return 1 if failed else 0
