"""docker-compose.yml (docker cannot run here, so the file is checked by parsing it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sessionledger.infrastructure.queue_names import parse_partitions
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.app import worker_arguments
from sessionledger.workers.launch import ROLES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def app_services(compose: dict) -> dict[str, dict]:
    return {name: s for name, s in compose["services"].items() if s.get("image") == "sessionledger:latest"}


def test_the_stack_has_the_database_the_brokers_the_relay_and_the_workers(compose):
    services = compose["services"]
    assert {"postgres", "rabbitmq", "redis", "relay", "worker"} <= set(services)
    assert all("healthcheck" in service for service in services.values())
    for name, service in app_services(compose).items():
        assert service["build"] == "."
        assert service["command"][0] in ROLES, name
        assert all(dep["condition"] == "service_healthy" for dep in service["depends_on"].values())
        assert service["environment"]["SESSIONLEDGER_DATABASE_URL"].startswith("postgresql+psycopg://")


def test_ingest_services_cover_every_partition_exactly_once_and_are_pinged_by_their_node_name(compose):
    services = app_services(compose)
    partitions = int(services["worker"]["environment"]["SESSIONLEDGER_PARTITIONS"])
    settings = Settings(partitions=partitions)
    owned: list[int] = []
    for service in services.values():
        if service["command"][0] != "ingest":
            continue
        chosen = parse_partitions(service["command"][1].removeprefix("--partitions="), partitions)
        owned += chosen
        arguments = worker_arguments(
            settings, "ingest", partitions=chosen, process_id=1
        )  # process 1 of its container
        hostname = next(a for a in arguments if "hostname" in a)
        node = hostname.removeprefix("--hostname=").replace("%h", "$$HOSTNAME")
        assert f"-d {node} " in service["healthcheck"]["test"][1]
    assert sorted(owned) == list(range(partitions))
    assert "-d tasks-1@$$HOSTNAME " in services["worker"]["healthcheck"]["test"][1]


def test_the_relay_serves_the_metrics_its_health_check_reads(compose):
    relay = compose["services"]["relay"]
    port = relay["environment"]["SESSIONLEDGER_METRICS_PORT"]
    assert relay["command"] == ["relay"]
    assert f":{port}/metrics" in " ".join(relay["healthcheck"]["test"])


def test_the_image_runs_the_worker_roles():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["python", "-m", "sessionledger.workers.launch"]' in dockerfile
    for package in ("domain", "infrastructure", "workers"):
        assert f"COPY {package} ./{package}" in dockerfile


def test_every_published_port_is_on_loopback_and_the_metrics_listen_in_the_container(compose):
    """The example passwords must not reach the network: each port is published on 127.0.0.1."""
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)
    assert compose["services"]["relay"]["environment"]["SESSIONLEDGER_METRICS_HOST"] == "0.0.0.0"
