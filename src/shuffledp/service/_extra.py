"""Check that the ``service`` extra is installed before a service command starts."""

from __future__ import annotations

from shuffledp._optional import require

__all__ = ["require_service_extra"]


def require_service_extra() -> None:
    """Raise :class:`~shuffledp.MissingExtraError` naming the extra if a dependency is missing."""
    for module in (
        "cryptography.hazmat.primitives.hpke",
        "starlette",
        "uvicorn",
        "httptools",
        "httpx",
        "prometheus_client",
    ):
        require(module, extra="service")
