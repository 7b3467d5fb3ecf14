"""Helpers of the browser-facing tests: a deployment with an allow-list, CORS requests, TLS.

A test that drives a real browser against the shuffler starts its deployment
the same way (:func:`browser_deployment`, the page's origin in ``origins``)
and reads the same counters (:func:`stored_submissions`) before and after.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from _deploy import Deployment

from shuffledp.service.processes import ServiceProcess

#: The origin the tests allow, and one they do not.
ALLOWED_ORIGIN = "https://survey.example.org"
OTHER_ORIGIN = "https://attacker.example"


def browser_deployment(
    deploy: Callable[..., Deployment],
    origins: Sequence[str] = (ALLOWED_ORIGIN,),
    *,
    shuffler_args: Sequence[str] = (),
    **kwargs: Any,
) -> Deployment:
    """Start a deployment whose shuffler allows ``origins`` (``serve shuffler --allow-origin``)."""
    allow = [arg for origin in origins for arg in ("--allow-origin", origin)]
    return deploy(shuffler_args=[*allow, *shuffler_args], **kwargs)


def preflight(
    url: str, origin: str | None, method: str = "POST", headers: str | None = "content-type"
) -> httpx.Response:
    """The ``OPTIONS`` a browser sends before a cross-origin request (no ``Origin``: None)."""
    sent = {"Access-Control-Request-Method": method}
    if origin is not None:
        sent["Origin"] = origin
    if headers is not None:
        sent["Access-Control-Request-Headers"] = headers
    return httpx.request("OPTIONS", url, headers=sent, timeout=10)


def post_body(
    url: str,
    body: bytes,
    *,
    origin: str | None = None,
    content_type: str | None = "application/json",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST raw bytes with exactly this ``Origin`` and ``Content-Type`` (None: header left out)."""
    sent = dict(headers or {})
    if origin is not None:
        sent["Origin"] = origin
    if content_type is not None:
        sent["Content-Type"] = content_type
    return httpx.post(url, content=body, headers=sent, timeout=30)


def cors_headers(response: httpx.Response) -> dict[str, str]:
    """The response's ``Access-Control-*`` headers (lower-case names)."""
    return {
        name.lower(): value
        for name, value in response.headers.items()
        if name.lower().startswith("access-control-")
    }


def stored_submissions(dep: Deployment, client: httpx.Client | None = None) -> tuple[int, int]:
    """``submissions_accepted`` and ``users_waiting`` of the shuffler's ``/v1/metrics``."""
    get = client.get if client is not None else httpx.get
    metrics = get(f"{dep.shuffler.url}/v1/metrics", timeout=10).json()
    return metrics.get("submissions_accepted", 0), metrics["users_waiting"]


# -- TLS ----------------------------------------------------------------------------------


def self_signed_certificate(directory: Path, name: str = "server") -> tuple[Path, Path]:
    """Write a self-signed certificate for ``localhost`` and ``127.0.0.1`` and its key (PEM).

    Made with ``cryptography`` (P-256, valid for a day); the certificate is also
    the CA file a client must trust. Returns the certificate's and the key's paths.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


class HTTPSServiceProcess(ServiceProcess):
    """A service started with ``--tls-certfile/--tls-keyfile``: its URL is ``https://``.

    Its health is polled over HTTPS, trusting ``ca_file`` only.
    """

    def __init__(self, *args: Any, ca_file: Path, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ca_file = ca_file

    @property
    def url(self) -> str:
        """The service's base URL, ``https://127.0.0.1:PORT``."""
        return f"https://{self.host}:{self.port}"

    def http(self) -> httpx.Client:
        """An HTTP client that trusts this service's CA file only."""
        import ssl

        return httpx.Client(verify=ssl.create_default_context(cafile=str(self.ca_file)))

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Wait until ``GET /v1/health`` answers 200 over HTTPS."""
        import time

        deadline = time.monotonic() + timeout
        with self.http() as http:
            while True:
                self._check_alive(deadline)
                try:
                    if http.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)


def serve_over_tls(dep: Deployment, cert: Path, key: Path) -> None:
    """Start ``dep`` (made with ``start=False``) with both services on HTTPS.

    The shuffler forwards to the analyzer's ``https://`` URL and trusts its
    certificate through ``SSL_CERT_FILE`` (httpx reads it). Both services
    replace ``dep``'s, so whoever stops ``dep`` stops them.
    """
    tls = ["--tls-certfile", str(cert), "--tls-keyfile", str(key)]
    analyzer = HTTPSServiceProcess(
        "analyzer", [*dep.analyzer.args, *tls], dep.workdir, port=dep.analyzer.port, ca_file=cert
    )
    args = list(dep.shuffler.args)
    args[args.index("--forward") + 1] = f"https://127.0.0.1:{dep.analyzer.port}"
    shuffler = HTTPSServiceProcess(
        "shuffler",
        [*args, *tls],
        dep.workdir,
        env={"SSL_CERT_FILE": str(cert)},
        port=dep.shuffler.port,
        ca_file=cert,
    )
    dep.analyzer, dep.shuffler = analyzer, shuffler
    analyzer.launch()
    shuffler.launch()
    analyzer.wait_started()
    shuffler.wait_started()
