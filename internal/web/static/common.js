// Shared by the buyer page and the control room: calls to the JSON API, the
// server's clock, formatting and storage that never throws. Plain script, no
// modules or build step; everything hangs off window.seckill.
"use strict";

(function () {
  const sk = {};

  // api calls the JSON API and never throws: a network failure is status 0.
  // The answer is {status, body, headers}; body is the parsed JSON or null.
  sk.api = async function (method, path, opts) {
    opts = opts || {};
    const headers = Object.assign({ Accept: "application/json" }, opts.headers || {});
    if (opts.token) headers.Authorization = "Bearer " + opts.token;
    const init = { method: method, headers: headers, cache: "no-store", credentials: "same-origin" };
    if (opts.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(opts.body);
    }
    if (opts.signal) init.signal = opts.signal;
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      return { status: 0, body: null, headers: new Headers(), error: e };
    }
    let body = null;
    const ct = resp.headers.get("Content-Type") || "";
    if (ct.indexOf("json") >= 0) {
      try { body = await resp.json(); } catch (e) { body = null; }
    }
    return { status: resp.status, body: body, headers: resp.headers };
  };

  // errorCode is the API's error code of an answer, or "".
  sk.errorCode = function (r) {
    return (r && r.body && r.body.error && r.body.error.code) || "";
  };
  sk.errorMessage = function (r) {
    return (r && r.body && r.body.error && r.body.error.message) || "";
  };

  // retryAfter is the answer's Retry-After in seconds (at least 1).
  sk.retryAfter = function (r) {
    const v = parseInt((r && r.headers && r.headers.get("Retry-After")) || "", 10);
    return isFinite(v) && v > 0 ? v : 1;
  };

  // The server's clock. Sale windows are decided by the server, and a
  // device's clock can be minutes off, so countdowns run on the server's
  // time: one offset measured against /api/v1/time (the sample with the
  // shortest round trip wins), advanced by the monotonic performance.now().
  const clock = { base: Date.now(), perf: performance.now(), rtt: Infinity, synced: false };

  sk.serverNow = function () {
    return clock.base + (performance.now() - clock.perf);
  };
  sk.clockSynced = function () { return clock.synced; };

  async function sampleClock() {
    const t0 = performance.now();
    const r = await sk.api("GET", "/api/v1/time");
    const t1 = performance.now();
    if (r.status !== 200 || !r.body || typeof r.body.unix_ms !== "number") return false;
    const rtt = t1 - t0;
    // A newer sample replaces an older one unless its round trip was much
    // worse: clocks drift, and the earliest sample ages.
    if (!clock.synced || rtt <= clock.rtt * 1.5 + 20) {
      clock.base = r.body.unix_ms + rtt / 2;
      clock.perf = t1;
      clock.rtt = rtt;
      clock.synced = true;
    }
    return true;
  }

  sk.syncClock = async function (samples) {
    for (let i = 0; i < (samples || 3); i++) {
      await sampleClock();
    }
    return clock.synced;
  };

  // Storage that survives a browser refusing it (private modes, quotas).
  function store(kind) {
    return {
      get: function (k) { try { return window[kind].getItem(k); } catch (e) { return null; } },
      set: function (k, v) { try { window[kind].setItem(k, v); } catch (e) { /* keep going */ } },
      del: function (k) { try { window[kind].removeItem(k); } catch (e) { /* keep going */ } },
    };
  }
  sk.session = store("sessionStorage");
  sk.local = store("localStorage");

  // randomKey is an Idempotency-Key: 128 random bits in hex. getRandomValues
  // works on plain http too, unlike randomUUID.
  sk.randomKey = function () {
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return x.toString(16).padStart(2, "0"); }).join("");
  };

  sk.formatPrice = function (cents, currency) {
    const v = cents / 100;
    if (currency) {
      try {
        return new Intl.NumberFormat(undefined, { style: "currency", currency: currency }).format(v);
      } catch (e) { /* unknown code: plain number */ }
    }
    return v.toFixed(2);
  };

  // formatCountdown shows ms as "2 d 03:04:05", "03:04:05" or "04:05".
  sk.formatCountdown = function (ms) {
    let s = Math.max(0, Math.ceil(ms / 1000));
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    const two = function (n) { return String(n).padStart(2, "0"); };
    let out = (h > 0 || d > 0 ? two(h) + ":" : "") + two(m) + ":" + two(s);
    if (d > 0) out = d + " d " + out;
    return out;
  };

  // spokenDuration is ms in words, for screen readers and hints.
  sk.spokenDuration = function (ms) {
    let s = Math.max(0, Math.round(ms / 1000));
    const parts = [];
    const units = [["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];
    for (const [name, size] of units) {
      const n = Math.floor(s / size);
      s -= n * size;
      if (n > 0) parts.push(n + " " + name + (n === 1 ? "" : "s"));
      if (parts.length === 2) break;
    }
    return parts.length ? parts.join(" ") : "0 seconds";
  };

  sk.formatTime = function (ms) {
    return new Date(ms).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  };
  sk.formatDateTime = function (ms) {
    return new Date(ms).toLocaleString(undefined, {
      year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
    });
  };

  sk.sleep = function (ms) { return new Promise(function (r) { setTimeout(r, ms); }); };

  // el returns the element with id, or throws: a missing id is a bug.
  sk.el = function (id) {
    const e = document.getElementById(id);
    if (!e) throw new Error("no element #" + id);
    return e;
  };

  window.seckill = sk;
})();
