// The control room: list, create, open and manage sales (edit before the
// start, add stock, end early), watch one live (server-sent events), and
// resolve failed orders (re-drive, refunded, restore), with the sale's
// audit log. Every admin call sends the admin token as a bearer token and
// the operator's name for the audit log; the event stream, which cannot
// send headers, opens with a short-lived ticket instead, so the token never
// appears in a URL.
"use strict";

(function () {
  const sk = window.seckill;
  const $ = sk.el;
  const enc = encodeURIComponent;
  const currency = document.body.dataset.currency || "";

  const TOKEN_KEY = "seckill.adminToken";
  const OPERATOR_KEY = "seckill.adminOperator";
  const CURRENT_KEY = "seckill.adminCurrent";
  const KEEP_MS = 5 * 60 * 1000; // what the server's history holds
  let windowMs = 60 * 1000; // what the charts show
  const STALE_MS = 5000; // no sample for this long: reconnect
  const VIEW_REFRESH_MS = 5000; // the open sale's state and phase
  // Sales per page of the list; /admin?page_size=N changes it.
  const PAGE = Math.min(200, Math.max(1, parseInt(new URLSearchParams(location.search).get("page_size") || "", 10) || 20));

  const COLORS = {
    reserved: "#1a7f37", replayed: "#4ac26b", sold_out: "#6e7781", limit_exceeded: "#bf8700",
    rate_limited: "#8250df", overloaded: "#cf222e", unavailable: "#a40e26", not_started: "#0969da",
    ended: "#57606a", unauthorized: "#bc4c00", invalid_request: "#953800", error: "#82071e",
  };
  const OTHER_COLOR = "#8c959f";

  let token = sk.session.get(TOKEN_KEY);
  let operator = sk.session.get(OPERATOR_KEY) || "";
  // The sale on screen: its admin view (row, state, phase, remaining), its
  // samples, its event source.
  let cur = null;

  // --- admin calls ----------------------------------------------------------

  async function admin(method, path, body) {
    const headers = operator ? { "X-Seckill-Operator": operator } : {};
    const r = await sk.api(method, path, { token: token, body: body, headers: headers });
    if (r.status === 401) signOut("The admin token was refused. Sign in again.");
    return r;
  }

  function describe(r, fallback) {
    if (r.status === 0) return "Could not reach the server.";
    return sk.errorMessage(r) || fallback + " (" + r.status + ")";
  }

  function priceOf(s) {
    return sk.formatPrice(s.price_cents, s.currency || currency);
  }

  // stateText is what the list and the header say of a sale: its state,
  // and once ended whether it is still draining or archived.
  function stateText(v) {
    const words = { scheduled: "scheduled", live: "live", sold_out: "sold out", ended: "ended" };
    let t = words[v.state] || v.state || "";
    if (v.state === "ended" && v.phase) t += " · " + v.phase;
    return t;
  }

  // --- sign-in ---------------------------------------------------------------

  function showSignedIn(yes) {
    $("admin-signin").hidden = yes;
    $("console").hidden = !yes;
    $("admin-signout").hidden = !yes;
  }

  function signOut(message) {
    token = null;
    sk.session.del(TOKEN_KEY);
    disconnect();
    cur = null;
    showSignedIn(false);
    const e = $("signin-error");
    e.hidden = !message;
    e.textContent = message || "";
    $("admin-operator").value = operator;
    $("admin-token").focus();
  }

  $("signin-form").addEventListener("submit", async function (ev) {
    ev.preventDefault();
    const t = $("admin-token").value.trim();
    if (!t) return;
    // Any admin route tells a good token from a bad one; this one is cheap.
    const r = await sk.api("GET", "/admin/v1/failed-orders?limit=1", { token: t });
    if (r.status === 401) {
      $("signin-error").hidden = false;
      $("signin-error").textContent = "That admin token was refused.";
      return;
    }
    if (r.status === 0) {
      $("signin-error").hidden = false;
      $("signin-error").textContent = "Could not reach the server.";
      return;
    }
    $("admin-token").value = "";
    $("signin-error").hidden = true;
    token = t;
    operator = $("admin-operator").value.trim();
    sk.session.set(TOKEN_KEY, t);
    sk.session.set(OPERATOR_KEY, operator);
    start();
  });

  $("admin-signout").addEventListener("click", function () { signOut(""); });

  // --- the list of sales ---------------------------------------------------------

  // The list comes from GET /admin/v1/sales, newest start first, a page at
  // a time: "More sales" follows the cursor the last page gave.
  const list = { state: "", items: [], next: "", seq: 0 };

  async function loadSales(more) {
    const seq = ++list.seq;
    const q = new URLSearchParams();
    if (list.state) q.set("state", list.state);
    q.set("limit", String(PAGE));
    if (more && list.next) q.set("after", list.next);
    $("sale-list").setAttribute("aria-busy", "true");
    const r = await admin("GET", "/admin/v1/sales?" + q.toString());
    if (seq !== list.seq) return; // a newer load (another filter) won
    $("sale-list").setAttribute("aria-busy", "false");
    const msg = $("sales-msg");
    if (r.status !== 200 || !r.body) {
      if (r.status !== 401) {
        msg.textContent = r.status === 405 || (r.status === 404 && sk.errorCode(r) === "not_found")
          ? "This server cannot list sales; open one by its id."
          : describe(r, "Could not list the sales");
      }
      return;
    }
    if (!more) list.items = [];
    list.items = list.items.concat(r.body.sales || []);
    list.next = r.body.next || "";
    msg.textContent = list.items.length === 0 ? (list.state ? "No " + list.state + " sales." : "No sales yet.") : "";
    renderList();
  }

  function renderList() {
    const ul = $("sale-list");
    ul.textContent = "";
    for (const v of list.items) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.className = "sale-item";
      b.dataset.saleId = v.id;
      const name = document.createElement("span");
      name.className = "sale-name";
      name.textContent = v.name;
      const state = document.createElement("span");
      state.className = "badge";
      state.dataset.state = v.phase || v.state;
      state.textContent = stateText(v);
      const facts = document.createElement("span");
      facts.className = "muted small";
      facts.textContent = num(v.remaining) + " of " + num(v.stock) + " left · " + priceOf(v);
      const id = document.createElement("span");
      id.className = "muted small mono";
      id.textContent = v.id;
      b.append(name, state, facts, id);
      if (cur && cur.sale.id === v.id) b.setAttribute("aria-current", "true");
      b.addEventListener("click", function () { open(v.id); });
      li.append(b);
      ul.append(li);
    }
    $("sales-more").hidden = !list.next;
  }

  $("sales-state").addEventListener("change", function () {
    list.state = $("sales-state").value;
    list.next = "";
    loadSales(false);
  });
  $("sales-refresh").addEventListener("click", function () { loadSales(false); });
  $("sales-more").addEventListener("click", function () { loadSales(true); });

  // --- create and open -------------------------------------------------------------

  function localInputValue(ms) {
    const t = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
    return t.toISOString().slice(0, 19);
  }

  $("create-form").addEventListener("submit", async function (ev) {
    ev.preventDefault();
    const msg = $("create-msg");
    const start = new Date($("c-start").value);
    if (isNaN(start.getTime())) {
      msg.textContent = "Pick a start time.";
      return;
    }
    const minutes = Number($("c-duration").value);
    const body = {
      name: $("c-name").value.trim(),
      price_cents: Math.round(Number($("c-price").value) * 100),
      stock: Number($("c-stock").value),
      per_user_limit: Number($("c-limit").value),
      start_at: start.toISOString(),
      end_at: new Date(start.getTime() + minutes * 60000).toISOString(),
    };
    const code = $("c-currency").value.trim().toUpperCase();
    if (code) body.currency = code;
    const id = $("c-id").value.trim();
    if (id) body.id = id;
    msg.textContent = "Creating…";
    const r = await admin("POST", "/admin/v1/sales", body);
    if (r.status === 201 && r.body) {
      msg.textContent = "Created " + r.body.id + ".";
      $("c-id").value = "";
      loadSales(false);
      open(r.body.id);
    } else if (r.status !== 401) {
      msg.textContent = describe(r, "The sale was not created");
    }
  });

  $("open-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    open($("open-id").value.trim());
  });

  async function open(id) {
    const msg = $("open-msg");
    const r = await admin("GET", "/admin/v1/sales/" + enc(id));
    if (r.status !== 200 || !r.body) {
      if (r.status !== 401) msg.textContent = r.status === 404 ? "No sale " + id + "." : describe(r, "Could not open " + id);
      return;
    }
    msg.textContent = "";
    $("open-id").value = "";
    disconnect();
    cur = { sale: r.body, points: [], es: null, failed: -1, retry: 0, lastAt: 0, timer: null, armed: null, refused: {} };
    resetFailed();
    sk.session.set(CURRENT_KEY, id);
    renderList();
    renderSale();
    fillEdit();
    $("empty").hidden = true;
    $("sale-view").hidden = false;
    $("action-msg").textContent = "";
    $("manage-msg").textContent = "";
    $("failed-msg").textContent = "";
    resetTiles();
    drawAll();
    connect();
    loadFailed();
    loadAudit();
  }

  // refreshView reads the open sale's admin view again: its state and
  // phase move on by themselves (start, end, archive), and the row changes
  // with every action.
  async function refreshView() {
    if (!cur) return;
    const c = cur;
    const r = await admin("GET", "/admin/v1/sales/" + enc(c.sale.id));
    if (cur !== c || r.status !== 200 || !r.body) return;
    const wasScheduled = c.sale.state === "scheduled";
    c.sale = r.body;
    renderSale();
    if (wasScheduled !== (c.sale.state === "scheduled")) fillEdit();
    for (const v of list.items) {
      if (v.id === c.sale.id) Object.assign(v, r.body);
    }
    renderList();
  }
  setInterval(refreshView, VIEW_REFRESH_MS);

  function renderSale() {
    const s = cur.sale;
    $("sale-title").textContent = s.name;
    const phase = $("sale-phase");
    phase.textContent = stateText(s) + (s.live_unavailable ? " (stock store unreadable)" : "");
    phase.dataset.state = s.phase || s.state || "";
    $("sale-price").textContent = priceOf(s);
    $("sale-meta").textContent = s.id + " · " + num(s.remaining) + " of " + num(s.stock) + " left · limit " +
      s.per_user_limit + " · " + sk.formatDateTime(Date.parse(s.start_at)) + " to " + sk.formatDateTime(Date.parse(s.end_at));
    $("buyer-link").href = "/sales/" + enc(s.id);
    renderManage();
  }

  // --- managing the sale -------------------------------------------------------

  function renderManage() {
    const s = cur.sale;
    const scheduled = s.state === "scheduled";
    const ended = s.state === "ended";
    $("edit-form").hidden = !scheduled;
    $("stock-form").hidden = ended;
    $("end-sale").hidden = ended;
    $("manage-note").textContent = scheduled ? "Not started: every field can still change."
      : ended ? "This sale has ended" + (s.phase === "archived" ? " and is archived: only the database remembers it."
        : s.phase === "draining" ? "; orders, payments and restores are still settling." : ".")
        : "Live: it can get more stock or end now; the rest is fixed.";
    if (!cur.armed) $("end-sale").textContent = "End the sale now";
  }

  function fillEdit() {
    const s = cur.sale;
    $("e-name").value = s.name;
    $("e-price").value = (s.price_cents / 100).toFixed(2);
    $("e-currency").value = s.currency || currency;
    $("e-stock").value = String(s.stock);
    $("e-limit").value = String(s.per_user_limit);
    $("e-start").value = localInputValue(Date.parse(s.start_at));
    $("e-end").value = localInputValue(Date.parse(s.end_at));
  }

  async function afterChange(body) {
    if (body && body.id === cur.sale.id) Object.assign(cur.sale, body);
    await refreshView();
    fillEdit();
    loadAudit();
    loadSales(false);
  }

  $("edit-form").addEventListener("submit", async function (ev) {
    ev.preventDefault();
    if (!cur) return;
    const msg = $("manage-msg");
    const start = new Date($("e-start").value);
    const end = new Date($("e-end").value);
    if (isNaN(start.getTime()) || isNaN(end.getTime())) {
      msg.textContent = "Pick a start and an end.";
      return;
    }
    const body = {
      version: cur.sale.version,
      name: $("e-name").value.trim(),
      price_cents: Math.round(Number($("e-price").value) * 100),
      currency: $("e-currency").value.trim().toUpperCase(),
      stock: Number($("e-stock").value),
      per_user_limit: Number($("e-limit").value),
      start_at: start.toISOString(),
      end_at: end.toISOString(),
    };
    msg.textContent = "Saving…";
    const r = await admin("PATCH", "/admin/v1/sales/" + enc(cur.sale.id), body);
    if (r.status === 200 && r.body) {
      msg.textContent = "Saved.";
      await afterChange(r.body);
    } else if (r.status === 409 && sk.errorCode(r) === "conflict") {
      msg.textContent = "Someone changed this sale meanwhile: its current values are shown; save again to apply yours.";
      await afterChange(null);
    } else if (r.status !== 401) {
      msg.textContent = describe(r, "The sale was not changed");
    }
  });

  $("stock-form").addEventListener("submit", async function (ev) {
    ev.preventDefault();
    if (!cur) return;
    const msg = $("manage-msg");
    const n = Number($("add-stock").value);
    if (!(n >= 1)) return;
    msg.textContent = "Adding " + n + "…";
    const r = await admin("POST", "/admin/v1/sales/" + enc(cur.sale.id) + "/stock", { add: n });
    if (r.status === 200 && r.body) {
      msg.textContent = "Added " + n + " units: the sale has " + r.body.stock + " in all.";
      $("add-stock").value = "";
      await afterChange(r.body);
    } else if (r.status !== 401) {
      msg.textContent = describe(r, "No stock was added");
    }
  });

  // Ending takes two clicks: the first arms the button for a few seconds.
  $("end-sale").addEventListener("click", async function () {
    if (!cur) return;
    const btn = $("end-sale");
    const msg = $("manage-msg");
    if (!cur.armed) {
      btn.textContent = "Click again to end " + cur.sale.name + " now";
      const c = cur;
      c.armed = setTimeout(function () { c.armed = null; if (cur === c) renderManage(); }, 5000);
      return;
    }
    clearTimeout(cur.armed);
    cur.armed = null;
    msg.textContent = "Ending…";
    const r = await admin("POST", "/admin/v1/sales/" + enc(cur.sale.id) + "/end");
    if (r.status === 200 && r.body) {
      msg.textContent = r.body.changed ? "Ended: new claims are refused on every node." : "It had already ended.";
      await afterChange(r.body.sale);
    } else if (r.status !== 401) {
      msg.textContent = describe(r, "The sale was not ended");
      renderManage();
    }
  });

  // --- actions ----------------------------------------------------------------

  $("preheat").addEventListener("click", async function () {
    if (!cur) return;
    const msg = $("action-msg");
    msg.textContent = "Preheating…";
    const r = await admin("POST", "/admin/v1/sales/" + enc(cur.sale.id) + "/preheat");
    if (r.status === 200 && r.body) {
      msg.textContent = r.body.created ? "Preheated: the stock is loaded." : "Already preheated: nothing was reset.";
    } else if (r.status !== 401) {
      msg.textContent = describe(r, "Preheat failed");
    }
  });

  $("reconcile").addEventListener("click", async function () {
    if (!cur) return;
    const msg = $("action-msg");
    msg.textContent = "Reconciling…";
    const r = await admin("GET", "/admin/v1/sales/" + enc(cur.sale.id) + "/reconciliation");
    if (r.status === 200 && r.body) {
      const b = r.body;
      const state = b.oversold > 0 ? "OVERSOLD by " + b.oversold : b.balanced ? "balanced" : "not balanced";
      msg.textContent = "Reconciliation: " + state + (b.undersold ? ", undersold by " + b.undersold : "") + ".";
    } else if (r.status === 404 && sk.errorCode(r) === "not_found") {
      msg.textContent = "This server has no reconciliation endpoint yet.";
    } else if (r.status !== 401) {
      msg.textContent = describe(r, "Reconciliation failed");
    }
  });

  // --- failed orders ---------------------------------------------------------------

  // The sidebar counts each sale's open failed orders from
  // GET /admin/v1/failed-orders/counts. The open sale's table reads only
  // that sale's failed orders (open, resolved or all), newest first, a
  // page at a time: "More failed orders" follows the cursor the last page
  // gave. seq drops an answer a newer load has overtaken.
  const FAILED_PAGE = 100;
  const MAX_FAILED_PAGE = 1000; // the server's largest page
  // adding is the rows a "More" in flight asks for: a refresh that starts
  // meanwhile supersedes it (seq), so it reads those rows too.
  const failed = { state: "all", rows: [], next: "", seq: 0, adding: 0 };

  function resetFailed() {
    failed.rows = [];
    failed.next = "";
    failed.adding = 0;
    failed.seq++;
  }

  // loadFailed refreshes the sidebar's counts and the open sale's table.
  function loadFailed() {
    if (!token) return;
    loadOpenCounts();
    if (cur) loadFailedRows(false);
  }

  async function loadOpenCounts() {
    const r = await admin("GET", "/admin/v1/failed-orders/counts");
    if (r.status !== 200 || !r.body) return;
    renderOpenFailed(r.body.counts || []);
  }

  // loadFailedRows reads the open sale's failed orders: the next page
  // (more), or from the newest again, as many as the table showed and a
  // "More" in flight adds (up to the largest page), so that a refresh keeps
  // what "More" added, also when it lands while "More" is on its way.
  async function loadFailedRows(more) {
    if (!cur || (more && !failed.next)) return;
    const saleID = cur.sale.id;
    const seq = ++failed.seq;
    const q = new URLSearchParams();
    q.set("sale_id", saleID);
    q.set("state", failed.state);
    if (more) {
      q.set("limit", String(FAILED_PAGE));
      q.set("before", failed.next);
      failed.adding = FAILED_PAGE;
    } else {
      q.set("limit", String(Math.min(MAX_FAILED_PAGE, Math.max(FAILED_PAGE, failed.rows.length + failed.adding))));
    }
    const r = await admin("GET", "/admin/v1/failed-orders?" + q.toString());
    if (seq !== failed.seq || !cur || cur.sale.id !== saleID) return;
    failed.adding = 0;
    if (r.status !== 200 || !r.body) {
      if (r.status !== 401) $("failed-msg").textContent = describe(r, "Could not read the failed orders");
      return;
    }
    // A server older than the filters ignores sale_id and lists every
    // sale's: keep this sale's.
    const page = (r.body.failed_orders || []).filter(function (f) { return f.sale_id === saleID; });
    failed.rows = more ? failed.rows.concat(page) : page;
    failed.next = r.body.next || "";
    renderFailed();
  }

  function renderFailed() {
    const rows = failed.rows;
    const body = $("failed-body");
    body.textContent = "";
    $("failed-empty").hidden = rows.length > 0;
    $("failed-table").hidden = rows.length === 0;
    $("failed-more").hidden = !failed.next;
    rows.forEach(function (f, i) {
      const tr = document.createElement("tr");
      tr.dataset.reservationId = f.reservation_id;
      tr.dataset.resolution = f.resolution ? f.resolution.action : "open";
      const cells = [f.reservation_id, f.user_id, String(f.qty), f.reason, sk.formatDateTime(Date.parse(f.created_at))];
      cells.forEach(function (text, j) {
        const td = document.createElement("td");
        td.textContent = text;
        if (j === 0) td.className = "mono";
        tr.append(td);
      });
      const status = document.createElement("td");
      status.className = "failed-status";
      status.textContent = resolutionText(f.resolution) +
        (!f.resolution && cur.refused[f.reservation_id] ? " · " + cur.refused[f.reservation_id] : "");
      tr.append(status);
      const td = document.createElement("td");
      td.append(resolveForm(f, i));
      tr.append(td);
      body.append(tr);
    });
  }

  $("failed-state").addEventListener("change", function () {
    failed.state = $("failed-state").value;
    resetFailed();
    loadFailedRows(false);
  });
  $("failed-more").addEventListener("click", function () { loadFailedRows(true); });

  // renderOpenFailed lists the sales with open failed orders, the one with
  // the newest failed order first (the order the counts come in).
  function renderOpenFailed(counts) {
    const waiting = counts.filter(function (c) { return c.open > 0; });
    const ul = $("open-failed");
    ul.textContent = "";
    $("open-failed-none").hidden = waiting.length > 0;
    for (const c of waiting) {
      const id = c.sale_id;
      const known = list.items.find(function (v) { return v.id === id; });
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.className = "sale-item";
      b.dataset.saleId = id;
      const name = document.createElement("span");
      name.className = "sale-name";
      name.textContent = known ? known.name : id || "(no sale)";
      const n = document.createElement("span");
      n.className = "badge bad";
      n.textContent = c.open + " open";
      b.append(name, n);
      if (id) b.addEventListener("click", function () { open(id); });
      else b.disabled = true; // dead letters that name no sale
      li.append(b);
      ul.append(li);
    }
  }
  setInterval(loadFailed, 15000);

  function resolutionText(res) {
    if (!res) return "Open";
    const who = " by " + res.actor + ", " + sk.formatDateTime(Date.parse(res.resolved_at));
    const note = res.note ? " · “" + res.note + "”" : "";
    return res.action === "redrive" ? "Re-driven into order " + (res.order_id || "") + who + note
      : "Refunded" + who + note;
  }

  // resolveForm is the row's actions: one note, three buttons. A resolved
  // row keeps only Restore (its units may still be held in the sale).
  function resolveForm(f, i) {
    const form = document.createElement("form");
    form.className = "row resolve";
    const label = document.createElement("label");
    label.className = "visually-hidden";
    label.htmlFor = "resolve-note-" + i;
    label.textContent = "Note on " + f.reservation_id;
    const input = document.createElement("input");
    input.id = "resolve-note-" + i;
    input.className = "resolve-note";
    input.maxLength = 1000;
    input.placeholder = f.resolution ? "Reason" : "Note (required to refund or restore)";
    form.append(label, input);
    const buttons = [];
    function button(text, action) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = text;
      b.dataset.action = action;
      b.addEventListener("click", function () {
        const note = input.value.trim();
        if (action !== "redrive" && !note) {
          $("failed-msg").textContent = "Write a note first: who refunded, how, or why the units go back.";
          input.focus();
          return;
        }
        buttons.forEach(function (x) { x.disabled = true; });
        const done = function () { buttons.forEach(function (x) { x.disabled = false; }); };
        (action === "restore" ? restore(f.reservation_id, note) : resolve(f.reservation_id, action, note)).then(done, done);
      });
      buttons.push(b);
      form.append(b);
    }
    if (!f.resolution) {
      button("Re-drive", "redrive");
      button("Refunded", "refunded");
    }
    button("Restore units", "restore");
    form.addEventListener("submit", function (ev) { ev.preventDefault(); });
    return form;
  }

  async function resolve(reservationID, action, note) {
    const msg = $("failed-msg");
    msg.textContent = (action === "redrive" ? "Re-driving " : "Recording the refund of ") + reservationID + "…";
    const r = await admin("POST", "/admin/v1/failed-orders/" + enc(reservationID) + "/resolve", { action: action, note: note });
    if (r.status === 200 && r.body) {
      const res = r.body.resolution || {};
      msg.textContent = reservationID + ": " + (action === "redrive"
        ? (r.body.changed ? "re-driven into order " + (res.order_id || "") + "." : "was already re-driven; nothing changed.")
        : (r.body.changed ? "closed as refunded." : "was already closed as refunded; nothing changed."));
    } else if (r.status === 409) {
      // The reason stays on the row until it is resolved.
      const why = sk.errorMessage(r) || "The server refused (409).";
      if (cur) cur.refused[reservationID] = why;
      msg.textContent = reservationID + ": " + why;
    } else if (r.status !== 401) {
      msg.textContent = describe(r, "The failed order was not resolved");
    }
    loadFailed();
    loadAudit();
    refreshView();
  }

  async function restore(reservationID, reason) {
    const msg = $("failed-msg");
    msg.textContent = "Restoring " + reservationID + "…";
    const r = await admin("POST", "/admin/v1/restores", { reservation_id: reservationID, reason: reason });
    if ((r.status === 200 || r.status === 202) && r.body) {
      const words = {
        restored: "restored: its units are back on sale",
        already_restored: "was already restored; nothing changed",
        parked: "parked: it applies when the order lands",
      };
      msg.textContent = "Reservation " + reservationID + " " + (words[r.body.status] || r.body.status) + ".";
      loadFailed();
      refreshView();
    } else if (r.status === 404 && sk.errorCode(r) === "not_found") {
      msg.textContent = "This server cannot restore yet (no restore endpoint).";
    } else if (r.status !== 401) {
      msg.textContent = describe(r, "Restore failed");
    }
  }

  // --- audit log -------------------------------------------------------------------

  async function loadAudit() {
    if (!cur) return;
    const saleID = cur.sale.id;
    const r = await admin("GET", "/admin/v1/sales/" + enc(saleID) + "/audit?limit=50");
    if (!cur || cur.sale.id !== saleID || r.status !== 200 || !r.body) return;
    const rows = r.body.audit || [];
    const body = $("audit-body");
    body.textContent = "";
    $("audit-empty").hidden = rows.length > 0;
    $("audit-table").hidden = rows.length === 0;
    for (const e of rows) {
      const tr = document.createElement("tr");
      tr.dataset.action = e.action;
      const cells = [sk.formatDateTime(Date.parse(e.at)), e.actor, e.action, e.subject || "", e.detail || ""];
      cells.forEach(function (text, j) {
        const td = document.createElement("td");
        td.textContent = text;
        if (j >= 3) td.className = "mono small";
        tr.append(td);
      });
      body.append(tr);
    }
  }

  // --- the live feed ---------------------------------------------------------------

  function disconnect() {
    if (!cur) return;
    if (cur.es) cur.es.close();
    cur.es = null;
    clearTimeout(cur.timer);
  }

  async function connect() {
    if (!cur || !token) return;
    const c = cur;
    disconnect();
    setConn("Connecting…", "wait");
    const r = await admin("POST", "/admin/v1/sse-ticket", { sale_id: c.sale.id });
    if (cur !== c) return;
    if (r.status !== 200 || !r.body) {
      if (r.status !== 401) reconnectLater(c);
      return;
    }
    const es = new EventSource(r.body.events_url);
    c.es = es;
    es.addEventListener("sale", function (ev) {
      // The row alone: state, phase and remaining stay the admin view's.
      Object.assign(c.sale, JSON.parse(ev.data));
      renderSale();
    });
    es.addEventListener("history", function (ev) {
      c.points = JSON.parse(ev.data).points || [];
      c.retry = 0;
      arrived(c);
    });
    es.addEventListener("sample", function (ev) {
      const p = JSON.parse(ev.data);
      const last = c.points[c.points.length - 1];
      if (!last || p.seq > last.seq) c.points.push(p);
      arrived(c);
    });
    es.onerror = function () {
      // A stream the server refused (its ticket expired) is closed for
      // good: fetch a new ticket. A dropped one the browser retries itself.
      if (es.readyState === EventSource.CLOSED && cur === c && c.es === es) reconnectLater(c);
      else setConn("Reconnecting…", "wait");
    };
  }

  function reconnectLater(c) {
    c.retry = Math.min(c.retry + 1, 5);
    setConn("Disconnected, retrying…", "down");
    clearTimeout(c.timer);
    c.timer = setTimeout(function () { if (cur === c) connect(); }, 1000 * c.retry);
  }

  function arrived(c) {
    c.lastAt = performance.now();
    const cut = sk.serverNow() - KEEP_MS;
    while (c.points.length > 1 && c.points[0].t < cut) c.points.shift();
    const p = c.points[c.points.length - 1];
    if (p) updateTiles(p);
    drawAll();
  }

  function setConn(text, kind) {
    const e = $("conn");
    e.textContent = text;
    e.dataset.state = kind;
  }

  // The connection line shows the age of the newest sample, by the
  // server's clock; a silent stream is reopened.
  setInterval(function () {
    if (!cur || !cur.es) return;
    const p = cur.points[cur.points.length - 1];
    if (p && cur.lastAt) {
      const age = Math.max(0, (sk.serverNow() - p.t) / 1000);
      setConn("Live · updated " + age.toFixed(1) + " s ago", age < 3 ? "up" : "wait");
    }
    if (cur.lastAt && performance.now() - cur.lastAt > STALE_MS && cur.es.readyState !== EventSource.CONNECTING) {
      cur.lastAt = 0;
      connect();
    }
  }, 250);

  // --- tiles ----------------------------------------------------------------------

  function num(v) {
    return v === null || v === undefined ? "n/a" : Number(v).toLocaleString();
  }
  function rate(v) {
    return v === null || v === undefined ? "–" : v < 10 ? v.toFixed(1) : Math.round(v).toLocaleString();
  }

  function resetTiles() {
    for (const id of ["t-remaining", "t-rate", "t-refused", "t-outbox", "t-backlog", "t-orders", "t-failed", "t-parked", "t-recon"]) {
      $(id).textContent = "–";
    }
    $("t-total").textContent = "";
    $("t-bar").style.width = "0";
    $("adm-panel").hidden = true;
    $("failed-empty").hidden = false;
    $("failed-table").hidden = true;
    $("failed-body").textContent = "";
    $("audit-empty").hidden = false;
    $("audit-table").hidden = true;
    $("audit-body").textContent = "";
  }

  function updateTiles(p) {
    $("t-remaining").textContent = num(p.remaining);
    $("t-total").textContent = p.total === null ? "" : "of " + num(p.total) + (p.preheated ? "" : " (not preheated)");
    $("t-bar").style.width = p.total ? (100 * p.remaining) / p.total + "%" : "0";
    const rates = p.rates || null;
    let ok = null;
    let refused = null;
    if (rates) {
      ok = (rates.reserved || 0) + (rates.replayed || 0);
      refused = 0;
      for (const k in rates) if (k !== "reserved" && k !== "replayed") refused += rates[k];
    }
    $("t-rate").textContent = rate(ok);
    $("t-refused").textContent = rate(refused);
    $("rates-note").hidden = !p.rates_node_wide;
    $("t-outbox").textContent = num(p.outbox);
    $("t-backlog").textContent = num(p.broker_backlog);
    $("t-orders").textContent = num(p.orders_persisted);
    $("t-failed").textContent = num(p.failed_orders);
    $("t-failed").classList.toggle("bad", p.failed_orders > 0);
    $("t-parked").textContent = num(p.parked_restores);
    const rc = p.reconciliation;
    const recon = $("t-recon");
    recon.textContent = rc ? rc.state + (rc.oversold ? " (" + rc.oversold + " over)" : "") +
      (rc.undersold ? " (" + rc.undersold + " under)" : "") : "not checked";
    recon.classList.toggle("bad", Boolean(rc && rc.state === "oversold"));
    recon.classList.toggle("good", Boolean(rc && rc.state === "balanced"));
    updateAdmission(p.admission || null);
    const probs = $("problems");
    probs.hidden = !(p.problems && p.problems.length);
    probs.textContent = p.problems && p.problems.length ? "Cannot read: " + p.problems.join(", ") + "." : "";
    if (p.failed_orders !== null && p.failed_orders !== cur.failed) {
      cur.failed = p.failed_orders;
      loadFailed();
    }
  }

  // updateAdmission fills the lottery's or the queue's panel.
  function updateAdmission(a) {
    $("adm-panel").hidden = !a;
    if (!a) return;
    const lottery = a.mode === "lottery";
    $("adm-lottery").hidden = $("adm-proof").hidden = !lottery;
    $("adm-queue").hidden = lottery;
    $("cap-adm").textContent = lottery ? "Entrants" : "Queue length and admitted";
    if (lottery) {
      $("a-entrants").textContent = num(a.entrants);
      const close = a.entries_close_at ? Date.parse(a.entries_close_at) : NaN;
      $("a-draw").textContent = a.drawn ? "drawn at " + sk.formatTime(Date.parse(a.drawn_at))
        : sk.serverNow() < close ? "entries open, draw at " + sk.formatTime(close) : "drawing…";
      $("a-winners").textContent = a.drawn ? num(a.winners) : "–";
      $("a-promoted").textContent = a.drawn ? num(a.promoted) : "–";
      $("a-waiting").textContent = a.drawn ? num(a.waiting) : "–";
      $("a-commitment").textContent = a.commitment || "n/a";
      $("a-seed").textContent = a.drawn ? a.seed : "secret until the draw";
      $("a-winner-ids").textContent = a.drawn ? (a.winner_ids || []).join(" ") + (a.winners > (a.winner_ids || []).length ? " …" : "") || "none" : "–";
      $("a-next").textContent = a.drawn ? (a.next_waiting || []).join(" ") + (a.waiting > (a.next_waiting || []).length ? " …" : "") || "nobody" : "–";
      $("adm-note").textContent = "Anyone can check the draw: seckill draw verify --url URL --sale " + cur.sale.id + ".";
    } else {
      $("a-length").textContent = num(a.queue_length);
      $("a-admitted").textContent = num(a.admitted);
      $("a-rate").textContent = num(a.admit_per_second) + "/s" + (a.adaptive ? " (adaptive)" : "");
      $("a-tickets").textContent = num(a.tickets_issued) + (a.ticket_rate ? " (" + rate(a.ticket_rate) + "/s)" : "");
      $("adm-note").textContent = a.tickets_node_wide ? "Tickets issued are this node's, for all queue sales together (a ticket is issued on every poll of an admitted buyer)." : "";
    }
  }

  // --- charts (canvas, drawn by hand) ---------------------------------------------

  function drawAll() {
    if (!cur) return;
    const pts = cur.points;
    const now = sk.serverNow();
    const stockSeries = [{ name: "remaining", color: "#0969da", fill: true, values: pts.map(function (p) { return [p.t, p.remaining]; }) }];
    const total = pts.length ? pts[pts.length - 1].total : cur.sale.stock;
    drawChart($("chart-stock"), stockSeries, now, total || 1, true);
    const last = pts[pts.length - 1];
    const first = pts.find(function (p) { return p.t >= now - windowMs; });
    $("chart-stock").setAttribute("aria-label", last && last.remaining !== null
      ? "Remaining stock: " + last.remaining + " of " + last.total + " now" +
        (first && first !== last ? ", " + first.remaining + " at the left edge of the chart." : ".")
      : "Remaining stock: no samples yet.");

    const keys = {};
    for (const p of pts) for (const k in p.rates || {}) if (p.rates[k] > 0 || k === "reserved") keys[k] = true;
    const rateSeries = Object.keys(keys).sort().map(function (k) {
      return { name: k.replace(/_/g, " "), color: COLORS[k] || OTHER_COLOR, values: pts.map(function (p) { return [p.t, p.rates ? p.rates[k] || 0 : null]; }) };
    });
    drawChart($("chart-rates"), rateSeries, now, 0, false);
    const rateText = legend($("legend-rates"), rateSeries, function (s) {
      const v = s.values.length ? s.values[s.values.length - 1][1] : null;
      return rate(v) + "/s";
    });
    $("chart-rates").setAttribute("aria-label", "Reservation answers per second, latest: " + (rateText || "no samples yet") + ".");

    const lagSeries = [
      { name: "outbox", color: "#bc4c00", values: pts.map(function (p) { return [p.t, p.outbox]; }) },
      { name: "broker backlog", color: "#8250df", values: pts.map(function (p) { return [p.t, p.broker_backlog]; }) },
    ];
    drawChart($("chart-lag"), lagSeries, now, 0, false);
    if (last && last.admission) {
      const lot = last.admission.mode === "lottery";
      const admSeries = lot
        ? [{ name: "entrants", color: "#0969da", values: pts.map(function (p) { return [p.t, p.admission ? p.admission.entrants : null]; }) }]
        : [
          { name: "queue length", color: "#8250df", values: pts.map(function (p) { return [p.t, p.admission ? p.admission.queue_length : null]; }) },
          { name: "admitted", color: "#1a7f37", values: pts.map(function (p) { return [p.t, p.admission ? p.admission.admitted : null]; }) },
        ];
      drawChart($("chart-adm"), admSeries, now, 0, false);
      $("chart-adm").setAttribute("aria-label", lot
        ? "Entrants: " + num(last.admission.entrants) + " now."
        : "Queue length " + num(last.admission.queue_length) + ", admitted " + num(last.admission.admitted) + " now.");
    }
    const lagText = legend($("legend-lag"), lagSeries, function (s) {
      const v = s.values.length ? s.values[s.values.length - 1][1] : null;
      return num(v);
    });
    $("chart-lag").setAttribute("aria-label", "Outbox lag and broker backlog, latest: " + lagText + ".");
  }

  // legend lists the series with their latest values, and returns the
  // same as one line of text for the chart's accessible name.
  function legend(ul, series, valueOf) {
    ul.textContent = "";
    const parts = [];
    for (const s of series) {
      parts.push(s.name + " " + valueOf(s));
      const li = document.createElement("li");
      const sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.background = s.color;
      sw.setAttribute("aria-hidden", "true");
      li.append(sw, document.createTextNode(s.name + ": " + valueOf(s)));
      ul.append(li);
    }
    return parts.join(", ");
  }

  // niceMax rounds v up to four even steps of 1, 1.5, 2, 2.5, 3, 4, 5, 6,
  // 7.5 or 8 times a power of ten, never below one unit per step.
  function niceMax(v) {
    const step = Math.max(1, v / 4);
    const p = Math.pow(10, Math.floor(Math.log10(step)));
    for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 7.5, 8, 10]) if (m * p >= step - 1e-9) return 4 * m * p;
    return 40 * p;
  }

  // drawChart draws lines of [t, value] pairs over the chosen window; a
  // null value is a gap (n/a). The y axis goes to yMax when exact, else to
  // a round number above both yMax and the data.
  function drawChart(canvas, series, now, yMax, exact) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 300;
    const h = canvas.clientHeight || 180;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const pad = { l: 44, r: 8, t: 8, b: 20 };
    const pw = w - pad.l - pad.r;
    const ph = h - pad.t - pad.b;
    const t0 = now - windowMs;
    let max = yMax;
    if (!exact) {
      for (const s of series) for (const [t, v] of s.values) if (t >= t0 && v !== null && v > max) max = v;
      max = niceMax(max);
    }
    const x = function (t) { return pad.l + ((t - t0) / windowMs) * pw; };
    const y = function (v) { return pad.t + ph - (v / max) * ph; };

    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#57606a";
    g.strokeStyle = "#d0d7de";
    g.lineWidth = 1;
    g.textBaseline = "middle";
    g.textAlign = "right";
    for (let i = 0; i <= 4; i++) {
      const v = (max * i) / 4;
      const yy = Math.round(y(v)) + 0.5;
      g.beginPath();
      g.moveTo(pad.l, yy);
      g.lineTo(w - pad.r, yy);
      g.stroke();
      g.fillText(v >= 10000 ? Math.round(v / 100) / 10 + "k" : String(Math.round(v * 10) / 10), pad.l - 6, yy);
    }
    g.textBaseline = "top";
    const tick = windowMs <= 60000 ? 15000 : windowMs <= 120000 ? 30000 : 60000;
    for (let ago = windowMs; ago >= 0; ago -= tick) {
      const label = ago === 0 ? "now" : "−" + (tick < 60000 ? ago / 1000 + " s" : ago / 60000 + " min");
      g.textAlign = ago === windowMs ? "left" : ago === 0 ? "right" : "center";
      g.fillText(label, x(now - ago), h - pad.b + 5);
    }

    for (const s of series) {
      g.strokeStyle = s.color;
      g.lineWidth = 2;
      g.beginPath();
      let pen = false;
      let first = null;
      let lastX = null;
      for (const [t, v] of s.values) {
        if (v === null || v === undefined || t < t0) { pen = false; continue; }
        const px = x(t);
        const py = y(Math.min(v, max));
        if (pen) g.lineTo(px, py); else g.moveTo(px, py);
        if (first === null) first = px;
        lastX = px;
        pen = true;
      }
      g.stroke();
      if (s.fill && first !== null) {
        g.lineTo(lastX, y(0));
        g.lineTo(first, y(0));
        g.closePath();
        g.globalAlpha = 0.12;
        g.fillStyle = s.color;
        g.fill();
        g.globalAlpha = 1;
      }
    }
  }

  $("chart-window").addEventListener("change", function () {
    windowMs = Number($("chart-window").value) * 1000;
    drawAll();
  });
  window.addEventListener("resize", drawAll);
  setInterval(drawAll, 1000); // the time axis moves on between samples

  // --- start ------------------------------------------------------------------------

  function start() {
    showSignedIn(true);
    loadSales(false);
    loadFailed();
    sk.syncClock(3).then(function () {
      $("c-start").value = localInputValue(sk.serverNow() + 2 * 60000);
    });
    const last = sk.session.get(CURRENT_KEY);
    if (last) open(last);
  }

  if (token) start();
  else signOut("");
})();
