// Progressive enhancement only: an open item page reloads itself when the
// item is decided elsewhere. Every decision works without this script.
(function () {
  "use strict";
  var el = document.getElementById("poll");
  if (!el || !window.fetch) { return; }
  var url = el.getAttribute("data-url");
  var status = el.getAttribute("data-status");
  var every = parseInt(el.getAttribute("data-interval"), 10) || 5000;
  var tally = null;
  function tick() {
    fetch(url, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      if (r.status === 401) { window.location.reload(); return null; }
      return r.ok ? r.json() : null;
    }).then(function (d) {
      if (!d) { return; }
      if (tally === null) { tally = d.tally; }
      if (d.status !== status || d.tally !== tally) {
        // Keep what the person is typing: reload only if no field is focused with text.
        var a = document.activeElement;
        if (a && a.tagName === "TEXTAREA" && a.value) { return; }
        window.location.reload();
      }
    }).catch(function () {}).then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
