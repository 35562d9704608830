// The buyer's page of one sale: countdown on the server's clock, live stock,
// sign-in, the buy button, and the wait for the order (design.md §5).
"use strict";

(function () {
  const sk = window.seckill;
  const $ = sk.el;
  const app = $("app");
  const d = app.dataset;
  const sale = {
    id: d.saleId,
    startAt: Date.parse(d.startAt),
    endAt: Date.parse(d.endAt),
    stock: Number(d.stock),
    limit: Number(d.limit),
    priceCents: Number(d.priceCents),
    currency: d.currency || "",
  };
  const demoLogin = d.demoLogin === "true";
  // buyerPay: the demo's local Pay button. Otherwise the shop confirms
  // the payment (its payment page is the order's pay_url) and the page
  // waits for it.
  const buyerPay = d.buyerPay === "true";
  // A lottery or queue sale: the buyer's standing comes from the server
  // (rendered, then the buyer feed), through the buyer's session cookie.
  const mode = d.mode || "first_come";
  const sessions = d.sessions === "true";
  const resultsAt = Date.parse(d.resultsAt || "") || 0;
  const AWAIT_PAYMENT_EVERY_MS = 5000;
  const enc = encodeURIComponent;

  const TOKEN_KEY = "seckill.buyerToken";
  const CLAIM_KEY = "seckill.claim." + sale.id;
  const POLL_EVERY_MS = 2000; // design.md §5: every 2 s …
  const POLL_FOR_MS = 30000; //  … for up to 30 s
  const STOCK_EVERY_MS = 2000;

  const state = {
    token: null,
    user: "",
    remaining: Number(d.remaining),
    busy: false, // a reservation request is in flight
    claim: null, // {id, view}: this buyer's reservation on this page
    polling: false,
    blocked: "", // why buying is off for this buyer: "limit", "ended", "gone"
    retryAt: 0, // server-clock ms before which a rate-limited buyer waits
    key: null, // Idempotency-Key of the attempt in progress
    wasLive: false,
    degraded: false, // the shop answers busy or from its last good copy; the page keeps retrying
    standing: null, // the buyer's standing in a lottery or queue sale (the server's)
    ticket: "", // queue: the admission ticket, from the standing; never in a URL
    ticketHeader: "Admission-Ticket",
  };

  const els = {
    phase: $("phase"), countdown: $("countdown"), whenNote: $("when-note"),
    bar: $("stock-bar"), fill: $("stock-fill"), remaining: $("remaining"),
    signin: $("signin"), account: $("account"), who: $("who"),
    buy: $("buy"), hint: $("buy-hint"), buyBox: $("buy-box"), status: $("status"), problem: $("problem"),
    order: $("order"), orderId: $("order-id"), orderQty: $("order-qty"), orderTotal: $("order-total"),
    orderStatus: $("order-status"), orderPayBy: $("order-payby"), orderPayByLabel: $("order-payby-label"),
    pay: $("pay"), payLink: $("pay-link"), countdownNote: $("countdown-note"), recheck: $("recheck"), price: $("price"), qty: document.getElementById("qty"),
  };

  // --- messages -----------------------------------------------------------

  function say(text) {
    els.problem.hidden = true;
    els.problem.textContent = "";
    els.status.textContent = text;
  }
  function problem(text) {
    els.status.textContent = "";
    els.problem.textContent = text;
    els.problem.hidden = false;
  }

  // --- sign-in ------------------------------------------------------------

  // subjectOf reads the user id a JWT names, for display only: the server
  // verifies the token on every call.
  function subjectOf(token) {
    try {
      let p = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      p += "===".slice((p.length + 3) % 4);
      const bytes = Uint8Array.from(atob(p), function (c) { return c.charCodeAt(0); });
      return String(JSON.parse(new TextDecoder().decode(bytes)).sub || "");
    } catch (e) {
      return "";
    }
  }

  function setToken(token) {
    state.token = token || null;
    state.user = token ? subjectOf(token) : "";
    if (token) sk.session.set(TOKEN_KEY, token);
    else sk.session.del(TOKEN_KEY);
    render();
    if (mode !== "first_come") syncSession();
    else if (token && !state.claim) recoverClaim();
  }

  // A shop hands a buyer over with #token=…, once: the fragment never
  // leaves the browser (no request, access log or Referer carries it).
  // Keep it for this tab and take it out of the address bar and history.
  // A ?token=… (which every proxy and access log on the way has seen) is
  // not used, only taken out of the address bar.
  //
  // With the shop's sign-in page configured (data-shop-signin), a token is
  // taken only with the state this tab sent there (startHandover): a link
  // somebody else made, with their own token, would otherwise sign the
  // buyer in as them, and the buyer would claim and pay for their order.
  // handoverRefused says such a token came and was not used.
  const shopSignIn = d.shopSignin || "";
  const HANDOVER_KEY = "seckill.handoverState";
  let handoverRefused = false;

  function takeTokenFromURL() {
    const u = new URL(location.href);
    const frag = new URLSearchParams(u.hash.slice(1));
    const t = frag.get("token");
    const got = frag.get("state");
    const inQuery = u.searchParams.has("token");
    if (t === null && !inQuery) return;
    u.searchParams.delete("token");
    frag.delete("token");
    if (t !== null) frag.delete("state");
    const rest = frag.toString();
    history.replaceState(null, "", u.pathname + u.search + (rest ? "#" + rest : ""));
    if (t === null || !t.trim()) return;
    if (shopSignIn) {
      const sent = sk.session.get(HANDOVER_KEY);
      sk.session.del(HANDOVER_KEY); // one use
      if (!sent || got !== sent) {
        handoverRefused = true;
        return;
      }
    }
    sk.session.set(TOKEN_KEY, t.trim());
  }

  // startHandover sends the buyer to the shop's sign-in page with this
  // page to come back to and a fresh state, kept in this tab only.
  function startHandover(ev) {
    ev.preventDefault();
    const st = sk.randomKey();
    sk.session.set(HANDOVER_KEY, st);
    const u = new URL(shopSignIn, location.href);
    u.searchParams.set("return_to", location.origin + location.pathname);
    u.searchParams.set("state", st);
    location.assign(u.toString());
  }
  const shopLink = document.getElementById("shop-signin");
  if (shopLink && shopSignIn) shopLink.addEventListener("click", startHandover);

  function signedOut(message) {
    setToken(null);
    problem(message);
    const first = document.getElementById("demo-name") || document.getElementById("token-input");
    if (first) first.focus();
  }

  const demoForm = document.getElementById("demo-form");
  if (demoForm) {
    demoForm.addEventListener("submit", async function (ev) {
      ev.preventDefault();
      const name = $("demo-name").value.trim();
      if (!name) return;
      const btn = $("demo-submit");
      btn.disabled = true;
      const r = await sk.api("POST", "/demo/v1/login", { body: { name: name } });
      btn.disabled = false;
      if (r.status === 200 && r.body && r.body.token) {
        setToken(r.body.token);
        say("Signed in as " + (r.body.user_id || name) + ".");
        if (!els.buy.disabled) els.buy.focus();
      } else if (r.status === 0) {
        problem("Could not reach the shop to sign in. Check your connection and try again.");
      } else {
        problem(sk.errorMessage(r) || "Sign-in failed. Try another name.");
      }
    });
  }

  $("token-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    const t = $("token-input").value.trim();
    if (t.split(".").length !== 3) {
      problem("That does not look like a shop token. Copy the whole token and paste it again.");
      return;
    }
    $("token-input").value = "";
    setToken(t);
    say(state.user ? "Signed in as " + state.user + "." : "Token saved for this tab.");
  });

  $("signout").addEventListener("click", function (ev) {
    ev.preventDefault();
    setToken(null);
    sk.session.del(CLAIM_KEY);
    say("Signed out.");
  });

  // --- the sale's phase and stock ----------------------------------------

  function phase(now) {
    if (now < sale.startAt) return "scheduled";
    if (now >= sale.endAt) return "ended";
    if (state.remaining <= 0) return "sold_out";
    return "live";
  }

  function canBuy(now) {
    return Boolean(state.token) && phase(now) === "live" && !state.busy && !state.claim &&
      !state.blocked && now >= state.retryAt && (mode === "first_come" || (mode === "queue" && Boolean(state.ticket)));
  }

  function render() {
    const now = sk.serverNow();
    const ph = phase(now);
    if (ph === "scheduled") {
      els.phase.textContent = "Starts in";
      els.countdown.textContent = sk.formatCountdown(sale.startAt - now);
      els.countdown.setAttribute("aria-label", "Starts in " + sk.spokenDuration(sale.startAt - now));
      els.whenNote.textContent = "Opens at " + sk.formatDateTime(sale.startAt) + ", by the shop's clock.";
    } else if (ph === "live" && mode === "lottery" && now < resultsAt) {
      els.phase.textContent = "Entries open · results in";
      els.countdown.textContent = sk.formatCountdown(resultsAt - now);
      els.countdown.setAttribute("aria-label", "Results in " + sk.spokenDuration(resultsAt - now));
      els.whenNote.textContent = "The draw is at " + sk.formatDateTime(resultsAt) + ", by the shop's clock.";
    } else if (ph === "live") {
      els.phase.textContent = "Live now · ends in";
      els.countdown.textContent = sk.formatCountdown(sale.endAt - now);
      els.countdown.setAttribute("aria-label", "Ends in " + sk.spokenDuration(sale.endAt - now));
      els.whenNote.textContent = "";
    } else if (ph === "sold_out") {
      els.phase.textContent = "Sold out";
      els.countdown.textContent = "";
      els.countdown.removeAttribute("aria-label");
      els.whenNote.textContent = state.claim
        ? "Every unit has been claimed, one of them by you."
        : "Every unit has been claimed. Units not paid for in time come back on sale.";
    } else {
      els.phase.textContent = "Sale ended";
      els.countdown.textContent = "";
      els.countdown.removeAttribute("aria-label");
      els.whenNote.textContent = "";
    }
    app.dataset.phase = ph;
    if (mode !== "first_come") announceCountdown(now, ph);
    if (mode === "first_come" && ph === "live" && !state.wasLive && state.token && !state.claim) {
      say("The sale is live. You can buy now.");
    }
    state.wasLive = ph === "live";

    const rem = Math.max(0, state.remaining);
    els.remaining.textContent = String(rem);
    els.bar.setAttribute("aria-valuenow", String(rem));
    els.bar.setAttribute("aria-valuetext", rem + " of " + sale.stock + " left");
    els.fill.style.width = (sale.stock > 0 ? (100 * rem) / sale.stock : 0) + "%";
    els.bar.classList.toggle("low", rem > 0 && rem <= sale.stock * 0.1);

    els.signin.hidden = Boolean(state.token);
    els.account.hidden = !state.token;
    els.who.textContent = state.user || "a token holder";

    // Once the order is on screen, it is what the buyer acts on.
    els.buyBox.hidden = Boolean(state.claim && state.claim.view) || mode === "lottery" ||
      (mode === "queue" && !state.ticket);
    els.buy.disabled = !canBuy(now);
    els.buy.textContent = state.busy ? "Claiming…" : state.claim ? "Claimed" : "Buy now";
    els.hint.textContent = hint(now, ph);
  }

  function hint(now, ph) {
    if (state.claim) return "";
    if (state.busy) return "Hold on, claiming your unit.";
    if (ph === "ended") return "The sale has ended.";
    if (ph === "sold_out") return "Sold out.";
    if (state.blocked === "limit") return "You have reached the limit of " + sale.limit + " per buyer.";
    if (state.blocked === "gone") return "This sale no longer exists.";
    if (state.degraded) return "The shop is busy right now; retrying by itself…";
    if (!state.token) return "Sign in to buy.";
    if (ph === "scheduled") return "The button turns on when the sale starts.";
    if (now < state.retryAt) return "You can try again in " + Math.ceil((state.retryAt - now) / 1000) + " s.";
    return "";
  }

  async function refreshSale() {
    const r = await sk.api("GET", "/api/v1/sales/" + enc(sale.id));
    // 503, no answer, or the last good copy: the shop is busy. The stock
    // loop retries by itself; the buyer is told so, not shown an error.
    state.degraded = r.status === 0 || r.status === 503 || Boolean(r.status === 200 && r.body && r.body.stale);
    if (r.status === 200 && r.body) {
      state.remaining = Number(r.body.remaining);
      sale.stock = Number(r.body.stock) || sale.stock;
      sale.startAt = Date.parse(r.body.start_at) || sale.startAt;
      sale.endAt = Date.parse(r.body.end_at) || sale.endAt;
      if (state.blocked === "gone") state.blocked = "";
    } else if (r.status === 404) {
      state.blocked = "gone";
    }
    render();
  }

  async function stockLoop() {
    for (;;) {
      await refreshSale();
      const hidden = document.visibilityState === "hidden";
      // Jitter keeps a crowd's polls from arriving in lockstep.
      await sk.sleep((hidden ? 5 : 1) * STOCK_EVERY_MS + Math.random() * 500);
    }
  }

  // --- buying ---------------------------------------------------------------

  async function buy() {
    const now = sk.serverNow();
    if (!canBuy(now)) return;
    state.busy = true;
    // One key per purchase attempt, kept until a definite answer: a
    // double click, or a retry after a lost answer, is the same claim.
    if (!state.key) state.key = sk.randomKey();
    const qty = els.qty ? Number(els.qty.value) : 1;
    say("Claiming…");
    render();
    let r;
    for (let attempt = 1; attempt <= 3; attempt++) {
      const headers = { "Idempotency-Key": state.key };
      if (mode === "queue" && state.ticket) headers[state.ticketHeader] = state.ticket;
      r = await sk.api("POST", "/api/v1/sales/" + enc(sale.id) + "/reservations", {
        token: state.token, body: { qty: qty }, headers: headers,
      });
      // Only a lost answer or a server error is retried at once, with the
      // same key; every other answer is definite.
      if (r.status !== 0 && (r.status < 500 || r.status === 503)) break;
      await sk.sleep(400 * attempt);
    }
    state.busy = false;
    answer(r, qty);
    render();
  }

  function answer(r, qty) {
    const code = sk.errorCode(r);
    if (r.status === 202 && r.body && r.body.reservation_id) {
      state.key = null;
      state.claim = { id: r.body.reservation_id, qty: qty };
      sk.session.set(CLAIM_KEY, r.body.reservation_id);
      pollClaim();
      return;
    }
    if (r.status === 0 || (r.status >= 500 && r.status !== 503)) {
      // The claim may or may not have been made: keep the key, so pressing
      // Buy again gets the same answer, never a second unit.
      problem("We could not reach the shop. Press Buy again: retrying never buys twice.");
      return;
    }
    if (r.status === 429 || r.status === 503) {
      const wait = sk.retryAfter(r);
      state.retryAt = sk.serverNow() + wait * 1000;
      setTimeout(render, wait * 1000 + 50);
      if (code === "rate_limited") {
        problem("Too many tries in a short time. Please wait " + wait + " s, then press Buy again.");
      } else {
        problem("The shop is very busy right now. Please try again in " + wait + " s.");
      }
      return;
    }
    state.key = null;
    switch (code) {
      case "sold_out":
        state.remaining = 0;
        problem("Sold out: every unit has been claimed. Units not paid for in time come back on sale, so check again later.");
        return;
      case "limit_exceeded":
        state.blocked = "limit";
        problem("You have reached the limit of " + sale.limit + " per buyer for this sale.");
        return;
      case "not_started":
        problem("The sale has not started yet by the shop's clock. The button turns on at the start.");
        sk.syncClock(2).then(render);
        return;
      case "ended":
        problem("The sale has ended.");
        return;
      case "unauthorized":
        signedOut("Your sign-in is not valid any more. Please sign in again.");
        return;
      case "sale_not_found":
        state.blocked = "gone";
        problem("This sale no longer exists.");
        return;
      case "idempotency_key_reused":
        problem("Please press Buy again.");
        return;
    }
    problem(sk.errorMessage(r) || "The shop could not take this request (" + r.status + ").");
  }

  // pollClaim waits for the claim's order, every 2 s for up to 30 s, then
  // tells the buyer to check back later: the claim is safe either way.
  async function pollClaim() {
    if (state.polling || !state.claim) return;
    state.polling = true;
    els.recheck.hidden = true;
    say("Claimed! Generating your order…");
    const started = performance.now();
    const id = state.claim.id;
    adopted = id; // shown here: the standing need not bring it again
    try {
      for (;;) {
        const r = await sk.api("GET", "/api/v1/reservations/" + enc(id), { token: state.token });
        if (r.status === 200 && r.body && r.body.status && r.body.status !== "pending") {
          showOrder(r.body);
          return;
        }
        if (r.status === 401) {
          signedOut("Your sign-in expired. Sign in again to see your order: your claim is kept.");
          return;
        }
        if (performance.now() - started >= POLL_FOR_MS) break;
        const next = (r.body && r.body.poll_after_ms) || POLL_EVERY_MS;
        await sk.sleep(Math.min(next, Math.max(0, POLL_FOR_MS - (performance.now() - started)) + 10));
      }
      say("Your claim is safe, but your order is taking longer than usual. Please check back later.");
      els.recheck.hidden = false;
    } finally {
      state.polling = false;
    }
  }

  function showOrder(v) {
    state.claim = state.claim || { id: v.reservation_id };
    state.claim.view = v;
    els.order.hidden = false;
    els.recheck.hidden = true;
    els.orderId.textContent = v.order_id || v.reservation_id;
    els.orderQty.textContent = String(v.qty);
    els.orderTotal.textContent = sk.formatPrice(sale.priceCents * v.qty, sale.currency);
    const payBy = v.pay_by ? Date.parse(v.pay_by) : NaN;
    const open = v.status === "ordered" && !(payBy <= sk.serverNow());
    els.orderPayBy.textContent = isNaN(payBy) ? "" : sk.formatDateTime(payBy);
    els.orderPayBy.hidden = els.orderPayByLabel.hidden = !open;
    const link = open && !buyerPay && typeof v.pay_url === "string" && /^https?:\/\//.test(v.pay_url) ? v.pay_url : "";
    els.payLink.hidden = !link;
    if (link) els.payLink.href = link;
    els.pay.hidden = !(open && buyerPay);
    els.pay.disabled = false;
    switch (v.status) {
      case "ordered":
        els.orderStatus.textContent = "Waiting for payment";
        if (!open) {
          say("The payment deadline has passed; the order is being cancelled.");
        } else if (buyerPay) {
          say("Your order is ready. Pay by " + sk.formatTime(payBy) + " to keep it.");
          els.pay.focus();
        } else if (link) {
          say("Waiting for payment. Pay on the shop's payment page by " + sk.formatTime(payBy) +
            " to keep your order; this page updates when the shop confirms it.");
        } else {
          say("Waiting for payment. Pay by " + sk.formatTime(payBy) +
            " to keep your order; this page updates when the shop confirms it.");
        }
        awaitPayment(v.reservation_id);
        break;
      case "paid":
        els.orderStatus.textContent = "Paid";
        say("Paid. Thank you, your order is confirmed.");
        break;
      case "cancelled":
        els.orderStatus.textContent = "Cancelled";
        say("This order was cancelled (it was not paid in time, or it was cancelled). Its unit went back on sale.");
        forgetClaim();
        break;
      case "refund_due":
        els.orderStatus.textContent = "Refund on its way";
        say("Your payment arrived after the order was cancelled, so the shop will refund it. There is nothing more you need to do.");
        forgetClaim();
        break;
      case "refunded":
        els.orderStatus.textContent = "Refunded";
        say("Your payment arrived after the order was cancelled and has been refunded.");
        forgetClaim();
        break;
      case "failed":
        els.orderStatus.textContent = "Being resolved by our team";
        say("We could not finish this order automatically. Our team has been alerted and will resolve it " +
          "(complete it or refund you). There is nothing more you need to do.");
        forgetClaim();
        break;
    }
    render();
  }

  // awaitPayment asks for the order again every few seconds while it
  // waits for the shop's confirmation of its payment (the buyer pays on
  // the shop's page, maybe in another tab), until it is paid or cancelled.
  let awaiting = null;
  function awaitPayment(id) {
    if (awaiting === id) return;
    awaiting = id;
    (async function () {
      while (awaiting === id && state.claim && state.claim.id === id && state.token) {
        await sk.sleep(AWAIT_PAYMENT_EVERY_MS);
        if (awaiting !== id || !state.claim || state.claim.id !== id) break;
        const r = await sk.api("GET", "/api/v1/reservations/" + enc(id), { token: state.token });
        if (r.status === 200 && r.body && r.body.status !== "ordered") {
          awaiting = null;
          showOrder(r.body);
          return;
        }
        if (r.status === 200 && r.body) {
          const payBy = r.body.pay_by ? Date.parse(r.body.pay_by) : NaN;
          if (payBy <= sk.serverNow()) showOrder(r.body);
        }
      }
      if (awaiting === id) awaiting = null;
    })();
  }

  // recoverClaim looks for a claim this tab does not know of (made in
  // another tab, or before its storage was cleared) in the API's list of
  // the buyer's claims on the sale, so that the page shows it rather than
  // offer to buy again. A lottery or queue page has it from the standing;
  // the choice is the server's seckill.ShownClaim, less the claims that
  // ended (they leave the buy button free, as forgetClaim does).
  async function recoverClaim(tries) {
    const token = state.token;
    const r = await sk.api("GET", "/api/v1/sales/" + enc(sale.id) + "/reservations/mine", { token: token });
    // The answer is the asking buyer's: dropped if another signed in since.
    if (r.status !== 200 || !r.body || state.claim || !token || state.token !== token) return;
    const now = sk.serverNow();
    const list = Array.isArray(r.body.reservations) ? r.body.reservations : [];
    const rank = function (c) {
      if (c.status === "ordered") return Date.parse(c.pay_by) > now ? 0 : 2;
      return c.status === "paid" ? 3 : 9;
    };
    let best = null;
    list.forEach(function (c) {
      if (rank(c) > 3 || !c.reservation_id) return;
      if (!best || rank(c) < rank(best) || (rank(c) === rank(best) && (rank(c) > 0 || Date.parse(c.pay_by) < Date.parse(best.pay_by)))) best = c;
    });
    if (best && (rank(best) === 0 || !(r.body.pending_units > 0))) {
      state.claim = { id: best.reservation_id };
      sk.session.set(CLAIM_KEY, best.reservation_id);
      pollClaim();
    } else if (r.body.pending_units > 0 && (tries || 0) < POLL_FOR_MS / POLL_EVERY_MS) {
      // Units on their way to an order: ask again once it is written.
      await sk.sleep(r.body.poll_after_ms || POLL_EVERY_MS);
      recoverClaim((tries || 0) + 1);
    }
  }

  // forgetClaim frees the buy button after an order that ended without a
  // purchase; the order stays on screen.
  function forgetClaim() {
    state.claim = null;
    sk.session.del(CLAIM_KEY);
  }

  async function pay() {
    const c = state.claim;
    if (!c) return;
    els.pay.disabled = true;
    say("Paying…");
    const r = await sk.api("POST", "/api/v1/reservations/" + enc(c.id) + "/pay", { token: state.token, body: {} });
    if (r.status === 200 && r.body) {
      showOrder(r.body);
      return;
    }
    els.pay.disabled = false;
    if (r.status === 401) {
      signedOut("Your sign-in expired. Sign in again to pay: your order is kept until its deadline.");
    } else if (r.status === 409) {
      problem(sk.errorMessage(r) || "The order changed meanwhile.");
      const g = await sk.api("GET", "/api/v1/reservations/" + enc(c.id), { token: state.token });
      if (g.status === 200 && g.body) showOrder(g.body);
    } else if (r.status === 0 || r.status >= 500) {
      problem("The payment did not go through. Press Pay to try again: paying twice is not possible.");
    } else {
      problem(sk.errorMessage(r) || "The payment was refused (" + r.status + ").");
    }
  }

  // --- lottery and queue: the buyer's standing ------------------------------

  // The countdown on screen is not a live region (it would be read out every
  // second); a polite region says it at a few marks instead.
  const MARKS_MS = [3600000, 600000, 300000, 60000, 10000];
  let markSaid = { target: 0, mark: Infinity };
  function announceCountdown(now, ph) {
    let target = 0;
    let what = "";
    if (ph === "scheduled") { target = sale.startAt; what = mode === "lottery" ? "Entries open" : "The sale starts"; }
    else if (ph === "live" && mode === "lottery" && now < resultsAt) { target = resultsAt; what = "The results come"; }
    if (!target) return;
    const left = target - now;
    if (markSaid.target !== target) markSaid = { target: target, mark: Infinity };
    const mark = MARKS_MS.find(function (m) { return left <= m && left > m - 1500; });
    if (mark && mark < markSaid.mark) {
      markSaid.mark = mark;
      els.countdownNote.textContent = what + " in " + sk.spokenDuration(mark) + ".";
    }
  }

  const adm = mode === "first_come" ? null : {
    box: $("admission"), headline: $("adm-headline"), detail: $("adm-detail"), reload: $("adm-reload"),
    enter: document.getElementById("enter-form"), join: document.getElementById("join-form"),
  };
  const STANDING_EVERY_MS = 2000; // the polling fallback's pace, as the feed's
  let feed = null;
  let polling = false;
  let pollRun = 0; // the polling loop that is current; stopFollowing ends it
  let sessionFor = d.buyer || ""; // the buyer the server's session cookie names
  let adopted = ""; // the reservation id last taken from the standing

  // syncSession makes the server's session match the page's token, so the
  // buyer feed and the forms act for the same buyer as the buy button.
  async function syncSession() {
    if (!sessions || !adm) return;
    if (state.token && state.user && state.user === sessionFor) { follow(); return; }
    stopFollowing();
    if (!state.token) {
      if (sessionFor) {
        await sk.api("POST", "/sales/" + enc(sale.id) + "/session/end");
        sessionFor = "";
        applyStanding({ state: "sign_in", headline: mode === "lottery" ? "Sign in to enter the draw." : "Sign in to join the queue.", detail: "" });
      }
      return;
    }
    let r = null;
    try {
      r = await fetch("/sales/" + enc(sale.id) + "/session", {
        method: "POST", body: new URLSearchParams({ token: state.token }), credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
    } catch (e) { r = null; }
    const body = r && r.status === 200 ? await r.json().catch(function () { return null; }) : null;
    if (!body || !body.form_token) {
      if (r && r.status === 401) signedOut("Your sign-in is not valid any more. Please sign in again.");
      return;
    }
    sessionFor = body.user_id;
    document.querySelectorAll('input[name="form_token"]').forEach(function (i) { i.value = body.form_token; });
    follow();
  }

  function follow() {
    if (!adm || feed || polling) return;
    adm.reload.hidden = true;
    if (typeof EventSource !== "function") { pollStanding(); return; }
    feed = new EventSource("/sales/" + enc(sale.id) + "/events");
    let heard = false;
    feed.addEventListener("standing", function (ev) {
      heard = true;
      try { applyStanding(JSON.parse(ev.data)); } catch (e) { /* a bad event: wait for the next */ }
    });
    // A feed that fails, or that a proxy holds back, gives way to polling.
    feed.onerror = function () { if (!heard || feed.readyState === EventSource.CLOSED) fallBack(); };
    setTimeout(function () { if (!heard) fallBack(); }, 8000);
  }

  function stopFollowing() {
    if (feed) { feed.close(); feed = null; }
    polling = false;
  }

  function fallBack() {
    if (feed) { feed.close(); feed = null; }
    pollStanding();
  }

  async function pollStanding() {
    if (polling) return;
    polling = true;
    const run = ++pollRun;
    const asker = sessionFor;
    // An answer is the standing of the buyer the session named when it was
    // asked for: dropped, and its loop ended, if they signed out or another
    // signed in since (a new loop polls for them).
    const current = function () { return polling && run === pollRun && sessionFor === asker; };
    while (current()) {
      const r = await sk.api("GET", "/sales/" + enc(sale.id) + "/standing");
      if (!current()) break;
      if (r.status === 200 && r.body) applyStanding(r.body);
      else if (r.status === 401) { polling = false; break; }
      const hidden = document.visibilityState === "hidden";
      await sk.sleep((hidden ? 3 : 1) * STANDING_EVERY_MS + Math.random() * 500);
    }
  }

  // applyStanding shows the server's standing. The headline sits in a
  // polite live region: it is written only when it changes, so a screen
  // reader hears each change once (the server words it to change by the
  // minute, not the second).
  function applyStanding(st) {
    const prev = state.standing;
    state.standing = st;
    adm.box.dataset.state = st.state;
    if (adm.headline.textContent !== st.headline) adm.headline.textContent = st.headline;
    adm.detail.textContent = st.detail || "";
    if (adm.enter) adm.enter.hidden = st.state !== "enter";
    if (adm.join) adm.join.hidden = st.state !== "join";
    state.ticket = st.state === "admitted" && st.ticket ? st.ticket : "";
    if (st.ticket_header) state.ticketHeader = st.ticket_header;
    if (st.state === "sold_out") state.remaining = 0;
    // The buyer's claim on the sale (a lottery's win, a queue purchase,
    // maybe from another tab or before a reload) is shown once: one that
    // ended stays on screen and frees the button, not shown again.
    if (st.reservation_id && st.reservation_id !== adopted && !state.claim) {
      adopted = st.reservation_id;
      state.claim = { id: st.reservation_id };
      sk.session.set(CLAIM_KEY, st.reservation_id);
      pollClaim();
    }
    if (st.state === "admitted" && (!prev || prev.state !== "admitted") && !els.buy.disabled) els.buy.focus();
    if (st.state === "sign_in" && state.token) {
      stopFollowing();
      signedOut("Your sign-in is not valid any more. Please sign in again.");
    }
    render();
  }

  els.buy.addEventListener("click", buy);
  els.pay.addEventListener("click", pay);
  els.recheck.addEventListener("click", pollClaim);

  // --- start ----------------------------------------------------------------

  els.price.textContent = sk.formatPrice(sale.priceCents, sale.currency);
  takeTokenFromURL();
  setToken(sk.session.get(TOKEN_KEY));
  if (handoverRefused) {
    problem("That sign-in link was not started from this page, so it was not used. " +
      (state.token ? "You are still signed in as " + (state.user || "before") + "." : "Sign in with the shop."));
  }
  const kept = sk.session.get(CLAIM_KEY);
  if (kept && state.token) {
    state.claim = { id: kept };
    pollClaim();
  }
  setInterval(render, 250);
  sk.syncClock(3).then(function () {
    render();
    setInterval(function () { sk.syncClock(1); }, 60000);
  });
  stockLoop();
})();
