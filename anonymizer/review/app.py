"""The review page: a local web application over a target's runs and review marks.

Starlette serves it, Jinja2 renders it (autoescaped: a note's text is always text, never markup),
plain JavaScript marks spans; every asset is in the package and charts are SVG drawn on the server.

The page shows PHI, so:

* it listens on a loopback address unless told otherwise (:func:`check_host`);
* every request carries the random access token: once in the address :func:`make_server` prints,
  which answers with an HttpOnly, SameSite=Strict cookie and a redirect to the same page without it;
  a request with neither is refused (403);
* every request that changes something carries a second random token (CSRF) from the page;
* the Host header must name this server (a web page elsewhere cannot reach it by DNS rebinding);
* responses are neither cached nor framed, and load nothing from elsewhere (Content-Security-Policy);
* the server writes no access log (its lines would carry addresses with the token) and logs no text.
"""

from __future__ import annotations

import getpass
import hmac
import ipaddress
import logging
import secrets
import socket
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from anonymizer import audit
from anonymizer.config import Config
from anonymizer.review import charts, marks
from anonymizer.review.marks import Mark, Queue
from anonymizer.settings import ConfigError
from anonymizer.spans import CATEGORIES
from anonymizer.target import Target

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}
HEADERS = list(SECURITY_HEADERS.items())
FORBIDDEN = "forbidden: open the address that `anonymizer review` printed\n"


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse an address other machines can reach unless `allow_remote`: the page shows PHI."""
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise ConfigError(f"--host: {host!r} is not an IP address (or localhost)") from None
    if not loopback and not allow_remote:
        raise ConfigError(f"--host: {host} is not a loopback address and the page shows PHI; add --allow-remote to serve it there")


@dataclass
class Settings:
    queue: Queue
    reviewer: str  # the name marks carry until a reviewer gives theirs
    port: int
    evaluation: dict | None = None  # an `anonymizer evaluate --json` report: the dashboard draws its curve
    token: str = ""
    csrf: str = ""

    def __post_init__(self) -> None:
        self.token = self.token or secrets.token_urlsafe(24)
        self.csrf = self.csrf or secrets.token_urlsafe(24)

    @property
    def cookie(self) -> str:  # cookies do not tell ports apart: one name per server
        return f"anonymizer_review_{self.port}"

    @property
    def reviewer_cookie(self) -> str:
        return f"anonymizer_reviewer_{self.port}"


class Guard:
    """The access token (address once, then cookie), the CSRF token and the security headers."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        s = self.settings
        given = request.query_params.get("token")
        if given is not None:
            if not hmac.compare_digest(given.encode(), s.token.encode()):
                return await self._send(PlainTextResponse(FORBIDDEN, 403), scope, receive, send)
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            response = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), 303)
            response.set_cookie(s.cookie, s.token, httponly=True, samesite="strict", path="/")
            return await self._send(response, scope, receive, send)
        if not hmac.compare_digest(request.cookies.get(s.cookie, "").encode(), s.token.encode()):
            return await self._send(PlainTextResponse(FORBIDDEN, 403), scope, receive, send)
        csrf = request.headers.get("x-csrf-token", "")
        if request.method not in ("GET", "HEAD") and not hmac.compare_digest(csrf.encode(), s.csrf.encode()):
            return await self._send(PlainTextResponse("forbidden: no valid CSRF token\n", 403), scope, receive, send)

        async def secured(message: dict) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + [(k.lower().encode(), v.encode()) for k, v in HEADERS]
            await send(message)

        await self.app(scope, receive, secured)

    async def _send(self, response: Response, scope: Scope, receive: Receive, send: Send) -> None:
        response.headers.update(SECURITY_HEADERS)
        await response(scope, receive, send)


# ------------------------------------------------------------------------------------ note text


@dataclass(frozen=True)
class Segment:
    start: int
    text: str
    classes: str
    title: str
    detection: int | None  # index into the note's detections
    marks: str  # ids of the marks covering it, comma-separated


