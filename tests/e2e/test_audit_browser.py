"""The audit page in a real browser: `sessionledger serve` started by the CLI on a SQLite ledger,
tokens made with `sessionledger token create`, and Debian's headless chromium driven through its
chromedriver (nothing downloads). Screenshots of each page go to $ARTIFACTS_DIR, else the test's
tmp directory (`artifacts/`)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sessionledger.domain.records import Kind
from sessionledger.infrastructure import open_service

from tests.e2e.queue_deployment import stop_process
from tests.e2e.test_cli_mcp import free_port, wait_for_port
from tests.fakes.audit_ledger import BOB_TEXT, SUMMARY, AuditLedger, fill

CLI = str(Path(sys.executable).with_name("sessionledger"))
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
        reason="needs Debian's chromium and chromium-driver (.ci/run installs them)",
    ),
]
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def _token(url: str, user: str, *admin: str) -> str:
    made = subprocess.run(
        [CLI, "token", "create", "--user", user, *admin, "--database-url", url],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return made.stdout.strip().splitlines()[-1]


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    where = Path(os.environ.get("ARTIFACTS_DIR") or tmp_path / "artifacts") / "audit-page"
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, AuditLedger, list[int]]]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_service(url) as service:
        ledger = fill(service)
        compaction = next(r for r in service.records(ledger.alice) if r.kind is Kind.COMPACTION)
        archived = list(compaction.payload["archived"])  # type: ignore[index]
    token = _token(url, "alice")
    port = free_port()
    server = subprocess.Popen(
        [CLI, "serve", "--port", str(port), "--database-url", url], stderr=subprocess.PIPE
    )
    try:
        wait_for_port(port, server)
        yield f"http://127.0.0.1:{port}", token, ledger, archived
    finally:
        stop_process(server, signal.SIGINT, 20)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    # chromium keeps its crash reports and dconf its settings under the user's config and cache
    # directories whatever the profile: these point into the test's own, which goes with it
    home = {name: str(tmp_path / "chromium-home" / name) for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, env={**os.environ, **home}), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        kept_here = Path(home["XDG_CONFIG_HOME"], "chromium").is_dir()  # not in $HOME
        for made in ("chromium-profile", "chromium-home"):
            shutil.rmtree(tmp_path / made, ignore_errors=True)
        assert kept_here, "chromium kept its config elsewhere than the test's XDG_CONFIG_HOME"


def test_an_auditor_logs_in_follows_a_compaction_and_sees_what_the_model_saw(
    served: tuple[str, str, AuditLedger, list[int]], browser: object, artifacts: Path
) -> None:
    base, token, ledger, archived_positions = served
    driver = browser
    shot = lambda name: driver.save_screenshot(str(artifacts / f"{name}.png"))  # noqa: E731

    driver.get(base + "/")
    assert driver.current_url == base + "/login"  # sent to log in
    shot("login")
    driver.find_element(By.NAME, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "sessions"))  # a click does not wait
    assert driver.current_url == base + "/"
    shot("sessions")
    links = driver.find_elements(By.CSS_SELECTOR, "#sessions a")
    assert [a.text for a in links] == [ledger.alice]  # hers only: not Bob's, not her deleted one
    assert driver.get_cookie("sessionledger_token")["httpOnly"] is True

    links[0].click()
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "timeline"))
    shot("timeline")
    rows = driver.find_elements(By.CSS_SELECTOR, "#timeline tr[data-position]")
    assert len(rows) == 17 and "compaction" in driver.page_source and "rewind" in driver.page_source
    assert driver.title != "owned"  # the message that is markup was shown, not run

    driver.find_element(By.CSS_SELECTOR, "#timeline a.record").click()  # the compaction
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "archived"))
    shot("compaction")
    archived = driver.find_elements(By.CSS_SELECTOR, "#archived tr td:first-child")
    assert [int(cell.text) for cell in archived] == archived_positions
    assert SUMMARY in driver.find_element(By.ID, "summaries").text

    driver.get(f"{base}/sessions/{ledger.alice}/events/{ledger.reply}")
    shot("model-saw")
    assert "What the model saw" in driver.find_element(By.ID, "model-saw").text
    assert SUMMARY in driver.find_element(By.ID, "facts").text

    driver.get(f"{base}/sessions/{ledger.alice}/window?version=1")
    shot("window")
    driver.get(f"{base}/sessions/{ledger.alice}/verify")
    shot("verify")
    assert "ok" in driver.find_element(By.ID, "session-status").text

    driver.get(f"{base}/sessions/{ledger.bob}")
    shot("refused")
    assert "not found" in driver.find_element(By.TAG_NAME, "h1").text
    assert BOB_TEXT not in driver.page_source
    assert {p.name for p in artifacts.iterdir()} >= {
        "login.png",
        "timeline.png",
        "compaction.png",
        "model-saw.png",
    }
