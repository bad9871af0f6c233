"""Real database servers for the tests: a fresh PostgreSQL schema or MariaDB database per test.

The servers are the project's (README: PostgreSQL 15 on 127.0.0.1:5432, database `test`;
MariaDB on 127.0.0.1:3306, root, database `test`); override them with
``ANONYMIZER_TEST_POSTGRES`` and ``ANONYMIZER_TEST_MARIADB`` (SQLAlchemy URLs).

* PostgreSQL: each database is a schema ``anon_<hex>`` of the server's database, selected by the
  URL (``?options=-csearch_path=<schema>``), so reflection and Alembic see only that schema.
  The URL also sets ``application_name=<schema>`` so teardown can end every connection a test
  left open (engines created inside the code under test are never disposed by it).
* MariaDB: each database is a fresh ``CREATE DATABASE anon_<hex>`` in utf8mb4.
* SQLite: a file in the test's temporary directory.

When a server cannot be reached the test is skipped with a one-line reason, unless the
environment variable ``CI`` is set: then it fails, so CI never passes by skipping.
"""

from __future__ import annotations

import functools
import os
import uuid
from pathlib import Path
from typing import Callable

import pytest
import sqlalchemy as sa

SERVERS = {
    "postgresql": os.environ.get("ANONYMIZER_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
    "mariadb": os.environ.get("ANONYMIZER_TEST_MARIADB", "mysql+pymysql://root@127.0.0.1:3306/test?charset=utf8mb4"),
}
ENGINES = ("sqlite", "postgresql", "mariadb")


@functools.cache
def unreachable(kind: str) -> str | None:
    """Why the server of `kind` cannot be used (one line), or None when it answers."""
    if kind == "sqlite":
        return None
    try:
        engine = sa.create_engine(SERVERS[kind], connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
    except ImportError as exc:
        return f"driver not installed ({exc.name}); pip install -e '.[postgres,mysql]'"
    except sa.exc.DBAPIError as exc:
        return " ".join(str(exc.orig).split())[:200]
    return None


def require(kind: str) -> None:
    """Skip (or, under CI, fail) the calling test when the `kind` server is not there."""
    reason = unreachable(kind)
    if reason is None:
        return
    where = sa.engine.make_url(SERVERS[kind]).render_as_string(hide_password=True)
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but the {kind} server at {where} is not reachable: {reason}", pytrace=False)
    pytest.skip(f"no {kind} server at {where}: {reason}")


def admin_engine(kind: str) -> sa.Engine:
    return sa.create_engine(SERVERS[kind], isolation_level="AUTOCOMMIT")


class Databases:
    """Creates empty databases for one test and drops them all at teardown."""

    def __init__(self, tmp_path: Path, nodeid: str = "") -> None:
        self.tmp_path = tmp_path
        self.nodeid = nodeid
        self.created: list[tuple[str, str]] = []  # (kind, name)
        self.roles: list[str] = []
        self.engines: list[sa.Engine] = []

    def url(self, kind: str, label: str = "db", charset: str = "utf8mb4 COLLATE utf8mb4_unicode_ci") -> str:
        """The URL of a new, empty database of `kind` (sqlite, postgresql or mariadb)."""
        USED.setdefault(self.nodeid, []).append(kind)
        require(kind)
        name = f"anon_{label}_{uuid.uuid4().hex[:10]}"
        if kind == "sqlite":
            return f"sqlite:///{self.tmp_path / (name + '.db')}"
        admin = admin_engine(kind)
        with admin.connect() as conn:
            if kind == "postgresql":
                conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
            else:
                conn.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET {charset}"))
        admin.dispose()
        self.created.append((kind, name))
        return schema_url(kind, name)

    def engine(self, url: str) -> sa.Engine:
        """An engine the fixture disposes of at teardown."""
        engine = sa.create_engine(url)
        self.engines.append(engine)
        return engine

    def read_only_role(self, url: str) -> str:
        """PostgreSQL: a URL for a new login role that may only SELECT in the schema of `url`."""
        schema = schema_of(url)
        role = f"anon_ro_{uuid.uuid4().hex[:10]}"
        admin = admin_engine("postgresql")
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE ROLE "{role}" LOGIN'))
            conn.execute(sa.text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
            conn.execute(sa.text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
        admin.dispose()
        self.roles.append(role)
        return sa.engine.make_url(url).set(username=role).render_as_string(hide_password=False)

    def cleanup(self) -> None:
        for engine in self.engines:
            engine.dispose()
        for kind, name in reversed(self.created):
            admin = admin_engine(kind)
            with admin.connect() as conn:
                if kind == "postgresql":
                    conn.execute(
                        sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                "WHERE application_name = :n AND pid <> pg_backend_pid()"),
                        dict(n=name),
                    )
                    conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
                else:
                    ids = conn.execute(
                        sa.text("SELECT id FROM information_schema.processlist WHERE db = :n AND id <> CONNECTION_ID()"),
                        dict(n=name),
                    ).scalars().all()
                    for pid in ids:
                        try:
                            conn.execute(sa.text(f"KILL {int(pid)}"))
                        except sa.exc.DBAPIError:
                            pass  # already gone
                    conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
            admin.dispose()
        if self.roles:
            admin = admin_engine("postgresql")
            with admin.connect() as conn:
                for role in self.roles:
                    conn.execute(
                        sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :r"), dict(r=role)
                    )
                    conn.execute(sa.text(f'DROP OWNED BY "{role}"'))
                    conn.execute(sa.text(f'DROP ROLE IF EXISTS "{role}"'))
            admin.dispose()


# Which engines each test used and how it ended, for the summary line CI logs show.
USED: dict[str, list[str]] = {}
OUTCOMES: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.nodeid in USED and (report.when == "call" or report.outcome != "passed"):
        if hasattr(report, "wasxfail"):
            OUTCOMES[report.nodeid] = "xfailed" if report.skipped else "xpassed"
        else:
            OUTCOMES[report.nodeid] = "skipped" if report.skipped else report.outcome if report.when == "call" else "error"


def pytest_terminal_summary(terminalreporter) -> None:
    """One line per engine: how many tests ran on a real PostgreSQL / MariaDB, across engines."""
    if not USED:
        return
    groups: dict[str, dict[str, int]] = {}
    for nodeid, kinds in USED.items():
        outcome = OUTCOMES.get(nodeid, "error")
        servers = [k for k in dict.fromkeys(kinds) if k != "sqlite"]
        labels = [*servers, "cross-engine"] if len(set(kinds)) > 1 else servers or ["sqlite"]
        for label in labels:
            groups.setdefault(label, {}).setdefault(outcome, 0)
            groups[label][outcome] += 1
    terminalreporter.write_sep("-", "database engines")
    for label in ("postgresql", "mariadb", "cross-engine", "sqlite"):
        if label in groups:
            counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(groups[label].items()))
            terminalreporter.write_line(f"{label} tests: {counts}")


def schema_url(kind: str, name: str) -> str:
    """The URL of schema (PostgreSQL) or database (MariaDB) `name` on the test server of `kind`."""
    url = sa.engine.make_url(SERVERS[kind])
    if kind == "postgresql":
        url = url.update_query_dict({"options": f"-csearch_path={name}", "application_name": name})
    else:
        url = url.set(database=name)
    return url.render_as_string(hide_password=False)


def schema_of(url: str) -> str:
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "postgresql":
        return parsed.query["options"].split("=", 1)[1]
    return parsed.database or ""


def kind_of(url: str) -> str:
    backend = sa.engine.make_url(url).get_backend_name()
    return {"mysql": "mariadb"}.get(backend, backend)


@pytest.fixture
def databases(tmp_path: Path, request: pytest.FixtureRequest):
    """Fresh databases on SQLite, PostgreSQL or MariaDB: ``databases.url("postgresql")``."""
    dbs = Databases(tmp_path, request.node.nodeid)
    try:
        yield dbs
    finally:
        dbs.cleanup()


# ---- helpers shared by the engine, bad-input and crash tests ------------------------------------

def config_text(source: str, target: str, extra: str = "") -> str:
    """The test hospital's configuration (tests/conftest.py CONFIG) for any source and target URL."""
    from tests.conftest import CONFIG

    text = CONFIG.replace('"sqlite:///{source}"', '"{source}"').replace('"sqlite:///{target}"', '"{target}"')
    return text.format(source=source, target=target) + extra


def write_config(path: Path, source: str, target: str, extra: str = "") -> Path:
    path.write_text(config_text(source, target, extra))
    return path


def query(url: str, sql: str, **params) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql), params).all()]
    finally:
        engine.dispose()


