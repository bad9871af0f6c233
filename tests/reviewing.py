"""The review page for tests: a small hospital (the fixture's notes and two awkward ones),
anonymized, and the real server (uvicorn) on a free loopback port in a thread."""

from __future__ import annotations

import http.cookiejar
import json
import threading
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

from anonymizer.config import load_config
from anonymizer.review.app import make_server
from anonymizer.review.marks import sample_queue
from anonymizer.run import run
from anonymizer.target import Target
from tests.conftest import CONFIG, NOTES, create_hospital

SCRIPT_NOTE = dict(note_id=15, patient_id=1, body="<script>alert('x')</script> <b>bold</b> & Marisette\r\nok")
EMOJI_NOTE = dict(note_id=16, patient_id=2, body="🙂 Ravi seen with wife Priya at Tan Tock Seng.")
NOTES_HERE = [*NOTES, SCRIPT_NOTE, EMOJI_NOTE]


def hospital(tmp: Path, classifier: bool = False) -> Path:
    """The anonymized hospital's configuration file (`classifier`: with the shipped model on)."""
    source, target = tmp / "hospital.db", tmp / "target.db"
    create_hospital(f"sqlite:///{source}", notes=NOTES_HERE)
    config = tmp / "anonymizer.toml"
    text = CONFIG.format(source=source, target=target)
    config.write_text(text.replace("enabled = false", "enabled = true") if classifier else text)
    run(load_config(config))
    return config


class Server:
    """The review page over the hospital's whole target, running until :meth:`stop`."""

    def __init__(self, config: Path, **options) -> None:
        cfg = load_config(config)
        self.target = Target(cfg.target.url, create=False)
        self.server, sock, self.url = make_server(cfg, self.target, sample_queue(self.target, 100, 1), **options)
        self.base = self.url.split("/?", 1)[0]
        self.thread = threading.Thread(target=self.server.run, kwargs=dict(sockets=[sock]), daemon=True)
        self.thread.start()
        for _ in range(200):
            if self.server.started:
                break
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class Client:
    """An HTTP client with a cookie jar (what a browser keeps between requests)."""

    def __init__(self) -> None:
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def get(self, url: str) -> tuple[int, str, Message]:
        return self.send(urllib.request.Request(url))

    def post(self, url: str, body: dict, csrf: str | None = None) -> tuple[int, str, Message]:
        headers = {"Content-Type": "application/json", **({"X-CSRF-Token": csrf} if csrf else {})}
        return self.send(urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST"))

    def send(self, request: urllib.request.Request) -> tuple[int, str, Message]:
        try:
            with self.opener.open(request, timeout=20) as response:
                return response.status, response.read().decode(), response.headers
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), exc.headers
