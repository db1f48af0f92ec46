// Live updates for raystep's cluster list: the server pushes rows as
// server-sent events; this only redraws them. Text goes in through
// textContent, never as HTML.
"use strict";
(function () {
  const body = document.querySelector("#clusters tbody");
  const empty = document.getElementById("empty");
  const live = document.getElementById("live");
  if (!body || !window.EventSource) return;

  // Links go only to this server's cluster pages or to http(s) URLs.
  function safe(href) {
    return /^(https?:\/\/|\/clusters\/)/.test(href || "") ? href : "";
  }

  function cell(tr, text, href, cls, reason) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    href = safe(href);
    if (href) {
      const a = document.createElement("a");
      a.href = href;
      a.textContent = text;
      td.appendChild(a);
    } else {
      td.textContent = text;
    }
    if (reason) {
      const div = document.createElement("div");
      div.className = "reason";
      div.textContent = reason;
      td.appendChild(div);
    }
    tr.appendChild(td);
  }

  function rowOf(r) {
    const tr = document.createElement("tr");
    tr.dataset.key = r.key;
    cell(tr, r.namespace);
    cell(tr, r.name, r.detail);
    cell(tr, r.kind + (r.type ? " (" + r.type + ")" : ""));
    cell(tr, r.owner);
    cell(tr, r.run, r.runUrl);
    cell(tr, r.asset, r.assetUrl);
    cell(tr, r.gpus);
    cell(tr, r.gpuHours, "", "num gpu-hours");
    cell(tr, r.status, "", "status status-" + r.status, r.reason);
    cell(tr, r.age, "", "age");
    cell(tr, r.expires, "", "expires");
    cell(tr, r.idle, "", "idle");
    cell(tr, r.dashboard ? "Ray dashboard" : "", r.dashboard);
    const nb = document.createElement("td");
    if (r.notebook) {
      const code = document.createElement("code");
      code.className = "command";
      code.title = "opens its notebook with your own credentials";
      code.textContent = r.notebook;
      nb.appendChild(code);
    }
    tr.appendChild(nb);
    clocks.set(tr, { c: r.clock, arrived: Date.now() });
    hideUnlessFound(tr);
    return tr;
  }

  // Rows change only when their cluster does; between changes Age,
  // Expires and GPU-hours move on here, from the server's clock.
  const clocks = new WeakMap();
  function human(ms) {
    const s = Math.floor(ms / 1000);
    if (s < 0) return "0s";
    if (s < 120) return s + "s";
    const m = Math.floor(s / 60);
    if (m < 10) return s % 60 ? m + "m" + (s % 60) + "s" : m + "m";
    if (m < 180) return m + "m";
    const h = Math.floor(m / 60);
    if (h < 8) return m % 60 ? h + "h" + (m % 60) + "m" : h + "h";
    if (h < 48) return h + "h";
    const d = Math.floor(h / 24);
    if (h < 24 * 8) return h % 24 ? d + "d" + (h % 24) + "h" : d + "d";
    if (d < 365 * 2) return d + "d";
    const y = Math.floor(d / 365);
    return d % 365 && d < 365 * 8 ? y + "y" + (d % 365) + "d" : y + "y";
  }
  function tick() {
    for (const tr of body.rows) {
      const k = clocks.get(tr);
      if (!k) continue;
      const now = k.c.at + (Date.now() - k.arrived);
      tr.querySelector(".age").textContent = human(now - k.c.created);
      if (k.c.expires) {
        tr.querySelector(".expires").textContent = k.c.expires > now
          ? "in " + human(k.c.expires - now) : human(now - k.c.expires) + " ago";
      }
      if (k.c.idleSince) tr.querySelector(".idle").textContent = human(now - k.c.idleSince);
      const gpu = k.c.gpuMillis + k.c.gpusHeld * (now - k.c.at);
      if (gpu > 0) tr.querySelector(".gpu-hours").textContent = (gpu / 3600000).toFixed(2);
    }
  }
  setInterval(tick, 5000);

  function find(key) {
    for (const tr of body.rows) if (tr.dataset.key === key) return tr;
    return null;
  }

  function upsert(r) {
    const old = find(r.key);
    const tr = rowOf(r);
    if (old) old.replaceWith(tr); else body.appendChild(tr);
  }

  // The find box hides, in the browser, the rows that lack its text.
  const quick = document.getElementById("quick");
  quick.parentElement.hidden = false;
  function hideUnlessFound(tr) {
    const q = quick.value.trim().toLowerCase();
    tr.hidden = q !== "" && !tr.textContent.toLowerCase().includes(q);
  }
  quick.addEventListener("input", () => {
    for (const tr of body.rows) hideUnlessFound(tr);
    refreshEmpty();
  });

  const count = document.getElementById("count");
  function refreshEmpty() {
    let shown = 0;
    for (const tr of body.rows) if (!tr.hidden) shown++;
    empty.hidden = shown > 0;
    count.textContent = shown + (shown === 1 ? " cluster" : " clusters");
  }

  const es = new EventSource("/events" + window.location.search);
  es.addEventListener("open", () => { live.textContent = "Live."; });
  es.addEventListener("error", () => { live.textContent = "Reconnecting…"; });
  es.addEventListener("snapshot", (e) => {
    body.replaceChildren(...JSON.parse(e.data).map(rowOf));
    refreshEmpty();
  });
  es.addEventListener("upsert", (e) => { upsert(JSON.parse(e.data)); refreshEmpty(); });
  es.addEventListener("remove", (e) => {
    const tr = find(JSON.parse(e.data).key);
    if (tr) tr.remove();
    refreshEmpty();
  });
  es.addEventListener("totals", (e) => {
    const list = document.getElementById("totals");
    const totals = JSON.parse(e.data) || [];
    const items = totals.map((t) => {
      const li = document.createElement("li");
      li.textContent = t.type + ": " + t.count;
      return li;
    });
    if (items.length === 0) {
      const li = document.createElement("li");
      li.textContent = "none";
      items.push(li);
    }
    list.replaceChildren(...items);
  });
})();