def segments(text: str, detections: Sequence[tuple[int, int, str, str]], found: Sequence[Mark], scores: Sequence[str]) -> list[Segment]:
    """The note cut where any detection or mark starts or ends, each piece with what covers it."""
    cuts = sorted({0, len(text), *(x for d in detections for x in d[:2]), *(x for m in found for x in (m.start, m.end))})
    starts = [d[0] for d in detections]
    out = []
    for a, b in zip(cuts, cuts[1:]):
        k = bisect_right(starts, a) - 1
        det = k if k >= 0 and detections[k][0] <= a < detections[k][1] else None
        over = [m for m in found if m.start <= a < m.end]
        classes, title = [], []
        if det is not None:
            start, end, category, sources = detections[det]
            on_it = [m for m in found if (m.start, m.end) == (start, end) and m.verdict != "missed"]
            changed = [m for m in on_it if m.verdict == "category"]
            classes += ["det", f"cat-{changed[-1].category if changed else category}"]
            title.append(f"{category}: {sources.replace(',', ', ')}{scores[det]}")
            if any(m.verdict == "wrong" for m in on_it):
                classes.append("wrong")
            if changed:
                classes.append("recat")
            title += [_said(m) for m in on_it]
        missed = [m for m in over if m.verdict == "missed"]
        if missed:
            classes.append("missed")
            if det is None:
                classes.append(f"cat-{missed[-1].category}")
            title += [_said(m) for m in missed]
        ids = ",".join(str(m.review_id) for m in over if m.verdict == "missed")
        out.append(Segment(a, text[a:b], " ".join(classes), "\n".join(title), det, ids))
    return out


def _said(m: Mark) -> str:
    what = {"missed": f"missed {m.category}", "wrong": "not PHI", "category": f"should be {m.category}"}[m.verdict]
    return f"{what}, marked by {m.reviewer or 'an import'}"


def keep_cr(value: str) -> Markup:
    """Escaped text whose carriage returns survive HTML parsing, so offsets in the page are the note's."""
    return Markup(str(escape(value)).replace("\r", "&#13;"))


# ------------------------------------------------------------------------------------ the app


