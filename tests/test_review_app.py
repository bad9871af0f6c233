"""The review page over HTTP, on the real server: access token, CSRF, escaping, the stored marks."""

from __future__ import annotations

import json
import logging
import re
from urllib.parse import quote

import pytest

pytest.importorskip("starlette", reason="the review extra is not installed: pip install -e '.[review]'")

from anonymizer.review.app import check_host, segments  # noqa: E402
from anonymizer.review.marks import Mark  # noqa: E402
from anonymizer.settings import ConfigError  # noqa: E402
from tests.reviewing import EMOJI_NOTE, SCRIPT_NOTE, Client, Server, hospital  # noqa: E402
from tests.servers import query  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = Server(hospital(tmp_path_factory.mktemp("review"), classifier=True), reviewer="ana")
    yield running
    running.stop()


@pytest.fixture
def client(server) -> Client:
    client = Client()
    assert client.get(server.url)[0] == 200  # the printed address: cookie, then the page
    return client


def csrf_of(page: str) -> str:
    return re.search(r'<meta name="csrf" content="([^"]+)">', page)[1]


def test_without_the_token_every_request_is_refused(server):
    stranger = Client()
    for path in ("/", "/note?id=10", "/dashboard", "/static/review.js", "/?token=wrong"):
        status, body, _ = stranger.get(server.base + path)
        assert status == 403 and "forbidden" in body
    assert stranger.post(server.base + "/api/mark", {"note_id": "10"})[0] == 403


def test_the_token_becomes_a_cookie_and_leaves_the_address(server):
    client = Client()
    status, page, headers = client.get(server.url)
    assert status == 200 and "token=" not in page
    assert "This page shows PHI" in page and "0 of 7 reviewed" in page
    assert headers["Cache-Control"] == "no-store" and "frame-ancestors 'none'" in headers["Content-Security-Policy"]


def test_a_change_without_the_csrf_token_is_refused(server, client):
    page = client.get(server.base + "/note?id=12")[1]
    body = {"note_id": "12", "start": 0, "end": 2, "category": "NAME", "verdict": "missed"}
    assert client.post(server.base + "/api/mark", body)[0] == 403
    assert client.post(server.base + "/api/mark", body, csrf="forged")[0] == 403
    status, answer, _ = client.post(server.base + "/api/undo", {"note_id": "12"}, csrf=csrf_of(page))
    assert status == 200


def test_another_host_name_is_refused(server):
    import urllib.request

    request = urllib.request.Request(server.url, headers={"Host": "evil.example"})
    assert Client().send(request)[0] == 400


def test_a_note_is_text_whatever_it_holds(server, client):
    status, page, _ = client.get(server.base + "/note?id=15")
    assert status == 200
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    assert "&lt;b&gt;bold&lt;/b&gt; &amp;" in page
    assert "&#13;" in page  # a carriage return survives, so offsets in the page stay the note's
    assert re.search(r'title="PATIENT: record:name; classifier score [+-]\d\.\d\d \(threshold -?\d\.\d\d\)"', page)
    assert client.get(server.base + "/note?id=" + quote("../../etc"))[0] == 404


def test_marks_are_stored_with_the_reviewer_and_shown_again(server, client, caplog):
    caplog.set_level(logging.DEBUG)
    page = client.get(server.base + "/note?id=16")[1]
    text = EMOJI_NOTE["body"]
    start = text.index("Priya")
    body = {"note_id": "16", "start": start - 1, "end": start + 6, "category": "RELATIVE", "verdict": "missed"}  # spaces trimmed
    status, answer, _ = client.post(server.base + "/api/mark", body, csrf=csrf_of(page))
    shown = re.compile(r'class="[^"]*\bmissed\b[^"]*"[^>]*data-marks="\d+">Priya<')
    assert status == 200 and shown.search(json.loads(answer)["html"])
    assert client.post(server.base + "/api/accept", {"note_id": "16"}, csrf=csrf_of(page))[0] == 200
    rows = query(server.target.engine.url.render_as_string(hide_password=False),
                 "SELECT start, \"end\", category, verdict, reviewer FROM review_spans WHERE note_id = '16' AND verdict = 'missed'")
    assert rows == [(start, start + 5, "RELATIVE", "missed", "ana")]
    again = client.get(server.base + "/note?id=16")[1]
    assert shown.search(again) and "Reviewed by ana" in again
    assert "1 of 7 reviewed" in client.get(server.base + "/")[1]
    bad = dict(body, start=0, end=999)
    assert client.post(server.base + "/api/mark", bad, csrf=csrf_of(page))[0] == 400
    for record in caplog.records:  # the server logs no note text, and no address (ids, the token)
        assert record.name != "uvicorn.access" and "Priya" not in record.getMessage() and "?" not in record.getMessage()


