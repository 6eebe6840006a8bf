"""`configure_tracing()`: the OpenTelemetry SDK of a process the command line starts, from `OTEL_*`.

The library itself only uses the API (`infrastructure/tracing.py`); the SDK belongs to whoever
runs the process. The command line's processes (`worker` and its roles, `relay`, `demo`, and the
audit page's `serve`) call this once at start: when the SDK is installed (the `otel` extra), no
tracer provider is set yet (an application's own, or `opentelemetry-instrument`'s, is left alone)
and the operator named a trace exporter (`OTEL_TRACES_EXPORTER=otlp`, `console`, ...), the SDK
configures itself from the standard variables exactly as `opentelemetry-instrument` does (its own
`_OTelSDKConfigurator`: exporters, sampler, resource, batch processor settings). Without an
exporter named nothing is configured: a provider with nowhere to send would only cost.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import signals
from opentelemetry import trace
from sessionledger.infrastructure.settings import Settings

__all__ = ["configure_tracing"]

log = logging.getLogger(__name__)

_EXTRA = "pip install 'sessionledger[otel]'"


def configure_tracing(settings: Settings, process: str) -> bool:
    """Configure the SDK for this process (see the module's docstring); whether it did.

    `process` names it (`worker`, `relay`, `demo`, `serve`...): the service is
    `sessionledger-{process}` unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` names one.
    The instrumentations `settings.otel_instrument` asks for are turned on with it.
    """
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False  # the application's own provider, or opentelemetry-instrument's
    try:
        from opentelemetry.sdk._configuration import _get_exporter_names, _OTelSDKConfigurator
        from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector
    except ImportError:
        return False  # no SDK: the API's no-op it stays
    if not _get_exporter_names("traces"):  # the SDK's reading of OTEL_TRACES_EXPORTER
        return False
    named = OTELResourceDetector().detect().attributes.get(SERVICE_NAME)
    _OTelSDKConfigurator().configure(  # type: ignore[no-untyped-call]  # the SDK leaves it untyped
        resource_attributes={} if named else {SERVICE_NAME: f"sessionledger-{process}"}
    )
    _instrument(settings)
    provider = trace.get_tracer_provider()
    signals.worker_process_shutdown.connect(_flusher(provider), weak=False)
    return True


def _flusher(provider: Any) -> Any:
    """A Celery pool process ends with `os._exit`, past the SDK's exit hook: flush it first."""

    def flush(**_: Any) -> None:
        provider.force_flush()

    return flush


def _instrument(settings: Settings) -> None:
    """The instrumentation packages the operator asked for (`SESSIONLEDGER_OTEL_INSTRUMENT`).

    Their declared version ranges trail the libraries (SQLAlchemy 2.1 is outside the sqlalchemy
    instrumentation's `< 2.1`, which would make it skip itself with only a log line): the
    operator asked for the spans, so the check is skipped, and tests/adapters/test_tracing.py
    checks that they come."""
    try:
        if "celery" in settings.otel_instrument:
            from opentelemetry.instrumentation.celery import CeleryInstrumentor

            CeleryInstrumentor().instrument(skip_dep_check=True)  # type: ignore[no-untyped-call]  # untyped upstream
        if "sqlalchemy" in settings.otel_instrument:
            from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

            SQLAlchemyInstrumentor().instrument(skip_dep_check=True)
    except ImportError as error:
        raise ValueError(
            f"SESSIONLEDGER_OTEL_INSTRUMENT asks for {error.name}, which is not installed: {_EXTRA}"
        ) from None