class Review:
    """The request handlers, over one target and one queue."""

    def __init__(self, config: Config, target: Target, settings: Settings) -> None:
        from anonymizer.worker import load

        self.config, self.target, self.settings = config, target, settings
        self.source, pipeline = load(config)
        self.classifier = pipeline.classifier
        self.rule_spans = pipeline.rule_spans
        self.threshold = getattr(self.classifier, "threshold", None)
        self.env = Environment(loader=PackageLoader("anonymizer.review", "templates"), autoescape=select_autoescape(default=True))
        self.env.filters["q"] = lambda value: quote(str(value), safe="")
        self.env.filters["keep_cr"] = keep_cr

    def reviewer(self, request: Request) -> str:
        try:
            return marks.check_reviewer(request.cookies.get(self.settings.reviewer_cookie) or self.settings.reviewer)
        except ConfigError:
            return self.settings.reviewer

    def page(self, request: Request, name: str, **context) -> HTMLResponse:
        context.update(csrf=self.settings.csrf, reviewer=self.reviewer(request), path=request.url.path, queue=self.settings.queue)
        return HTMLResponse(self.env.get_template(name).render(**context))

    async def queue(self, request: Request) -> Response:
        rows = marks.queue_rows(self.target, self.settings.queue)
        chosen = dict(category=request.query_params.get("category", ""), detector=request.query_params.get("detector", ""),
                      undetected=request.query_params.get("undetected") == "1")
        shown = marks.filter_rows(rows, **chosen)
        return self.page(
            request, "queue.html", rows=shown, total=len(rows), reviewed=sum(1 for r in rows if r.reviewers), chosen=chosen,
            categories=CATEGORIES, detectors=sorted({d for r in rows for d in r.detectors}),
        )

    def note_context(self, note_id: str, reviewer: str) -> dict:
        note = self.source.notes_by_id([note_id]).get(note_id)
        if note is None or note_id not in self.settings.queue.note_ids:
            raise KeyError(note_id)
        view_spans = marks.detections(self.target, [note_id])[note_id]
        found = marks.marks(self.target, [note_id])[note_id]
        scores = self.scores(note, view_spans)
        data = {
            "note_id": note_id,
            "detections": [dict(start=s, end=e, category=c, detectors=d, explained=f"{c}: {d.replace(',', ', ')}{scores[i]}")
                           for i, (s, e, c, d) in enumerate(view_spans)],
            "marks": [dict(id=m.review_id, start=m.start, end=m.end, category=m.category, verdict=m.verdict,
                           reviewer=m.reviewer, mine=m.reviewer == reviewer) for m in found],
            "categories": list(CATEGORIES),
        }
        return dict(note=note, segments=segments(note.text, view_spans, found, scores), data=data,
                    counts=Counter(m.verdict for m in found if m.reviewer == reviewer))

    def scores(self, note, spans: Sequence[tuple[int, int, str, str]]) -> list[str]:
        """Each span's best classifier score now, as its explanation says it (empty without a classifier)."""
        if self.classifier is None or not hasattr(self.classifier, "score_tokens") or not spans:
            return [""] * len(spans)
        record = self.source.records([note.patient_id])[note.patient_id]
        tokens, scored = self.classifier.score_tokens(note.text, record, rule_spans=self.rule_spans(note.text, record))
        out = []
        for start, end, *_ in spans:
            k, inside = bisect_right(tokens.ends, start), []  # from the first token ending after the span's start
            while k < len(scored) and tokens.starts[k] < end:
                inside.append(scored[k][0])
                k += 1
            out.append(f"; classifier score {max(inside):+.2f} (threshold {self.threshold:+.2f})" if inside else "")
        return out

    async def note(self, request: Request) -> Response:
        note_id = request.query_params.get("id", "")
        reviewer = self.reviewer(request)
        try:
            context = self.note_context(note_id, reviewer)
        except KeyError:
            return PlainTextResponse("no such note in the review queue\n", 404)
        ids = self.settings.queue.note_ids
        at = ids.index(note_id)
        accepted = marks.acceptances(self.target, [note_id]).get(note_id, [])
        released = marks.run_ids(self.target, [note_id])
        with self.target.engine.connect() as conn:
            t = self.target.notes
            text = conn.execute(t.select().with_only_columns(t.c.text).where(t.c.note_id == note_id)).scalar()
        return self.page(
            request, "note.html", **context, released=text, position=at + 1, previous=ids[at - 1] if at else None,
            next=ids[at + 1] if at + 1 < len(ids) else None, accepted=[a.reviewer for a in accepted],
            mine=any(a.reviewer == reviewer for a in accepted), run_id=released.get(note_id),
        )

    async def _json(self, request: Request) -> tuple[dict, str, str]:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("note_id"), str) or body["note_id"] not in self.settings.queue.note_ids:
            raise ConfigError("no note of the review queue")
        return body, body["note_id"], self.reviewer(request)

    def _fragment(self, note_id: str, reviewer: str) -> JSONResponse:
        context = self.note_context(note_id, reviewer)
        html = self.env.get_template("_text.html").render(segments=context["segments"])
        return JSONResponse(dict(html=html, data=context["data"], counts=context["counts"]))

    async def mark(self, request: Request) -> Response:
        try:
            body, note_id, reviewer = await self._json(request)
            text = self.source.notes_by_id([note_id])[note_id].text
            start, end = int(body.get("start", -1)), int(body.get("end", -1))
            if 0 <= start < end <= len(text):  # a selection's edges: the words, not the spaces around them
                while start < end and text[start].isspace():
                    start += 1
                while end > start and text[end - 1].isspace():
                    end -= 1
            marks.add_mark(self.target, note_id, start, end, str(body.get("category")), str(body.get("verdict")), reviewer, len(text))
        except (ConfigError, TypeError, ValueError) as exc:
            return JSONResponse(dict(error=str(exc)), 400)
        return self._fragment(note_id, reviewer)

    async def undo(self, request: Request) -> Response:
        try:
            body, note_id, reviewer = await self._json(request)
            review_id = int(body["id"]) if body.get("id") is not None else None
        except (ConfigError, TypeError, ValueError) as exc:
            return JSONResponse(dict(error=str(exc)), 400)
        marks.undo(self.target, note_id, reviewer, review_id)
        return self._fragment(note_id, reviewer)

    async def accept(self, request: Request) -> Response:
        try:
            _, note_id, reviewer = await self._json(request)
            text = self.source.notes_by_id([note_id])[note_id].text
            marks.accept(self.target, note_id, reviewer, text, self.settings.queue.sampled)
        except (ConfigError, KeyError) as exc:
            return JSONResponse(dict(error=str(exc)), 400)
        ids = self.settings.queue.note_ids
        at = ids.index(note_id)
        return JSONResponse(dict(next=f"/note?id={quote(ids[at + 1], safe='')}" if at + 1 < len(ids) else "/"))

    async def set_reviewer(self, request: Request) -> Response:
        try:
            body = await request.json()
            name = marks.check_reviewer(str(body.get("name", "")) if isinstance(body, dict) else "")
        except (ConfigError, ValueError) as exc:
            return JSONResponse(dict(error=str(exc)), 400)
        response = JSONResponse(dict(reviewer=name))
        response.set_cookie(self.settings.reviewer_cookie, name, httponly=True, samesite="strict", path="/")
        return response

    async def dashboard(self, request: Request) -> Response:
        from anonymizer.review.estimate import release_estimate

        reports = audit.summary(self.target)
        wanted = request.query_params.get("run")
        wrote = [r for r in reports if r.notes_done] or reports  # by default the latest run that anonymized notes
        report = next((r for r in reports if str(r.run_id) == wanted), wrote[-1] if wrote else None)
        rows = marks.queue_rows(self.target, self.settings.queue)
        found = [m for ms in marks.marks(self.target, self.settings.queue.note_ids).values() for m in ms]
        try:
            estimate, _ = release_estimate(self.config, self.target)
        except ValueError:
            estimate = None
        evaluation = self.settings.evaluation or {}
        cat = lambda name: f"bar cat-{name}"  # noqa: E731
        return self.page(
            request, "dashboard.html", reports=reports, report=report, estimate=estimate, evaluation=evaluation,
            reviewed=sum(1 for r in rows if r.reviewers), total=len(rows),
            by_category=charts.bars(sorted(report.spans_by_category.items(), key=lambda kv: -kv[1]), cat, label="spans per category")
            if report else None,
            by_detector=charts.bars(sorted(report.spans_by_detector.items(), key=lambda kv: -kv[1]), label="spans per detector")
            if report else None,
            missed=charts.bars(Counter(m.category for m in found if m.verdict == "missed").most_common(), cat, label="missed per category"),
            wrong=charts.bars(Counter(m.category for m in found if m.verdict == "wrong").most_common(), cat, label="wrong per category"),
            curve=charts.curve(evaluation.get("curve", []), evaluation.get("threshold")) if evaluation else None,
        )