def test_a_second_reviewer_is_kept_apart(server):
    bob = Client()
    bob.get(server.url)
    page = bob.get(server.base + "/")[1]
    assert bob.post(server.base + "/reviewer", {"name": "bob"}, csrf=csrf_of(page))[0] == 200
    page = bob.get(server.base + "/note?id=10")[1]
    assert 'value="bob"' in page
    text = "Pt MARISETTE VRABEL, NRIC S1234567D, seen by Dr. Quiley."
    body = {"note_id": "10", "start": text.index("Pt"), "end": 2, "category": "NAME", "verdict": "missed"}
    assert bob.post(server.base + "/api/mark", body, csrf=csrf_of(page))[0] == 200
    assert bob.post(server.base + "/reviewer", {"name": ""}, csrf=csrf_of(page))[0] == 400


def test_queue_filters_and_dashboard(server, client):
    page = client.get(server.base + "/?undetected=1")[1]
    assert 'href="/note?id=14"' in page and 'href="/note?id=10"' not in page  # the empty note has no detection
    page = client.get(server.base + "/?category=PHONE")[1]
    assert 'href="/note?id=10"' in page and 'href="/note?id=11"' not in page
    status, page, _ = client.get(server.base + "/dashboard")
    assert status == 200 and "Spans per category" in page and "<svg" in page
    assert f"{len(SCRIPT_NOTE)}" and "notes without any detection" in page


def test_the_server_listens_on_loopback_unless_told():
    check_host("127.0.0.1", False)
    check_host("::1", False)
    check_host("localhost", False)
    with pytest.raises(ConfigError, match="--allow-remote"):
        check_host("0.0.0.0", False)
    check_host("0.0.0.0", True)
    with pytest.raises(ConfigError, match="not an IP address"):
        check_host("example.org", False)


def test_segments_cut_at_every_detection_and_mark():
    text = "Mr Kumar saw Ravi"
    marks = [Mark(1, "1", 13, 17, "RELATIVE", "missed", "ana", None), Mark(2, "1", 3, 8, "PATIENT", "wrong", "ana", None)]
    cut = segments(text, [(3, 8, "PATIENT", "record:name")], marks, [""])
    assert "".join(s.text for s in cut) == text
    assert [(s.start, s.classes) for s in cut] == [(0, ""), (3, "det cat-PATIENT wrong"), (8, ""), (13, "missed cat-RELATIVE")]
    assert cut[1].title == "PATIENT: record:name\nnot PHI, marked by ana" and cut[3].marks == "1"


def test_the_review_command_refuses_a_remote_address_and_half_a_sample(server, tmp_path):
    from typer.testing import CliRunner

    from anonymizer.cli import app
    from tests.reviewing import hospital

    config = str(hospital(tmp_path))
    runner = CliRunner()
    result = runner.invoke(app, ["review", "--config", config, "--host", "0.0.0.0", "--sample", "3", "--seed", "1"])
    assert result.exit_code == 2 and "not a loopback address and the page shows PHI" in result.stderr
    assert runner.invoke(app, ["review", "--config", config, "--sample", "3"]).exit_code == 2
    result = runner.invoke(app, ["review", "--config", config])
    assert result.exit_code == 2 and "no review in the target yet" in result.stderr
    (tmp_path / "ids.txt").write_text("10\nnope\n")
    result = runner.invoke(app, ["review", "--config", config, "--notes", str(tmp_path / "ids.txt")])
    assert result.exit_code == 2 and "1 id(s)" in result.stderr
