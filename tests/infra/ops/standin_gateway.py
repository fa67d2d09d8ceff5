"""A stand-in for a deployed front door, for the smoke test: a real HTTPS server on loopback with a certificate for
the demo's hostname from a throw-away CA, answering as the gateway does (401 without a key, OpenAI's shapes, 404
in OpenAI's error shape for an unknown model). Each fault the smoke test must catch is one switch."""

from __future__ import annotations

import datetime
import json
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY = "sk-smoke-test-key"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def write_certificates(folder: Path, hostname: str, days: int = 90) -> tuple[Path, Path, Path]:
    """(CA bundle, server certificate chain, server key) for `hostname`, valid `days` from now."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("smoke test CA"))
        .issuer_name(_name("smoke test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name(hostname))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    bundle, chain, private = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    bundle.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return bundle, chain, private


@dataclass
class Behaviour:
    models: list[str]
    open_door: bool = False  # answers without a key
    unlisted: list[str] = field(default_factory=list)  # served but missing from /v1/models
    plain_404: bool = False  # AI Gateway's own text 404, not OpenAI's
    no_usage: bool = False


def _handler(behaviour: Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, status: int, body: object) -> None:
            data = (json.dumps(body) if not isinstance(body, str) else body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if not isinstance(body, str) else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorised(self) -> bool:
            if behaviour.open_door or self.headers.get("Authorization") == f"Bearer {KEY}":
                return True
            self._send(
                401,
                {
                    "error": {
                        "message": "Invalid or missing API key",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "invalid_api_key",
                    }
                },
            )
            return False

        def do_GET(self) -> None:
            if not self._authorised():
                return
            listed = [m for m in behaviour.models if m not in behaviour.unlisted]
            self._send(
                200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "mlinfra"} for m in listed]}
            )

        def do_POST(self) -> None:
            if not self._authorised():
                return
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            model = request.get("model")
            if model not in behaviour.models:
                if behaviour.plain_404:
                    self._send(404, "No matching route found.")
                else:
                    self._send(
                        404,
                        {
                            "error": {
                                "message": "no such model",
                                "type": "invalid_request_error",
                                "param": None,
                                "code": "model_not_found",
                            }
                        },
                    )
                return
            body = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "ready"}, "finish_reason": "stop"}
                ],
            }
            if not behaviour.no_usage:
                body["usage"] = {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}
            self._send(200, body)

    return Handler


class StandInGateway:
    """`with StandInGateway(folder, hostname, behaviour) as gateway:` serves on 127.0.0.1:gateway.port."""

    def __init__(self, folder: Path, hostname: str, behaviour: Behaviour, days: int = 90):
        self.ca, chain, key = write_certificates(folder, hostname, days)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(chain, key)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(behaviour))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]

    def __enter__(self) -> StandInGateway:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