def execute(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def reference_run(tmp: Path, fill_source: Callable[[str], None], extra: str = "") -> dict[str, str]:
    """Anonymized texts of a SQLite → SQLite run: what every other engine pair must reproduce."""
    from anonymizer.config import load_config
    from anonymizer.run import run

    source, target = f"sqlite:///{tmp / 'source.db'}", f"sqlite:///{tmp / 'target.db'}"
    fill_source(source)
    run(load_config(write_config(tmp / "anonymizer.toml", source, target, extra)))
    return anonymized(target)


def anonymized(target: str) -> dict[str, str]:
    return dict(query(target, "SELECT note_id, text FROM anonymized_notes"))


def check_every_note_once(source: str, target: str, notes_table: str = "notes", note_id: str = "note_id") -> tuple[set, set]:
    """The invariant: each source note is exactly one anonymized row or one failure row, never both."""
    source_ids = [str(i) for (i,) in query(source, f"SELECT {note_id} FROM {notes_table}")]
    done = [i for (i,) in query(target, "SELECT note_id FROM anonymized_notes")]
    failed = [i for (i,) in query(target, "SELECT note_id FROM failures")]
    assert len(done) == len(set(done)) and len(failed) == len(set(failed)), "a note written twice"
    assert not set(done) & set(failed), "a note both anonymized and failed"
    assert set(done) | set(failed) == set(source_ids), "a source note is neither anonymized nor failed"
    assert len(done) + len(failed) == len(source_ids)
    return set(done), set(failed)
