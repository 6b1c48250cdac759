"""The console's web app: pages rendered on the server, mounted at ``/console`` on the fleet API.

Routes (all under ``/console``):

``/`` (the fleet), ``/quota``, ``/queues``, ``/jobs``, ``/jobs/<plural>/<namespace>/<name>``
    The pages (:mod:`fleet.endpoint.console.pages`). Lists take their filters and page number as
    query parameters, so every view has a URL and works without script.
``/sign-in`` (GET, POST), ``/sign-out`` (POST)
    :mod:`fleet.endpoint.console.access`. A page asked for without a valid session redirects to
    the sign-in page (303), a fragment asked for by the page's script answers 401 (the script
    then loads the page, hence the sign-in page).
``/live``
    Server-sent events: ``change`` whenever the jobs, the members' health or their capacity
    changed (checked every second, at most one event a second), so the page's script fetches its
    main part again (``X-Console-Fragment: 1``) instead of reloading. Without script the page is
    whole and current when loaded.
``/static/...``
    The stylesheet and the script, from the package; nothing is loaded from anywhere else.

Every response carries a strict Content-Security-Policy (``default-src 'none'``; script, style,
images and connections from this origin only; no inline script or style, no frames, forms post
here only), ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin`` and, for pages,
``Cache-Control: no-store``. Templates are Jinja2 with autoescaping on: every value a user wrote
(names, labels, messages) is text in the page, never markup. Errors never show a trace: a job
that does not exist or may not be read is a 404 page, anything unexpected a short 500 page,
logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlencode, urlsplit

import redis.asyncio
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleet.apiserver import ApiError, NotFound
from fleet.endpoint.backends import FleetStore
from fleet.endpoint.console import pages
from fleet.endpoint.console.access import COOKIE, SESSION_SECONDS, Sessions, Viewer
from fleet.endpoint.console.index import JobIndex
from fleet.endpoint.explain import Explainer
from fleet.state import AsyncObjects, DispatchKeys, Objects
from fleet.timestamps import parse_rfc3339
from queues import Ledger

__all__ = ["BASE", "Console"]

log = logging.getLogger("fleet.endpoint.console")

#: Where the console is mounted on the API.
BASE: Final = "/console"
FRAGMENT_HEADER: Final = "x-console-fragment"
CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_STATIC: Final = Path(__file__).parent / "static"
#: How often the live stream looks for changes, and how long one stream lasts (the browser
#: reconnects by itself).
_LIVE_TICK: Final = 1.0
_LIVE_SECONDS: Final = 300.0


def _age(stamp: object, now: float | None = None) -> str:
    """``5m``, ``2h``... since an RFC 3339 time; empty when there is none."""
    if not stamp:
        return ""
    when = parse_rfc3339(str(stamp))
    if when is None:
        return ""
    seconds = max(0, int((now or time.time()) - when.timestamp()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _clock(stamp: object) -> str:
    """An RFC 3339 time as ``2026-01-02 03:04:05 UTC``."""
    when = parse_rfc3339(str(stamp)) if stamp else None
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if when is not None else ""


def environment() -> Environment:
    """The templates, escaping every value (``.html`` or not)."""
    env = Environment(
        loader=PackageLoader("fleet.endpoint.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["age"] = _age
    env.filters["clock"] = _clock
    env.globals["base"] = BASE
    env.globals["node_bars"] = pages.node_bars
    env.globals["timeline"] = pages.timeline
    return env


class _Headers:
    """The security headers of every console response (plain ASGI, so that streams pass through
    untouched and a closed connection is seen at once)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = str(scope.get("path", "")).startswith(f"{BASE}/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = CSP
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "same-origin"
                headers["X-Frame-Options"] = "DENY"
                if not static:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, with_headers)


