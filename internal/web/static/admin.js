// The control room: create and preheat sales, watch one live (server-sent
// events), and restore failed orders. Every admin call sends the admin token
// as a bearer token; the event stream, which cannot send headers, opens with
// a short-lived ticket instead, so the token never appears in a URL.
"use strict";

(function () {
  const sk = window.seckill;
  const $ = sk.el;
  const enc = encodeURIComponent;
  const currency = document.body.dataset.currency || "";

  const TOKEN_KEY = "seckill.adminToken";
  const SALES_KEY = "seckill.adminSales";
  const CURRENT_KEY = "seckill.adminCurrent";
  const KEEP_MS = 5 * 60 * 1000; // what the server's history holds
  let windowMs = 60 * 1000; // what the charts show
  const STALE_MS = 5000; // no sample for this long: reconnect

  const COLORS = {
    reserved: "#1a7f37", replayed: "#4ac26b", sold_out: "#6e7781", limit_exceeded: "#bf8700",
    rate_limited: "#8250df", overloaded: "#cf222e", unavailable: "#a40e26", not_started: "#0969da",
    ended: "#57606a", unauthorized: "#bc4c00", invalid_request: "#953800", error: "#82071e",
  };
  const OTHER_COLOR = "#8c959f";

  let token = sk.session.get(TOKEN_KEY);
  // The sale on screen: its row, its samples, its event source.
  let cur = null;

  // --- admin calls ----------------------------------------------------------

  async function admin(method, path, body) {
    const r = await sk.api(method, path, { token: token, body: body });
    if (r.status === 401) signOut("The admin token was refused. Sign in again.");
    return r;
  }

  function describe(r, fallback) {
    if (r.status === 0) return "Could not reach the server.";
    return sk.errorMessage(r) || fallback + " (" + r.status + ")";
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
    sk.session.set(TOKEN_KEY, t);
    start();
  });

  $("admin-signout").addEventListener("click", function () { signOut(""); });

  // --- the list of sales ---------------------------------------------------------

  // No API lists sales, so the control room remembers the ones it created
  // or opened (ids and names only: nothing secret).
  function knownSales() {
    try { return JSON.parse(sk.local.get(SALES_KEY) || "[]"); } catch (e) { return []; }
  }
  function remember(sale) {
    const list = knownSales().filter(function (s) { return s.id !== sale.id; });
    list.unshift({ id: sale.id, name: sale.name });
    sk.local.set(SALES_KEY, JSON.stringify(list.slice(0, 30)));
    renderList();
  }
  function renderList() {
    const ul = $("sale-list");
    ul.textContent = "";
    for (const s of knownSales()) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.className = "sale-item";
      b.dataset.saleId = s.id;
      const name = document.createElement("span");
      name.textContent = s.name;
      const id = document.createElement("span");
      id.className = "muted small mono";
      id.textContent = s.id;
      b.append(name, id);
      if (cur && cur.sale.id === s.id) b.setAttribute("aria-current", "true");
      b.addEventListener("click", function () { open(s.id); });
      li.append(b);
      ul.append(li);
    }
  }

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
    const id = $("c-id").value.trim();
    if (id) body.id = id;
    msg.textContent = "Creating…";
    const r = await admin("POST", "/admin/v1/sales", body);
    if (r.status === 201 && r.body) {
      msg.textContent = "Created " + r.body.id + ".";
      $("c-id").value = "";
      remember(r.body);
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
    remember(r.body);
    disconnect();
    cur = { sale: r.body, points: [], es: null, failed: -1, retry: 0, lastAt: 0, timer: null };
    sk.session.set(CURRENT_KEY, id);
    renderList();
    renderSale();
    $("empty").hidden = true;
    $("sale-view").hidden = false;
    $("action-msg").textContent = "";
    resetTiles();
    drawAll();
    connect();
    loadFailed();
  }

  function renderSale() {
    const s = cur.sale;
    $("sale-title").textContent = s.name;
    $("sale-meta").textContent = s.id + " · " + sk.formatPrice(s.price_cents, currency) + " · " + s.stock +
      " units, limit " + s.per_user_limit + " · " + sk.formatDateTime(Date.parse(s.start_at)) + " to " +
      sk.formatDateTime(Date.parse(s.end_at));
    $("buyer-link").href = "/sales/" + enc(s.id);
  }

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

  async function loadFailed() {
    if (!cur) return;
    const saleID = cur.sale.id;
    const r = await admin("GET", "/admin/v1/failed-orders?limit=1000");
    if (!cur || cur.sale.id !== saleID || r.status !== 200 || !r.body) return;
    const rows = (r.body.failed_orders || []).filter(function (f) { return f.sale_id === saleID; });
    const body = $("failed-body");
    body.textContent = "";
    $("failed-empty").hidden = rows.length > 0;
    $("failed-table").hidden = rows.length === 0;
    rows.forEach(function (f, i) {
      const tr = document.createElement("tr");
      const cells = [f.reservation_id, f.user_id, String(f.qty), f.reason, sk.formatDateTime(Date.parse(f.created_at))];
      cells.forEach(function (text, j) {
        const td = document.createElement("td");
        td.textContent = text;
        if (j === 0) td.className = "mono";
        tr.append(td);
      });
      const td = document.createElement("td");
      const form = document.createElement("form");
      form.className = "row restore";
      const label = document.createElement("label");
      label.className = "visually-hidden";
      label.htmlFor = "restore-reason-" + i;
      label.textContent = "Reason for restoring " + f.reservation_id;
      const input = document.createElement("input");
      input.id = "restore-reason-" + i;
      input.required = true;
      input.maxLength = 200;
      input.placeholder = "Reason";
      const btn = document.createElement("button");
      btn.type = "submit";
      btn.textContent = "Restore";
      form.append(label, input, btn);
      form.addEventListener("submit", function (ev) {
        ev.preventDefault();
        restore(f.reservation_id, input.value.trim(), btn);
      });
      td.append(form);
      tr.append(td);
      body.append(tr);
    });
  }

  async function restore(reservationID, reason, btn) {
    if (!reason) return;
    const msg = $("action-msg");
    btn.disabled = true;
    msg.textContent = "Restoring " + reservationID + "…";
    const r = await admin("POST", "/admin/v1/restores", { reservation_id: reservationID, reason: reason });
    btn.disabled = false;
    if ((r.status === 200 || r.status === 202) && r.body) {
      const words = {
        restored: "restored: its units are back on sale",
        already_restored: "was already restored; nothing changed",
        parked: "parked: it applies when the order lands",
      };
      msg.textContent = "Reservation " + reservationID + " " + (words[r.body.status] || r.body.status) + ".";
      loadFailed();
    } else if (r.status === 404 && sk.errorCode(r) === "not_found") {
      msg.textContent = "This server cannot restore yet (no restore endpoint).";
    } else if (r.status !== 401) {
      msg.textContent = describe(r, "Restore failed");
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
      c.sale = JSON.parse(ev.data);
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
    $("failed-empty").hidden = false;
    $("failed-table").hidden = true;
    $("failed-body").textContent = "";
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
    const probs = $("problems");
    probs.hidden = !(p.problems && p.problems.length);
    probs.textContent = p.problems && p.problems.length ? "Cannot read: " + p.problems.join(", ") + "." : "";
    if (p.failed_orders !== null && p.failed_orders !== cur.failed) {
      cur.failed = p.failed_orders;
      loadFailed();
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
    renderList();
    sk.syncClock(3).then(function () {
      $("c-start").value = localInputValue(sk.serverNow() + 2 * 60000);
    });
    const last = sk.session.get(CURRENT_KEY);
    if (last) open(last);
  }

  if (token) start();
  else signOut("");
})();
