// A job's live log: the server pushes new lines as server-sent events;
// this appends them as text. Scrolled to the bottom, it follows the end.
"use strict";
(function () {
  const pre = document.getElementById("log");
  const live = document.getElementById("live");
  if (!pre || !window.EventSource) return;
  const keep = 5000;
  let next = 0;
  const es = new EventSource("events");
  es.addEventListener("open", () => { live.textContent = "Live."; });
  es.addEventListener("error", () => { if (es.readyState !== EventSource.CLOSED) live.textContent = "Reconnecting…"; });
  es.addEventListener("lines", (e) => {
    const d = JSON.parse(e.data);
    const lines = d.lines || [];
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    if (d.from === 0 || d.from !== next) {
      // A fresh stream (first, or after a reconnect): it carries what the
      // server keeps, so start over from it.
      pre.textContent = lines.join("\n");
    } else if (lines.length > 0) {
      pre.append((pre.textContent ? "\n" : "") + lines.join("\n"));
    }
    next = d.from + lines.length;
    if (pre.childNodes.length > 200) pre.textContent = pre.textContent.split("\n").slice(-keep).join("\n");
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  });
  es.addEventListener("end", (e) => {
    const d = JSON.parse(e.data);
    live.textContent = "The log is complete.";
    if (d.error) {
      const err = document.getElementById("log-error");
      err.textContent = d.error;
      err.hidden = false;
      live.textContent = "Following the log stopped.";
    }
    es.close();
  });
})();