def _same_origin(request: Request) -> bool:
    """A form post from this origin (the cookie is SameSite=Strict too; this is the second lock)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        referer = request.headers.get("referer")
        if referer is None:
            return origin is None  # no header at all: not a browser's cross-site post
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(referer))
    return origin == f"{request.url.scheme}://{request.url.netloc}"


#: The largest sign-in or sign-out form read (a token is a few hundred bytes).
_FORM_LIMIT: Final = 16 * 1024


async def _form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` form (what the console's forms send), read up to
    :data:`_FORM_LIMIT` bytes; empty for anything else."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return {}
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > _FORM_LIMIT:
            return {}
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items() if values}


def _safe_next(value: str | None) -> str:
    """Where to go after signing in: a console path only, never another site."""
    if value and value.startswith(f"{BASE}/") and not value.startswith("//") and "\\" not in value:
        return value
    return f"{BASE}/"


class Console:
    """The console of one API replica (see the module docstring)."""

    def __init__(
        self,
        *,
        store: FleetStore,
        objects_store: AsyncObjects,
        objects: Objects,
        ledger: Ledger,
        explainer: Explainer,
        sessions: Sessions,
        aclient: redis.asyncio.Redis,
        dispatch_keys: DispatchKeys,
    ) -> None:
        self.store = store
        self.objects = objects
        self.ledger = ledger
        self.explainer = explainer
        self.sessions = sessions
        self.aclient = aclient
        self.keys = dispatch_keys
        self.index = JobIndex(objects_store)
        self.env = environment()
        self._live: tuple[float, str] = (0.0, "")
        self.app = Starlette(
            routes=[
                Route("/", self._page(self.fleet), methods=["GET"]),
                Route("/quota", self._page(self.quota), methods=["GET"]),
                Route("/queues", self._page(self.queues), methods=["GET"]),
                Route("/jobs", self._page(self.jobs), methods=["GET"]),
                Route("/jobs/{plural}/{namespace}/{name}", self._page(self.job), methods=["GET"]),
                Route("/sign-in", self.sign_in_page, methods=["GET"]),
                Route("/sign-in", self.sign_in, methods=["POST"]),
                Route("/sign-out", self.sign_out, methods=["POST"]),
                Route("/live", self.live, methods=["GET"]),
                Mount("/static", StaticFiles(directory=_STATIC), name="static"),
            ],
            middleware=[Middleware(_Headers)],
        )

    async def close(self) -> None:
        await self.index.close()

    # ---- rendering -----------------------------------------------------------------------------

    def render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        fragment = request.headers.get(FRAGMENT_HEADER) == "1"
        html = self.env.get_template(template).render(
            fragment=fragment, request_path=request.url.path, query=request.url.query, **context
        )
        return HTMLResponse(html, status_code=status)

    def _page(
        self, build: Callable[[Request, Viewer], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A page: its viewer from the session (else the sign-in page), errors as pages."""

        async def handle(request: Request) -> Response:
            try:
                viewer = await self.sessions.viewer(request.cookies.get(COOKIE))
            except Exception:
                log.exception("event=console_session_failed")
                viewer = None
            if viewer is None:
                if request.headers.get(FRAGMENT_HEADER) == "1":
                    return Response(status_code=401)
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"{BASE}/sign-in?{urlencode({'next': target})}", status_code=303)
            try:
                await self.index.ready()
                return await build(request, viewer)
            except NotFound:
                return self._error(
                    request, viewer, 404, "Not found", "There is no such job, or your token may not read it."
                )
            except ApiError as error:
                return self._error(request, viewer, error.code, "Unavailable", str(error))
            except Exception:
                log.exception("event=console_page_failed path=%s", request.url.path)
                why = "The page could not be built; the API's log says why."
                return self._error(request, viewer, 500, "Something went wrong", why)

        return handle

    def _error(self, request: Request, viewer: Viewer, code: int, title: str, message: str) -> Response:
        return self.render(request, "error.html", code, viewer=viewer, title=title, message=message)

    def _sign_in_form(self, request: Request, code: int, target: str, error: str) -> Response:
        return self.render(
            request, "sign_in.html", code, viewer=None, title="Sign in", tab="", next=target, error=error
        )

    @staticmethod
    def _number(request: Request) -> int:
        try:
            return max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            return 1

    # ---- pages ---------------------------------------------------------------------------------

    async def fleet(self, request: Request, viewer: Viewer) -> Response:
        data = await pages.fleet_page(viewer, self.store, self.index, self._number(request))
        return self.render(request, "fleet.html", viewer=viewer, title="Fleet", tab="fleet", **data)

    async def quota(self, request: Request, viewer: Viewer) -> Response:
        data = await pages.quota_page(viewer, self.ledger, self.index)
        return self.render(request, "quota.html", viewer=viewer, title="Quota tree", tab="quota", **data)

    async def queues(self, request: Request, viewer: Viewer) -> Response:
        only = request.query_params.get("queue", "")
        data = await pages.queues_page(viewer, self.ledger, self.store, self.index, only)
        return self.render(
            request, "queues.html", viewer=viewer, title="Queues", tab="queues", only=only, **data
        )

    async def jobs(self, request: Request, viewer: Viewer) -> Response:
        names = ("namespace", "kind", "state", "member", "name", "queue")
        filters = {n: request.query_params.get(n, "").strip() for n in names}
        data = pages.jobs_page(viewer, self.index, filters, self._number(request))
        shown = {k: v for k, v in filters.items() if v}

        def link(**extra: str) -> str:
            return f"{BASE}/jobs?{urlencode({**shown, **extra})}"

        return self.render(request, "jobs.html", viewer=viewer, title="Jobs", tab="jobs", link=link, **data)

    async def job(self, request: Request, viewer: Viewer) -> Response:
        params = request.path_params
        rt = pages.rt_named(str(params["plural"]))
        if rt is None:
            raise NotFound("no such kind")
        found = await pages.job_page(
            viewer,
            rt,
            str(params["namespace"]),
            str(params["name"]),
            store=self.store,
            objects=self.objects,
            explainer=self.explainer,
            client=self.aclient,
            keys=self.keys,
        )
        if found is None:
            raise NotFound("not readable")
        title = f"{rt.kind} {params['namespace']}/{params['name']}"
        return self.render(request, "job.html", viewer=viewer, title=title, tab="jobs", job=found)

    # ---- signing in and out --------------------------------------------------------------------

    async def sign_in_page(self, request: Request) -> Response:
        if not self.sessions.required:
            return RedirectResponse(f"{BASE}/", status_code=303)
        return self._sign_in_form(request, 200, _safe_next(request.query_params.get("next")), "")

    async def sign_in(self, request: Request) -> Response:
        if not self.sessions.required:
            return RedirectResponse(f"{BASE}/", status_code=303)
        form = await _form(request)
        target = _safe_next(str(form.get("next") or ""))
        if not _same_origin(request):
            return self._sign_in_form(
                request, 403, target, "The sign-in form must be sent from this console."
            )
        viewer = self.sessions.check(str(form.get("token") or ""))
        if viewer is None:
            return self._sign_in_form(request, 401, target, "That token is not accepted by the fleet API.")
        try:
            session = await self.sessions.open(str(form.get("token") or ""))
        except Exception:  # Redis away: say so, never a trace
            log.exception("event=console_session_not_opened")
            why = "The fleet's state store is unavailable; try again."
            return self._sign_in_form(request, 503, target, why)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE, session, max_age=SESSION_SECONDS, path="/", secure=True, httponly=True, samesite="strict"
        )
        log.info("event=console_signed_in user=%s", viewer.user)
        return response

    async def sign_out(self, request: Request) -> Response:
        if not _same_origin(request):
            return Response("cross-site sign-out refused", status_code=403, media_type="text/plain")
        with contextlib.suppress(Exception):  # Redis away: the session expires by itself
            await self.sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse(f"{BASE}/sign-in", status_code=303)
        response.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="strict")
        return response

    # ---- live updates --------------------------------------------------------------------------

    async def _fingerprint(self) -> str:
        """What the pages show that may change: the jobs (the index's generation), the members'
        readiness and capacity (their records without the timestamps that move on their own).
        Computed at most once per tick for all streams of the replica."""
        now = time.monotonic()
        if now - self._live[0] < _LIVE_TICK / 2:
            return self._live[1]
        async with self.aclient.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.health)
            pipe.hgetall(self.keys.capacity)
            health, capacity = await pipe.execute()
        digest = hashlib.sha256(str(self.index.generation).encode())
        for raw in (health, capacity):
            for member in sorted(raw):
                try:
                    record = json.loads(raw[member])
                except ValueError:
                    continue
                if isinstance(record, dict):
                    for moving in ("probed", "latency", "successes", "failures", "observed"):
                        record.pop(moving, None)
                digest.update(member + json.dumps(record, sort_keys=True).encode())
        self._live = (now, digest.hexdigest())
        return self._live[1]

    async def live(self, request: Request) -> Response:
        try:
            viewer = await self.sessions.viewer(request.cookies.get(COOKIE))
        except Exception:  # Redis away: the browser retries the stream
            return Response(status_code=503)
        if viewer is None:
            return Response(status_code=401)
        self.index.start()

        async def stream() -> AsyncIterator[bytes]:
            deadline = time.monotonic() + _LIVE_SECONDS
            seen = await self._fingerprint()
            yield b"retry: 2000\n\n"
            quiet = 0
            while time.monotonic() < deadline:
                if await request.is_disconnected():
                    return
                await asyncio.sleep(_LIVE_TICK)
                with contextlib.suppress(Exception):  # Redis away: the next tick tries again
                    now = await self._fingerprint()
                    if now != seen:
                        seen = now
                        quiet = 0
                        yield f"event: change\ndata: {now[:12]}\n\n".encode()
                        continue
                quiet += 1
                if quiet % 15 == 0:
                    yield b": keep-alive\n\n"

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"}
        )


def mount_console(app: Starlette, console: Console) -> None:
    """Serve ``console`` at ``/console`` on the API app (and ``/console`` itself redirected)."""

    async def to_console(request: Request) -> Response:
        return RedirectResponse(f"{BASE}/", status_code=308)

    app.router.routes.insert(0, Route(BASE, to_console, methods=["GET"]))
    app.router.routes.insert(1, Mount(BASE, app=console.app))
