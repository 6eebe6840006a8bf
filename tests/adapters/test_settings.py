"""The one settings object: its defaults, its environment names, its checks, and who builds it."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from sessionledger.infrastructure.settings import DEFAULT_DATABASE_URL, Settings
from sessionledger.workers import app as app_module
from sessionledger.workers.app import create_app, settings_of
from sessionledger.workers.failures import operator_message

ROOT = Path(__file__).resolve().parents[2]
MEMORY_BROKER = "memory://localhost//"


@pytest.fixture
def clean_environment(monkeypatch):
    """No SESSIONLEDGER_* or OPENAI_* variable from the machine running the tests."""
    for name in list(os.environ):
        if name.startswith(("SESSIONLEDGER_", "OPENAI_")):
            monkeypatch.delenv(name)
    return monkeypatch


def test_the_library_defaults_to_the_embedded_ledger_and_no_queue(clean_environment):
    settings = Settings()
    assert settings.database_url == DEFAULT_DATABASE_URL
    assert settings.broker_url is None
    assert (settings.queue_prefix, settings.partitions, settings.model) == ("sessionledger", 2, "gpt-4o")
    assert settings.lease == settings.task_time_limit + 60


def test_every_knob_comes_from_its_prefixed_variable_and_arguments_win(clean_environment):
    clean_environment.setenv("SESSIONLEDGER_BROKER_URL", "redis://elsewhere:6379/0")
    clean_environment.setenv("SESSIONLEDGER_PARTITIONS", "8")
    clean_environment.setenv("SESSIONLEDGER_POLICY", "apps.x.enabled = false")
    clean_environment.setenv("SESSIONLEDGER_METRICS_PORT", "")  # empty: unset, as docker compose writes it
    settings = Settings(broker_url=MEMORY_BROKER)
    assert (settings.broker_url, settings.partitions, settings.metrics_port) == (MEMORY_BROKER, 8, None)
    assert settings.policy == "apps.x.enabled = false"
    assert settings.queue_names.partitions == 8


def test_the_openai_packages_own_variables_are_the_fallback(clean_environment):
    clean_environment.setenv("OPENAI_BASE_URL", "http://openai.invalid/v1")
    clean_environment.setenv("OPENAI_API_KEY", "openai-key")
    assert (Settings().openai_base_url, Settings().openai_api_key) == (
        "http://openai.invalid/v1",
        "openai-key",
    )
    clean_environment.setenv("SESSIONLEDGER_OPENAI_API_KEY", "ours")
    assert Settings().openai_api_key == "ours"
    assert Settings(openai_api_key="given").openai_api_key == "given"


def test_a_named_env_file_and_secrets_directory_are_read_below_the_environment(clean_environment, tmp_path):
    """pydantic-settings' `_env_file` and `_secrets_dir`: read when named (the environment and the
    arguments still win), and no `.env` in the working directory is read unasked."""
    env_file = tmp_path / "prod.env"
    env_file.write_text("SESSIONLEDGER_POOL_SIZE=17\nSESSIONLEDGER_PARTITIONS=6\n")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "SESSIONLEDGER_OPENAI_API_KEY").write_text("from-the-secret")
    clean_environment.chdir(tmp_path)
    (tmp_path / ".env").write_text("SESSIONLEDGER_POOL_SIZE=3\n")
    assert Settings().pool_size == Settings.model_fields["pool_size"].default
    assert Settings(_env_file=env_file).pool_size == 17
    assert Settings(_secrets_dir=secrets).openai_api_key == "from-the-secret"
    clean_environment.setenv("SESSIONLEDGER_PARTITIONS", "4")
    settings = Settings(_env_file=env_file, _secrets_dir=secrets, pool_size=9)
    assert (settings.pool_size, settings.partitions, settings.openai_api_key) == (9, 4, "from-the-secret")


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"task_soft_time_limit": 300, "task_time_limit": 300}, "below task_time_limit"),
        ({"task_time_limit": 900, "task_soft_time_limit": 800}, "half the broker's redelivery horizon"),
        ({"ingest_patience": 1000}, "half the broker's redelivery horizon"),
        ({"partitions": 0}, "greater than or equal to 1"),
        ({"no_such_knob": 1}, "Extra inputs are not permitted"),
    ],
)
def test_invalid_settings_are_value_errors_naming_the_problem(knobs, message):
    with pytest.raises(ValueError, match=message):
        Settings(**knobs)


def test_settings_travel_as_json_unchanged_whatever_the_receivers_environment(clean_environment):
    """What `workers.launch` relies on to hand its settings to its children."""
    sent = Settings(database_url="sqlite:////tmp/x.db", broker_url=MEMORY_BROKER, openai_api_key="k")
    clean_environment.setenv("SESSIONLEDGER_DATABASE_URL", "sqlite:////tmp/elsewhere.db")
    clean_environment.setenv("OPENAI_API_KEY", "other")
    assert Settings.model_validate_json(sent.model_dump_json()) == sent


def test_the_celery_application_is_built_from_the_settings_it_is_given():
    settings = Settings(
        broker_url=MEMORY_BROKER, queue_prefix="given", task_time_limit=100, task_soft_time_limit=90
    )
    celery = create_app(settings)
    assert settings_of(celery) is settings
    assert celery.conf.broker_url == MEMORY_BROKER
    assert celery.conf.task_time_limit == 100 and celery.conf.task_default_exchange == "given"


def test_a_celery_application_needs_a_broker():
    with pytest.raises(ValueError, match="needs a broker"):
        create_app(Settings(broker_url=None))


def test_the_module_level_app_for_celery_dash_a_is_built_from_the_environment_on_first_use(clean_environment):
    clean_environment.setenv("SESSIONLEDGER_BROKER_URL", MEMORY_BROKER)
    clean_environment.setenv("SESSIONLEDGER_QUEUE_PREFIX", "from-the-environment")
    vars(app_module).pop("app", None)
    try:
        built = app_module.app
        assert app_module.app is built
        assert settings_of(built).queue_prefix == "from-the-environment"
    finally:
        vars(app_module).pop("app", None)


def test_only_the_settings_read_the_environment():
    """Everything else is handed its settings; pydantic-settings reads the variables for them."""
    reads = re.compile(r"os\.environ|getenv\(|environ\[")
    sources = [
        path
        for folder in ("domain", "infrastructure", "workers", "sessionledger")
        for path in (ROOT / folder).rglob("*.py")
    ]
    assert sources
    assert [str(path.relative_to(ROOT)) for path in sources if reads.search(path.read_text())] == []


def test_the_session_ttl_is_none_by_default_and_read_as_seconds_or_iso_8601(clean_environment):
    assert Settings().session_ttl is None  # nothing expires unless the operator says so
    clean_environment.setenv("SESSIONLEDGER_SESSION_TTL", "P30D")
    assert Settings().session_ttl == timedelta(days=30)
    clean_environment.setenv("SESSIONLEDGER_SESSION_TTL", "3600")
    assert Settings().session_ttl == timedelta(hours=1)
    assert Settings(session_ttl=timedelta(minutes=5)).session_ttl == timedelta(minutes=5)


@pytest.mark.parametrize("ttl", ["0", "-60", "-P1D", "PT0S", 0, timedelta(seconds=-1)])
def test_a_session_ttl_that_is_not_positive_is_refused_in_one_line(clean_environment, ttl):
    with pytest.raises(ValueError, match="session_ttl must be positive") as refused:
        Settings(session_ttl=ttl)
    line = operator_message(refused.value, None)
    assert line is not None and "\n" not in line
    assert line.startswith("invalid settings: session_ttl: Value error, session_ttl must be positive")


def test_the_architecture_lists_every_setting():
    """docs/architecture.md's configuration list names each setting by its variable."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", text.split("## Configuration", 1)[1]))
    assert {name.upper() for name in Settings.model_fields} - listed == set()
