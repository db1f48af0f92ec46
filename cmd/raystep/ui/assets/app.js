// Live updates for raystep's cluster list: the server pushes rows as
// server-sent events; this only redraws them. Text goes in through
// textContent, never as HTML.
"use strict";
(function () {
  const body = document.querySelector("#clusters tbody");
  const empty = document.getElementById("empty");
  const live = document.getElementById("live");
  if (!body || !window.EventSource) return;

  function cell(tr, text, href, cls, title) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    if (title) td.title = title;
    if (href) {
      const a = document.createElement("a");
      a.href = href;
      a.textContent = text;
      td.appendChild(a);
    } else {
      td.textContent = text;
    }
    tr.appendChild(td);
  }

  function rowOf(r) {
    const tr = document.createElement("tr");
    tr.dataset.key = r.key;
    cell(tr, r.namespace);
    cell(tr, r.name);
    cell(tr, r.kind + (r.type ? " (" + r.type + ")" : ""));
    cell(tr, r.owner);
    cell(tr, r.run, r.runUrl);
    cell(tr, r.asset, r.assetUrl);
    cell(tr, r.gpus);
    cell(tr, r.status, "", "status status-" + r.status, r.reason);
    cell(tr, r.age);
    cell(tr, r.expires);
    const safe = /^https?:\/\//.test(r.dashboard) ? r.dashboard : "";
    cell(tr, safe ? "dashboard" : "", safe);
    return tr;
  }

  function find(key) {
    for (const tr of body.rows) if (tr.dataset.key === key) return tr;
    return null;
  }

  function upsert(r) {
    const old = find(r.key);
    const tr = rowOf(r);
    if (old) old.replaceWith(tr); else body.appendChild(tr);
  }

  function refreshEmpty() { empty.hidden = body.rows.length > 0; }

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
