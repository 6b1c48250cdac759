"""Watches that survive disconnects: list once, then follow the member's changes from there.

A :class:`Watcher` runs on its own thread (the ``kubernetes`` client is synchronous) and follows
the reflector pattern of client-go:

1. **List** (paged) to learn the current objects and a resourceVersion, and hand the consumer a
   ``SYNC`` event: every object there is now, and every object it knew of that is gone
   (``vanished``, with the last state seen). The first event is always such a ``SYNC``.
2. **Watch** from that resourceVersion with bookmarks on, delivering ``ADDED``, ``MODIFIED`` and
   ``DELETED`` and remembering the resourceVersion of each event and bookmark.
3. When the stream ends (the server's ``timeoutSeconds``, a dropped connection, a member that is
   down or answers 503) it **resumes** from the last resourceVersion, after an exponential
   backoff with jitter when the end was a failure: nothing is missed and nothing is listed again.
4. When the member answers **410 Gone** (the resourceVersion left its history window, e.g. after
   a long outage), or **Too large resource version** (one it has not reached: it was rebuilt or
   restored from an older backup), it lists again and delivers a ``SYNC``; objects deleted while
   it was away come back as ``vanished``, so the consumer can replace its state rather than
   patch it.

A consumer that writes somewhere per event can take them in groups (``on_batch``): the changes
that arrived in one read of the stream, in order, in one call (``SYNC`` still goes to the
callback). A callback that raises is logged and followed by a fresh list, so the consumer gets
the whole state again instead of silently missing one event. :meth:`Watcher.stop` shuts the open socket
down, so it returns at once even while a read is blocked.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from fleet import fastjson
from fleet.members.errors import MemberError, MemberRefused
from fleet.members.metrics import WATCH_EVENTS, WATCH_RELISTS, WATCH_RESTARTS
from fleet.members.resource import JSONObject, Listing, Resource
from fleet.members.retry import describe
from fleet.members.settings import MemberSettings

if TYPE_CHECKING:
    from urllib3 import BaseHTTPResponse


__all__ = ["ADDED", "DELETED", "MODIFIED", "SYNC", "BatchCallback", "EventCallback", "WatchEvent", "Watcher"]

log = logging.getLogger("fleet.members.watch")

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
#: Synthetic: the full current state after a (re)list; see :attr:`WatchEvent.vanished`.
SYNC: Final = "SYNC"


@dataclass(frozen=True)
class WatchEvent:
    """One change in a member, or (``SYNC``) its whole state after a list."""

    type: str
    member: str
    resource: str
    object: JSONObject | None = None
    objects: tuple[JSONObject, ...] = ()
    vanished: tuple[JSONObject, ...] = ()
    resource_version: str = ""
    cause: str = field(default="", compare=False)


EventCallback = Callable[[WatchEvent], None]
#: Takes the ADDED, MODIFIED and DELETED events of one read of the stream, in order.
BatchCallback = Callable[[list[WatchEvent]], None]


#: What kube-apiserver says of a resourceVersion it has not reached (a member restored from an
#: older backup, or rebuilt): client-go's reflector lists again from the latest on it
#: (``isTooLargeResourceVersionError``: the cause ``ResourceVersionTooLarge``, or this message).
_TOO_LARGE: Final = "Too large resource version"


def _too_large(status: Mapping[str, Any]) -> bool:
    causes = (status.get("details") or {}).get("causes") or []
    return any(c.get("reason") == "ResourceVersionTooLarge" for c in causes if isinstance(c, Mapping)) or (
        _TOO_LARGE in str(status.get("message") or "")
    )


class _Gone(Exception):
    """The member no longer has our resourceVersion: list again."""


class _StreamError(Exception):
    """The member ended the stream with an ERROR event other than 410."""


class _CallbackFailed(Exception):
    """The consumer's callback raised; its state may be behind, so list again."""


def _key(obj: JSONObject) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def _resource_version(obj: JSONObject | None) -> str:
    metadata = (obj or {}).get("metadata") or {}
    return str(metadata.get("resourceVersion") or "")


