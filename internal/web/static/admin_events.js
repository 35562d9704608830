// The control room's order events: how far behind the shop's sinks are
// (events waiting, the age of the oldest), the dead letters, and a
// Redeliver button on each (GET /admin/v1/order-events, POST
// /admin/v1/order-events/{id}/redeliver). The card stays hidden on a
// server with no order events (those routes answer 404).
"use strict";

(function () {
  const sk = window.seckill;
  const $ = sk.el;
  const TOKEN_KEY = "seckill.adminToken";
  const OPERATOR_KEY = "seckill.adminOperator";
  const REFRESH_MS = 3000;
  const LIMIT = 50;
  let seq = 0;
  let shown = ""; // the events last drawn, so an unchanged list is not redrawn under the pointer

  function headers() {
    const op = sk.session.get(OPERATOR_KEY) || "";
    return op ? { "X-Seckill-Operator": op } : {};
  }

  function lagText(s) {
    if (!(s > 0)) return "none";
    if (s < 60) return Math.round(s) + " s";
    if (s < 3600) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }

  async function load() {
    const token = sk.session.get(TOKEN_KEY);
    if (!token || $("console").hidden) return;
    const my = ++seq;
    const state = $("events-state").value;
    const q = new URLSearchParams({ limit: String(LIMIT) });
    if (state) q.set("state", state);
    const r = await sk.api("GET", "/admin/v1/order-events?" + q.toString(), { token: token, headers: headers() });
    if (my !== seq) return; // a newer load won
    if (r.status === 404) { $("events-card").hidden = true; return; }
    $("events-card").hidden = false;
    if (r.status !== 200 || !r.body) {
      if (r.status !== 401) $("events-msg").textContent = sk.errorMessage(r) || "Could not read the order events (" + r.status + ").";
      return;
    }
    const b = r.body;
    $("ev-pending").textContent = String(b.pending);
    $("ev-lag").textContent = lagText(b.lag_seconds);
    $("ev-dead").textContent = String(b.dead);
    $("ev-dead").className = b.dead > 0 ? "bad" : "";
    render(b.events || []);
  }

  function render(events) {
    const key = JSON.stringify(events);
    if (key === shown) return;
    shown = key;
    const ul = $("events-list");
    ul.textContent = "";
    $("events-empty").hidden = events.length > 0;
    for (const d of events) {
      const e = d.event;
      const li = document.createElement("li");
      li.className = "event-item";
      li.dataset.eventId = e.id;
      const head = document.createElement("p");
      const type = document.createElement("strong");
      type.textContent = e.type;
      const order = document.createElement("span");
      order.className = "mono small";
      order.textContent = " " + e.order_id;
      head.append(type, order);
      const meta = document.createElement("p");
      meta.className = "muted small";
      let text = d.state + " · " + d.attempts + (d.attempts === 1 ? " attempt" : " attempts") +
        " · " + sk.formatDateTime(Date.parse(e.at));
      if (d.last_error) text += " · " + d.last_error;
      meta.textContent = text;
      li.append(head, meta);
      if (d.state === "dead") {
        const btn = document.createElement("button");
        btn.type = "button";
        btn.className = "redeliver";
        btn.textContent = "Redeliver";
        btn.setAttribute("aria-label", "Redeliver " + e.type + " of " + e.order_id);
        btn.addEventListener("click", function () { redeliver(e.id, btn); });
        li.append(btn);
      }
      ul.append(li);
    }
  }

  async function redeliver(id, btn) {
    btn.disabled = true;
    const token = sk.session.get(TOKEN_KEY);
    const r = await sk.api("POST", "/admin/v1/order-events/" + encodeURIComponent(id) + "/redeliver",
      { token: token, headers: headers() });
    $("events-msg").textContent = r.status === 200
      ? "Redelivering " + id + "."
      : (sk.errorMessage(r) || "Could not redeliver " + id + " (" + r.status + ").");
    if (r.status !== 200) btn.disabled = false;
    load();
  }

  $("events-state").addEventListener("change", function () { shown = ""; load(); });
  $("events-refresh").addEventListener("click", load);
  setInterval(load, REFRESH_MS);
  load();
})();
