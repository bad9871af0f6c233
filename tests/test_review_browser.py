"""The review page in a real browser: Debian's Chromium driven by Playwright.

Without Chromium (or Playwright) these tests skip with a reason; with CI set they fail instead,
as the database tests do (tests/servers.py).  `.ci/run` installs Chromium from Debian's packages.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.servers import query

CHROMIUM = os.environ.get("ANONYMIZER_TEST_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run"]


def require_browser() -> None:
    """Skip (or, under CI, fail) when Playwright or Chromium is not there."""
    try:
        import playwright.sync_api  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as exc:
        reason = f"{exc.name} is not installed: pip install -e '.[test,review]'"
    else:
        reason = None if shutil.which(CHROMIUM) else f"no Chromium at {CHROMIUM}: apt-get install chromium"
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but the browser tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, browser):
    from tests.reviewing import Server, hospital

    running = Server(hospital(tmp_path_factory.mktemp("browser")), reviewer="ana")
    yield running
    running.stop()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.dialogs = dialogs
    page.goto(server.url)
    yield page
    context.close()


def select_text(page, words: str) -> None:
    """Select `words` in the source text with the mouse, as a reviewer does."""
    box = page.evaluate(
        """(words) => {
            const source = document.getElementById("source");
            const walker = document.createTreeWalker(source, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                const at = node.data.indexOf(words);
                if (at < 0) continue;
                const range = document.createRange();
                range.setStart(node, at);
                range.setEnd(node, at + words.length);
                const r = range.getBoundingClientRect();
                return {left: r.left, right: r.right, y: r.top + r.height / 2};
            }
            return null;
        }""",
        words,
    )
    assert box, f"{words!r} not on the page"
    page.mouse.move(box["left"] + 1, box["y"])
    page.mouse.down()
    page.mouse.move(box["right"] - 1, box["y"], steps=5)
    page.mouse.up()


def rows(server, note_id: str) -> list[tuple]:
    url = server.target.engine.url.render_as_string(hide_password=False)
    return query(url, "SELECT start, \"end\", category, verdict, reviewer FROM review_spans "
                      f"WHERE note_id = '{note_id}' AND verdict <> 'detected' ORDER BY review_id")


def test_mark_missed_by_selecting_and_wrong_by_clicking_then_reload(page, server):
    from tests.reviewing import EMOJI_NOTE

    assert page.locator("#progress").inner_text() == "0 of 7 reviewed"
    assert "This page shows PHI" in page.locator(".banner").inner_text()
    # DOMContentLoaded: after the deferred review.js has run, so its mouseup handler sees the selection
    with page.expect_navigation(wait_until="domcontentloaded"):
        page.click('table.queue a:text-is("16")')
    page.wait_for_selector("#source [data-o]")

    select_text(page, "Priya")  # after an emoji: offsets count code points, as the server does
    page.click('#picker button[data-category="RELATIVE"]')
    page.wait_for_selector("#source .missed")
    assert page.locator("#source .missed").inner_text() == "Priya"

    page.locator("#source .det", has_text="Ravi").click()  # a detection of the patient's name
    page.click("#mark-wrong")
    page.wait_for_selector("#source .wrong")
    assert "0 wrong" not in page.locator("#counts").inner_text()

    page.reload()
    assert page.locator("#source .missed").inner_text() == "Priya"
    assert page.locator("#source .wrong").inner_text() == "Ravi"
    text = EMOJI_NOTE["body"]
    assert rows(server, "16") == [
        (text.index("Priya"), text.index("Priya") + 5, "RELATIVE", "missed", "ana"),
        (text.index("Ravi"), text.index("Ravi") + 4, "PATIENT", "wrong", "ana"),
    ]

    page.keyboard.press("u")  # undo: the latest mark goes
    page.wait_for_selector("#source .wrong", state="detached")
    assert [r[3] for r in rows(server, "16")] == ["missed"]
    page.keyboard.press("a")  # accept, and on to the next note (the last one: back to the queue)
    page.wait_for_url(lambda url: "id=16" not in url)
    assert page.locator("#progress").inner_text() == "1 of 7 reviewed"
    url = server.target.engine.url.render_as_string(hide_password=False)
    assert query(url, "SELECT reviewer FROM review_notes WHERE note_id = '16'") == [("ana",)]
    assert not page.dialogs


def test_a_script_in_a_note_is_shown_as_text(page, server):
    from tests.reviewing import SCRIPT_NOTE

    page.goto(server.base + "/note?id=15")
    source = page.locator("#source")
    assert source.inner_text().startswith("<script>alert('x')</script> <b>bold</b> &")
    assert source.locator("script, b").count() == 0
    assert page.locator("#released").inner_text().startswith(SCRIPT_NOTE["body"][:28])
    assert not page.dialogs


def test_a_request_without_the_token_is_refused(browser, server):
    context = browser.new_context()
    stranger = context.new_page()
    response = stranger.goto(server.base + "/")
    assert response.status == 403 and "forbidden" in stranger.content()
    context.close()


def test_a_change_without_the_csrf_token_is_refused(page, server):
    response = page.request.post(server.base + "/api/mark", data={"note_id": "10", "start": 0, "end": 2, "category": "NAME",
                                                                  "verdict": "missed"})
    assert response.status == 403
    assert rows(server, "10") == []
