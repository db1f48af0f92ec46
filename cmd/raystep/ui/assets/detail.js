// Live updates of a cluster page: the server pushes its parts as
// server-sent events; this only redraws them. Text goes in through
// textContent, never as HTML.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !window.EventSource) return;

  function row(cells) {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = document.createElement("td");
      if (c && c.node) td.appendChild(c.node); else td.textContent = c == null ? "" : String(c);
      if (c && c.cls) td.className = c.cls;
      tr.appendChild(td);
    }
    return tr;
  }

  function fill(id, rows, empty, width) {
    const body = document.querySelector("#" + id + " tbody");
    if (!body) return;
    if (rows.length === 0) {
      const tr = row([empty]);
      tr.firstChild.colSpan = width;
      body.replaceChildren(tr);
    } else {
      body.replaceChildren(...rows);
    }
  }

  function link(text, href) {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  }

  function problem(p) {
    if (!p.reason) return "";
    const span = document.createElement("span");
    const b = document.createElement("strong");
    b.textContent = p.reason;
    span.append(b, ": " + p.message);
    return { node: span, cls: "problem" };
  }

  const es = new EventSource("events");
  es.addEventListener("open", () => { live.textContent = "Live."; });
  es.addEventListener("error", () => { live.textContent = "Reconnecting…"; });
  es.addEventListener("cluster", (e) => {
    const c = JSON.parse(e.data);
    const st = document.getElementById("status");
    st.textContent = c.status;
    st.className = "status status-" + c.status;
    st.title = c.reason || "";
    document.getElementById("age").textContent = c.age;
  });
  es.addEventListener("pods", (e) => {
    const pods = JSON.parse(e.data) || [];
    fill("pods", pods.map((p) => row([p.name, p.role, p.phase, p.node, p.restarts, p.age, problem(p)])), "No pods yet.", 7);
  });
  es.addEventListener("warnings", (e) => {
    const evs = JSON.parse(e.data) || [];
    fill("warnings", evs.map((w) => row([w.object, w.reason, w.message, w.count, w.last])), "None.", 5);
  });
  es.addEventListener("jobs", (e) => {
    const d = JSON.parse(e.data);
    const err = document.getElementById("ray-error");
    err.hidden = !d.error;
    err.textContent = d.error ? "The Ray head did not answer: " + d.error : "";
    const jobs = d.jobs || [];
    fill("jobs", jobs.map((j) => {
      const code = document.createElement("code");
      code.textContent = j.entrypoint;
      return row([j.id, { node: document.createTextNode(j.status), cls: "status status-" + j.status },
        { node: code }, j.started, j.duration, j.message, { node: link("log", j.logUrl) }]);
    }), "No Ray jobs.", 7);
  });
  es.addEventListener("util", (e) => {
    const at = JSON.parse(e.data).at;
    for (const img of document.querySelectorAll("img.chart")) {
      img.src = "util/" + img.dataset.metric + ".svg?at=" + at;
    }
  });
  es.addEventListener("gone", () => {
    live.textContent = "The cluster is gone.";
    es.close();
  });
})();
