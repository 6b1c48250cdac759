// The fleet console's live updates: when the server says something changed (server-sent events
// from data-live), fetch the page again and replace its main part; keyboard focus and the scroll
// position stay where they were. Without this script every page is whole and current when loaded.
"use strict";
(function () {
  var main = document.getElementById("main");
  var status = document.getElementById("live");
  if (!main || !main.dataset.live || !window.EventSource || !window.fetch) {
    return;
  }
  var busy = false;
  var again = false;

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  function focusKey(element) {
    if (!element || !main.contains(element)) {
      return null;
    }
    return element.getAttribute("href") || element.id || null;
  }

  function refocus(key) {
    if (!key) {
      return;
    }
    var found = document.getElementById(key);
    if (!found) {
      var links = main.querySelectorAll("a[href]");
      for (var i = 0; i < links.length; i += 1) {
        if (links[i].getAttribute("href") === key) {
          found = links[i];
          break;
        }
      }
    }
    if (found) {
      found.focus({ preventScroll: true });
    }
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    var key = focusKey(document.activeElement);
    fetch(window.location.href, { headers: { "X-Console-Fragment": "1" }, credentials: "same-origin" })
      .then(function (response) {
        if (response.status === 401) {
          window.location.reload();
          return null;
        }
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (html !== null) {
          var x = window.scrollX;
          var y = window.scrollY;
          main.innerHTML = html;
          window.scrollTo(x, y);
          refocus(key);
          say("Updated " + new Date().toLocaleTimeString());
        }
      })
      .catch(function () {
        say("Not updated: the fleet API did not answer");
      })
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  var source = new EventSource(main.dataset.live);
  source.addEventListener("change", refresh);
  // The stream says what changes after it opens: a change between the page being made and the
  // stream opening (or while it reconnected) would never be said, so each opening fetches the
  // page once (level, not edge).
  source.addEventListener("open", function () {
    say("Live");
    refresh();
  });
  source.addEventListener("error", function () {
    say("Reconnecting…");
  });
})();