def create_app(config: Config, target: Target, settings: Settings, host: str = "127.0.0.1") -> Starlette:
    review = Review(config, target, settings)
    hosts = sorted({host, "127.0.0.1", "localhost", "::1", "[::1]"})
    routes = [
        Route("/", review.queue),
        Route("/note", review.note),
        Route("/dashboard", review.dashboard),
        Route("/reviewer", review.set_reviewer, methods=["POST"]),
        Route("/api/mark", review.mark, methods=["POST"]),
        Route("/api/undo", review.undo, methods=["POST"]),
        Route("/api/accept", review.accept, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=hosts), Middleware(Guard, settings=settings)]
    return Starlette(routes=routes, middleware=middleware)


def make_server(
    config: Config, target: Target, queue: Queue, *, host: str = "127.0.0.1", port: int = 0, allow_remote: bool = False,
    reviewer: str | None = None, evaluation: dict | None = None,
):
    """A uvicorn server for the review page on a socket bound now; returns (server, socket, address).

    Run it with ``server.run(sockets=[sock])``; the address holds the access token (print it, never log it)."""
    import uvicorn

    check_host(host, allow_remote)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--port: cannot listen on {host}:{port} ({exc.strerror})") from None
    sock.set_inheritable(True)
    bound = sock.getsockname()[1]
    settings = Settings(queue, marks.check_reviewer(reviewer or getpass.getuser()), bound, evaluation)
    app = create_app(config, target, settings, host)
    server = uvicorn.Server(uvicorn.Config(app, access_log=False, log_config=None, server_header=False, lifespan="off"))
    # An access line holds the address: note ids, and the token of the first request.  uvicorn
    # writes them whenever any handler sits on this logger, whoever put it there: none are written.
    logging.getLogger("uvicorn.access").disabled = True
    shown = f"[{host}]" if ":" in host else host
    return server, sock, f"http://{shown}:{bound}/?token={settings.token}"
