"""The fleet console: the whole fleet, every quota and every job's reason, on web pages served by
the fleet API at ``/console/`` (no process of its own).

* :mod:`~fleet.endpoint.console.access`: signing in with an API bearer token, sessions, and what
  a user may see (the API's authorizer, asked for every read);
* :mod:`~fleet.endpoint.console.index`: every job as a row in memory, followed by watch, so lists
  are filtered and paged on the server whatever the number of jobs;
* :mod:`~fleet.endpoint.console.pages`: what each page shows, from the API's own readers;
* :mod:`~fleet.endpoint.console.app`: the routes, Jinja2 templates (autoescaped), the strict
  Content-Security-Policy and the live updates (server-sent events).

The templates and the static files (one stylesheet, one small script of our own, no library,
nothing from the network) are package data.
"""

from fleet.endpoint.console.access import Sessions, Viewer
from fleet.endpoint.console.app import BASE, Console, mount_console

__all__ = ["BASE", "Console", "Sessions", "Viewer", "mount_console"]