def _chunks(response: Any) -> Iterator[bytes]:
    # Hand over each piece as soon as it arrives: a chunk of a chunked stream, or whatever one
    # read returns otherwise (``stream(amt=None)`` would wait for the end of a non-chunked body).
    if response.chunked and response.supports_chunked_reads():
        yield from response.read_chunked(decode_content=True)
        return
    while chunk := response.read1(65536):
        yield chunk


def _line_groups(response: BaseHTTPResponse) -> Iterator[list[bytes]]:
    """The complete lines of the stream, grouped as they arrived (one group per read)."""
    buffer = b""
    for chunk in _chunks(response):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        lines = [line for line in complete if line.strip()]
        if lines:
            yield lines
    if buffer.strip():
        yield [buffer]


class WatchedMember(Protocol):
    """What a watcher uses of its member (:class:`fleet.members.access.Member`, which starts
    watchers, so this module names the calls rather than importing it back)."""

    name: str
    settings: MemberSettings

    def list_objects(
        self,
        resource: Resource,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        namespace: str | None = None,
        retry: bool = True,
    ) -> Listing: ...

    def open_watch(
        self,
        resource: Resource,
        resource_version: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        namespace: str | None = None,
    ) -> BaseHTTPResponse: ...


class Watcher:
    """Follows one kind in one member and hands every change to ``callback`` (on its thread)."""

    def __init__(
        self,
        member: WatchedMember,
        resource: Resource,
        callback: EventCallback,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        namespace: str | None = None,
        on_batch: BatchCallback | None = None,
    ) -> None:
        self.member = member
        self.resource = resource
        self.callback = callback
        self.on_batch = on_batch
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.namespace = namespace
        self._objects: dict[tuple[str, str], JSONObject] = {}
        self._resource_version = ""
        self._stopping = threading.Event()
        self._synced = threading.Event()
        self._tried = threading.Event()
        self._lock = threading.Lock()
        self._response: BaseHTTPResponse | None = None
        self._thread: threading.Thread | None = None
        self._failures = 0
        self.last_error: str | None = None
        #: ``WATCH_EVENTS``' child per event type, looked up once (``labels()`` locks and hashes).
        self._event_counts: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (
            f"Watcher(member={self.member.name!r}, resource={self.resource.name!r}, "
            f"label_selector={self.label_selector!r}, resource_version={self._resource_version!r})"
        )

    # -- control ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("watcher already started")
        self._thread = threading.Thread(
            target=self._run, name=f"watch-{self.member.name}-{self.resource.name}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> bool:
        """Stop and wait for the thread; ``True`` when it ended within ``timeout``."""
        self._stopping.set()
        self._interrupt()
        if self._thread is None or self._thread is threading.current_thread():
            return True  # stopped from its own callback: the loop ends when the callback returns
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _interrupt(self) -> None:
        with self._lock:
            response = self._response
        if response is None:
            return
        try:
            response.shutdown()  # unblocks a read in progress on the watcher's thread
        except Exception:
            response.close()

    def wait_synced(self, timeout: float) -> bool:
        """Block until the first ``SYNC`` was delivered (or ``timeout`` passed)."""
        return self._synced.wait(timeout)

    def wait_tried(self, timeout: float) -> bool:
        """Block until the first ``SYNC`` was delivered or an attempt at it failed (the member
        is unreachable for now: :attr:`last_error` says why), or ``timeout`` passed."""
        return self._tried.wait(timeout)

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping.is_set()

    @property
    def resource_version(self) -> str:
        """The resourceVersion a resumed watch would start from."""
        return self._resource_version

    @property
    def connected(self) -> bool:
        """Whether a watch stream is open right now."""
        with self._lock:
            return self._response is not None

    def snapshot(self) -> list[JSONObject]:
        """The objects as last seen (the state the events so far add up to)."""
        with self._lock:
            return list(self._objects.values())

    # -- the loop -----------------------------------------------------------------------------

    def _log(self, level: int, event: str, **fields: object) -> None:
        if not log.isEnabledFor(level):
            return
        extra = "".join(f" {key}={value}" for key, value in fields.items())
        log.log(level, "member=%s kind=%s event=%s%s", self.member.name, self.resource.name, event, extra)

    def _pause(self) -> None:
        settings = self.member.settings
        ceiling = min(
            settings.watch_backoff_max, settings.watch_backoff_initial * 2 ** min(self._failures, 30)
        )
        self._failures += 1
        self._stopping.wait(ceiling * random.uniform(0.5, 1.0))

    def _run(self) -> None:
        cause = "initial"
        need_list = True
        while not self._stopping.is_set():
            try:
                if need_list:
                    self._relist(cause)
                    need_list = False
                else:
                    WATCH_RESTARTS.labels(self.member.name, self.resource.name, cause).inc()
                opened = time.monotonic()
                cause, received = self._follow()
                if received or time.monotonic() - opened >= 1.0:
                    self._failures = 0
                    self.last_error = None
                    continue
                # An empty stream that ended at once must not become a busy loop: pause below.
            except _Gone:
                cause, need_list = "gone", True
                self._log(logging.INFO, "gone", resource_version=self._resource_version)
            except _CallbackFailed:
                cause, need_list = "callback-error", True
            except MemberRefused as error:
                if error.code == 410 or (error.code == 504 and _TOO_LARGE in str(error)):
                    cause, need_list = "gone", True
                    self._log(logging.INFO, "gone", resource_version=self._resource_version)
                else:
                    cause = "refused"
                    self.last_error = str(error)
                    self._log(logging.ERROR, "refused", code=error.code, reason=error.reason)
            except (MemberError, _StreamError) as error:
                cause = "unavailable"
                self.last_error = str(error)
                self._log(logging.WARNING, "disconnected", error=repr(str(error)))
            except Exception as error:
                cause = "disconnected"
                self.last_error = describe(error)
                if not self._stopping.is_set():
                    self._log(logging.WARNING, "disconnected", error=repr(describe(error)))
            self._tried.set()
            self._pause()
        self._log(logging.INFO, "stopped")

    def _relist(self, cause: str) -> None:
        WATCH_RELISTS.labels(self.member.name, self.resource.name, cause).inc()
        listing = self.member.list_objects(
            self.resource,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            namespace=self.namespace,
            retry=False,
        )
        fresh = {_key(obj): obj for obj in listing.items}
        with self._lock:
            vanished = tuple(obj for key, obj in self._objects.items() if key not in fresh)
        self._log(
            logging.INFO,
            "sync",
            cause=cause,
            objects=len(fresh),
            vanished=len(vanished),
            resource_version=listing.resource_version,
        )
        self._deliver(
            WatchEvent(
                SYNC,
                self.member.name,
                self.resource.name,
                objects=tuple(listing.items),
                vanished=vanished,
                resource_version=listing.resource_version,
                cause=cause,
            )
        )
        # Only once the consumer has it: if it failed, the next list compares against what it had.
        with self._lock:
            self._objects = fresh
            self._resource_version = listing.resource_version
        self._synced.set()
        self._tried.set()

    def _follow(self) -> tuple[str, int]:
        """Read one watch stream to its end: why it ended (no failure) and how many lines came."""
        response = self.member.open_watch(
            self.resource,
            self._resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            namespace=self.namespace,
        )
        with self._lock:
            self._response = response
        received = 0
        try:
            if self._stopping.is_set():
                return "stopped", received
            self._log(logging.DEBUG, "watching", resource_version=self._resource_version)
            groups = _line_groups(response) if self.on_batch is None else self._read_ahead(response)
            for lines in groups:
                received += len(lines)
                self._handle(lines)
                if self._stopping.is_set():
                    return "stopped", received
            return "expired", received
        finally:
            with self._lock:
                self._response = None
            response.close()
            response.release_conn()

    def _read_ahead(self, response: BaseHTTPResponse) -> Iterator[list[bytes]]:
        """The stream's lines, grouped by what arrived while the consumer was busy.

        A reader thread takes the stream as it comes; each group handed on is everything it
        read since the last one. So a consumer that keeps up gets each change at once, and one
        that fell behind (a burst, a slow write) catches up in one call instead of one per
        change, whatever chunking the server chose. Stream errors are raised here, in order.
        """
        read: queue.SimpleQueue[list[bytes] | BaseException | None] = queue.SimpleQueue()

        def reader() -> None:
            try:
                for lines in _line_groups(response):
                    read.put(lines)
                read.put(None)
            except BaseException as error:  # handed to the consumer's thread, raised there
                read.put(error)

        name = f"watch-read-{self.member.name}-{self.resource.name}"
        threading.Thread(target=reader, name=name, daemon=True).start()
        while True:
            items = [read.get()]
            while True:
                try:
                    items.append(read.get_nowait())
                except queue.Empty:
                    break
            group = [line for item in items if isinstance(item, list) for line in item]
            if group:
                yield group
            end = items[-1]  # the reader's end (None, or its error) is the last it ever puts
            if isinstance(end, BaseException):
                raise end
            if end is None:
                return

    def _handle(self, lines: list[bytes]) -> None:
        """Deliver the changes of one read, then remember them (bookmarks included)."""
        events: list[WatchEvent] = []
        resource_version = self._resource_version
        for line in lines:
            event, resource_version = self._decode(line, resource_version)
            if event is not None:
                events.append(event)
        # Each remembered after its delivery, so that a failed callback leaves the objects as the
        # consumer last saw them.
        if self.on_batch is not None and events:
            self._deliver(events)
            self._remember(events, resource_version)
            return
        for event in events:
            self._deliver(event)
            self._remember([event], event.resource_version)
        self._remember([], resource_version)  # a bookmark after the last event

    def _remember(self, events: list[WatchEvent], resource_version: str) -> None:
        with self._lock:
            for event in events:
                assert event.object is not None
                key = _key(event.object)
                if event.type == DELETED:
                    self._objects.pop(key, None)
                else:
                    self._objects[key] = event.object
            self._resource_version = resource_version

    def _decode(self, line: bytes, resource_version: str) -> tuple[WatchEvent | None, str]:
        """One watch line as an event (None for a bookmark) and the resourceVersion after it.

        Raises for a stream error or a 410.
        """
        try:
            event = fastjson.loads(line)
        except ValueError:
            raise _StreamError(f"undecodable watch line {line[:80]!r}") from None
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise _StreamError(f"watch event without object: {kind}")
        counted = str(kind)
        counter = self._event_counts.get(counted)
        if counter is None:
            counter = self._event_counts[counted] = WATCH_EVENTS.labels(
                self.member.name, self.resource.name, counted
            )
        counter.inc()
        if kind == "BOOKMARK":
            return None, _resource_version(obj) or resource_version
        if kind == "ERROR":
            if obj.get("code") == 410 or _too_large(obj):
                raise _Gone()
            raise _StreamError(f"{obj.get('code')} {obj.get('reason')}: {obj.get('message')}")
        if kind not in (ADDED, MODIFIED, DELETED):
            raise _StreamError(f"unknown watch event type {kind!r}")
        if log.isEnabledFor(logging.DEBUG):
            self._log(logging.DEBUG, kind.lower(), name="/".join(part for part in _key(obj) if part))
        resource_version = _resource_version(obj) or resource_version
        event = WatchEvent(
            kind, self.member.name, self.resource.name, object=obj, resource_version=resource_version
        )
        return event, resource_version

    def _deliver(self, event: WatchEvent | list[WatchEvent]) -> None:
        """Hand one event to the callback, or a read's events to ``on_batch``."""
        try:
            if isinstance(event, list):
                assert self.on_batch is not None
                self.on_batch(event)
            else:
                self.callback(event)
        except Exception as error:
            what = f"events={len(event)}" if isinstance(event, list) else f"type={event.type}"
            log.exception(
                "member=%s kind=%s event=callback-error %s", self.member.name, self.resource.name, what
            )
            self.last_error = f"callback raised {type(error).__name__}"
            raise _CallbackFailed() from error
