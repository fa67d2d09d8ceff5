"""`python -m infra smoke` against a real HTTPS stand-in of the front door on loopback (a certificate for the
demo's hostname from a throw-away CA): the healthy door passes every check; each fault it must catch (an open
door, a model missing from /v1/models, a plain-text 404, no usage, a certificate for another CA or about to
expire, plain HTTP answering) exits 1 naming the failed check."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from infra.cli import main
from tests.infra.ops.standin_gateway import KEY, Behaviour, StandInGateway

HOST = "models.example.com"  # serving-demo's gateway.hostname
MODELS = ["llama-3-8b-neuron", "mistral-7b"]


def free_port() -> int:
    """A loopback port nothing listens on, for the plain-HTTP check (port 80 may be anyone's on a machine)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def smoke(
    capsys, monkeypatch, gateway: StandInGateway, *extra: str, ca=None, key=KEY, http_port=None, stack="serving-demo"
) -> tuple[int, str]:
    if key is None:
        monkeypatch.delenv("MLINFRA_API_KEY", raising=False)
    else:
        monkeypatch.setenv("MLINFRA_API_KEY", key)
    code = main(
        [
            "smoke",
            "--stack",
            stack,
            "--connect",
            f"127.0.0.1:{gateway.port}",
            "--ca-bundle",
            str(ca or gateway.ca),
            "--timeout",
            "10",
            "--http-port",
            str(http_port or free_port()),
            *extra,
        ]
    )
    return code, capsys.readouterr().out


def failed(out: str) -> list[str]:
    return [line.split("FAIL ", 1)[1].split(":", 1)[0] for line in out.splitlines() if " FAIL " in line]


def test_a_healthy_door_passes_every_check(capsys, monkeypatch, tmp_path):
    with StandInGateway(tmp_path, HOST, Behaviour(MODELS)) as gateway:
        code, out = smoke(capsys, monkeypatch, gateway)
    assert code == 0, out
    assert "7 of 7 checks pass" in out
    assert f"verifies for {HOST}, issued by commonName=smoke test CA" in out
    assert "a call without a key gets HTTP 401" in out
    for model in MODELS:
        assert f"ok   chat {model}: answered in" in out


def test_gke_s_door_is_checked_the_same_way(capsys, monkeypatch, tmp_path):
    """On GKE the proxies end TLS themselves (the passthrough load balancer forwards TCP): the check connects to
    the load balancer's address with the hostname as SNI and verifies the listener's certificate, as here."""
    with StandInGateway(tmp_path, HOST, Behaviour(["llama-3-8b-l4"])) as gateway:
        code, out = smoke(capsys, monkeypatch, gateway, stack="serving-gcp-demo")
    assert code == 0, out
    assert "ok   chat llama-3-8b-l4: answered in" in out and "6 of 6 checks pass" in out


@pytest.mark.parametrize(
    "behaviour, check",
    [
        (Behaviour(MODELS, open_door=True), "auth"),
        (Behaviour(MODELS, unlisted=["mistral-7b"]), "models"),
        (Behaviour(MODELS, plain_404=True), "unknown-model"),
        (Behaviour(MODELS, no_usage=True), "chat llama-3-8b-neuron"),
        (Behaviour(["llama-3-8b-neuron"]), "chat mistral-7b"),  # the route lacks a model
    ],
    ids=["open-door", "unlisted", "plain-404", "no-usage", "unrouted"],
)
def test_each_fault_exits_1_naming_its_check(capsys, monkeypatch, tmp_path, behaviour, check):
    with StandInGateway(tmp_path, HOST, behaviour) as gateway:
        code, out = smoke(capsys, monkeypatch, gateway)
    assert code == 1
    assert check in failed(out)


def test_a_certificate_from_another_ca_stops_before_any_key_is_sent(capsys, monkeypatch, tmp_path):
    (tmp_path / "other").mkdir()
    with StandInGateway(tmp_path / "other", HOST, Behaviour(MODELS)) as other:
        foreign_ca = other.ca
    with StandInGateway(tmp_path, HOST, Behaviour(MODELS)) as gateway:
        code, out = smoke(capsys, monkeypatch, gateway, ca=foreign_ca)
    assert code == 1 and failed(out) == ["tls"]
    assert "does not verify for models.example.com" in out
    assert out.rstrip().endswith("0 of 1 checks pass; failed: tls")  # nothing is sent over an unverified line


def test_a_certificate_about_to_expire_fails(capsys, monkeypatch, tmp_path):
    with StandInGateway(tmp_path, HOST, Behaviour(MODELS), days=3) as gateway:
        code, out = smoke(capsys, monkeypatch, gateway)
    assert code == 1 and failed(out) == ["tls"] and "expires in" in out


def test_plain_http_answering_fails(capsys, monkeypatch, tmp_path):
    class Plain(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with StandInGateway(tmp_path, HOST, Behaviour(MODELS)) as gateway:
            code, out = smoke(capsys, monkeypatch, gateway, http_port=server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1 and failed(out) == ["http-refused"], out


def test_bad_input_exits_2(capsys, monkeypatch, tmp_path):
    with StandInGateway(tmp_path, HOST, Behaviour(MODELS)) as gateway:
        assert smoke(capsys, monkeypatch, gateway, key=None)[0] == 2
        assert main(["smoke", "--stack", "serving-demo", "--timeout", "0"]) == 2
        for endless in ("nan", "inf", "1e9"):  # a check that never ends is not a check
            assert main(["smoke", "--stack", "serving-demo", "--timeout", endless]) == 2
            assert capsys.readouterr().err.startswith("error: --timeout: must be a positive number of seconds")
        assert main(["smoke", "--stack", "serving-demo", "--ca-bundle", str(tmp_path / "missing.pem")]) == 2
        assert main(["smoke", "--stack", "serving-demo", "--http-port", "0"]) == 2
        assert main(["smoke", "--stack", "serving-demo", "--connect", "host:notaport"]) == 2
    assert "MLINFRA_API_KEY" in capsys.readouterr().err
