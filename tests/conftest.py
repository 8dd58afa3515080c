"""Shared fixtures and pytest hooks; nothing else. Every test runs against a private
cache folder, never the user's.

Constants and plain helpers (the seed's id and message, record builders, store
builders) live in tests/support.py: test modules import them from there, never from
this file or from another test module.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support import HEAVY_CACHE, REPO, SEED_FILE, build_store, seed_records, variant, visible_in_sandbox, write_jsonl


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Keep the per-user cache store (built from data/) inside the test session."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ERRKB_CACHE_DIR", str(tmp_path_factory.mktemp("errkb-cache")))
        mp.delenv("ERRKB_DB", raising=False)
        mp.setenv("NO_COLOR", "1")
        yield


@pytest.fixture(scope="session")
def heavy_cache() -> Path:
    """The one folder the test suite keeps venvs and release wheels in (README: the test command)."""
    HEAVY_CACHE.mkdir(parents=True, exist_ok=True)
    return HEAVY_CACHE


# -- the seed record (a fresh copy for each test) --------------------------------------


@pytest.fixture
def host_folder(heavy_cache):
    """A fresh 0755 folder on the host that sandbox runs see as it is: in the heavy cache
    when that qualifies (a checkout under /tmp or HOME does not), else under /var/lib."""
    import shutil
    import uuid

    base = heavy_cache if visible_in_sandbox(heavy_cache) else Path("/var/lib/errkb-tests")
    base.mkdir(parents=True, exist_ok=True)
    folder = base / f"sandbox-{uuid.uuid4().hex[:12]}"
    folder.mkdir()
    folder.chmod(0o755)
    assert visible_in_sandbox(folder), folder
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def seed_wrapper() -> dict:
    return json.loads(SEED_FILE.read_text())


@pytest.fixture
def seed_record(seed_wrapper) -> dict:
    return seed_wrapper["record"]


@pytest.fixture
def make_variant(seed_record):
    return lambda i: variant(seed_record, i)


@pytest.fixture
def db_path(tmp_path) -> Path:
    """Where a test's own store goes (nothing there yet)."""
    return tmp_path / "store.duckdb"


# -- stores built once per module (tests only read them) ------------------------------


@pytest.fixture(scope="module")
def store_db(tmp_path_factory) -> Path:
    """A store of the seed and two lint-clean variants of it (support.build_store)."""
    return build_store(tmp_path_factory.mktemp("store") / "store.duckdb")


@pytest.fixture(scope="module")
def matcher():
    """The matcher of the records in ``store_db``, built straight from them (no store)."""
    from errkb.match.matcher import Matcher

    return Matcher.from_records(seed_records())


@pytest.fixture(scope="module")
def kb(store_db):
    """The KnowledgeBase of ``store_db``, opened as the CLI opens it."""
    from errkb.kb import KnowledgeBase

    return KnowledgeBase.open(store_db)


@pytest.fixture(scope="module")
def seed_db(tmp_path_factory) -> Path:
    """A store of the seed record alone, ingested through the CLI (`errkb ingest --db`)."""
    from click.testing import CliRunner

    from errkb.cli import cli

    db = tmp_path_factory.mktemp("seed-store") / "store.duckdb"
    result = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(SEED_FILE)])
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture(scope="module")
def data_db(tmp_path_factory) -> Path:
    """A store of the bundled data alone."""
    from errkb.store.db import Store

    db = tmp_path_factory.mktemp("data-store") / "store.duckdb"
    with Store.open(db) as store:
        assert store.ingest([REPO / "data"]).rejected == 0
    return db


def _generic_sibling(seed: dict) -> dict:
    """A less specific record of another class that matches the seed's message too."""
    rec = copy.deepcopy(seed)
    rec["id"] = "0123456789abcdef"
    rec["slug"] = "please-use-mnnvl-backend-instead"
    rec["errorClass"] = "RuntimeError"
    rec["errorMessage"] = "Please use 'mnnvl' backend instead."
    rec["messagePattern"] = "Please use 'mnnvl' backend instead\\."
    return rec


@pytest.fixture(scope="module")
def sibling_db(tmp_path_factory) -> Path:
    """A store of the bundled data plus a generic RuntimeError record ("Please use 'mnnvl'
    backend instead.", id 0123456789abcdef) that also matches the seed's message."""
    from errkb.store.db import Store

    seed = json.loads(SEED_FILE.read_text())["record"]
    folder = tmp_path_factory.mktemp("sibling-store")
    db = folder / "store.duckdb"
    extra = write_jsonl(folder / "extra.jsonl", [_generic_sibling(seed)])
    with Store.open(db) as store:
        report = store.ingest([REPO / "data", extra])
    assert report.rejected == 0, report.rejects
    return db


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium driven through selenium, one per test module (the site's browser
    tests, marker ``browser``); skipped where Debian's ``chromium`` and ``chromium-driver``
    or selenium are missing. A module that needs it before its other fixtures (so that a
    skip builds nothing) lists it in ``pytest.mark.usefixtures``."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not (chromium and chromedriver):
        pytest.skip("needs chromium and chromium-driver (apt-get install -y chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium (pip install -e '.[test]')")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,900", "--allow-file-access-from-files"):
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="errkb-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.binary_location = chromium
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(chromedriver))
    # the big site's index (test_site_layout) loads its search chunks within this
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)
