// The control room's payments to look at: the payment events an operator
// must handle (GET /admin/v1/payments): orders paid after they were
// cancelled (refund_due: refund the buyer), payments whose amount or
// currency was not the order's (mismatch) and payments the order's state
// did not take (conflict). The card stays hidden on a server without the
// payment routes (404).
"use strict";

(function () {
  const sk = window.seckill;
  const $ = sk.el;
  const TOKEN_KEY = "seckill.adminToken";
  const REFRESH_MS = 5000;
  const LIMIT = 50;
  let seq = 0;
  let shown = "";

  const OUTCOMES = {
    refund_due: "Refund due",
    mismatch: "Wrong amount",
    conflict: "Conflict",
  };

  async function load() {
    const token = sk.session.get(TOKEN_KEY);
    if (!token || $("console").hidden) return;
    const my = ++seq;
    const q = new URLSearchParams({ limit: String(LIMIT) });
    const outcome = $("payments-outcome").value;
    if (outcome) q.set("outcome", outcome);
    const r = await sk.api("GET", "/admin/v1/payments?" + q.toString(), { token: token });
    if (my !== seq) return;
    if (r.status === 404) { $("payments-card").hidden = true; return; }
    $("payments-card").hidden = false;
    if (r.status !== 200 || !r.body) {
      if (r.status !== 401) $("payments-msg").textContent = sk.errorMessage(r) || "Could not read the payments (" + r.status + ").";
      return;
    }
    $("payments-msg").textContent = "";
    render(r.body.payments || []);
  }

  function render(payments) {
    const key = JSON.stringify(payments);
    if (key === shown) return;
    shown = key;
    const ul = $("payments-list");
    ul.textContent = "";
    $("payments-empty").hidden = payments.length > 0;
    for (const p of payments) {
      const li = document.createElement("li");
      li.className = "payment-item";
      li.dataset.orderId = p.order_id;
      li.dataset.outcome = p.outcome;
      const head = document.createElement("p");
      const badge = document.createElement("span");
      badge.className = "badge" + (p.outcome === "refund_due" || p.outcome === "mismatch" ? " bad" : "");
      badge.textContent = OUTCOMES[p.outcome] || p.outcome;
      const order = document.createElement("span");
      order.className = "mono small";
      order.textContent = " " + p.order_id + " ";
      const amount = document.createElement("strong");
      amount.textContent = sk.formatPrice(p.amount_cents, p.currency);
      head.append(badge, order, amount);
      const meta = document.createElement("p");
      meta.className = "muted small";
      meta.textContent = p.type + " " + p.id + " (" + p.source + ") · " + sk.formatDateTime(Date.parse(p.received_at)) +
        " · " + p.detail;
      li.append(head, meta);
      ul.append(li);
    }
  }

  $("payments-outcome").addEventListener("change", function () { shown = ""; load(); });
  $("payments-refresh").addEventListener("click", load);
  setInterval(load, REFRESH_MS);
  load();
})();
