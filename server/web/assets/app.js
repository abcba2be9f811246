// verifyd dashboard. No framework and nothing fetched from elsewhere.
//
// Safety rules of this file: data from the server, which may hold what a
// user or a remote mail server chose, reaches the page only as text
// (textContent, createTextNode, attribute values via setAttribute on
// non-script attributes); innerHTML and friends are never used. Every
// write sends the session's CSRF token in X-CSRF-Token.
"use strict";

const VERDICTS = ["valid", "invalid", "risky", "unknown", "disposable", "spamtrap"];
const csrfMeta = document.querySelector('meta[name="csrf-token"]');
const CSRF = csrfMeta ? csrfMeta.getAttribute("content") : "";

// ---- helpers

async function api(method, path, body) {
  const opt = { method, headers: {}, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    opt.headers["Content-Type"] = "application/json";
    opt.body = JSON.stringify(body);
  }
  if (method !== "GET" && CSRF) opt.headers["X-CSRF-Token"] = CSRF;
  const r = await fetch(path, opt);
  let data = null;
  if ((r.headers.get("content-type") || "").includes("json")) data = await r.json();
  if (!r.ok) {
    const e = new Error((data && data.error && data.error.message) || r.status + " " + r.statusText);
    e.status = r.status;
    e.data = data;
    if (r.status === 401 && location.pathname.startsWith("/dashboard")) {
      location.assign("/login?next=" + encodeURIComponent(location.pathname));
    }
    throw e;
  }
  return data;
}

// el builds an element; children are nodes or strings (made text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return e;
}

const $ = (sel) => document.querySelector(sel);

function table(headers, rows, caption) {
  if (!rows.length) return el("p", { class: "muted", text: "Nothing yet." });
  return el("table", {},
    caption ? el("caption", { class: "muted", text: caption }) : null,
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col", class: h.num ? "num" : null }, typeof h === "string" ? h : h.label)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c, i) =>
      el("td", { class: headers[i] && headers[i].num ? "num" : null }, c))))));
}

function fmtTime(s) {
  if (!s) return "—";
  const d = new Date(s);
  if (isNaN(d)) return String(s);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

const nf = new Intl.NumberFormat("en-US");
const fmtNum = (n) => nf.format(n);

function badge(status) {
  const v = VERDICTS.includes(status) ? status : "unknown";
  return el("span", { class: "badge v-" + v, text: String(status) });
}

function toast(msg) {
  const t = $("#toast");
  if (!t) return;
  t.textContent = msg;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.textContent = ""; }, 4000);
}

function showError(form, err) {
  const p = form.querySelector(".error");
  if (!p) { toast(err.message); return; }
  let msg = err.message;
  if (err.status === 429 && err.data && err.data.error && err.data.error.details) msg = "Too many attempts; try again in " + err.data.error.details.retryAfter + " s.";
  p.textContent = msg;
}

function clearError(form) {
  const p = form.querySelector(".error");
  if (p) p.textContent = "";
}

// onSubmit wires a form: fn runs with the button disabled; its error is
// shown in the form's .error paragraph.
function onSubmit(form, fn) {
  if (!form) return;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearError(form);
    const btn = form.querySelector('button[type="submit"]');
    if (btn) btn.disabled = true;
    try { await fn(); } catch (err) { showError(form, err); } finally { if (btn) btn.disabled = false; }
  });
}

async function copyText(input) {
  input.select();
  try { await navigator.clipboard.writeText(input.value); toast("Copied."); }
  catch (_) { document.execCommand("copy"); toast("Copied."); }
}

// takeParam reads ?name= once and takes it out of the address bar, so a
// token does not stay in the history.
function takeParam(name) {
  const u = new URL(location.href);
  const v = u.searchParams.get(name);
  if (v !== null) { u.searchParams.delete(name); history.replaceState(null, "", u.pathname + u.search); }
  return v;
}

// ---- frame

function frame() {
  const out = $("#logout");
  if (out) out.addEventListener("click", async () => {
    try { await api("POST", "/auth/logout", {}); } catch (_) { /* the cookie is cleared anyway */ }
    location.assign("/login");
  });
  const sw = $("#account-switch");
  if (sw) sw.addEventListener("change", async () => {
    try { await api("POST", "/auth/account", { account: sw.value }); location.reload(); } catch (err) { toast(err.message); }
  });
}

// ---- sign in, register, link, settings

function pageLogin() {
  const f = $("#login-form");
  onSubmit(f, async () => {
    await api("POST", "/auth/login", { email: $("#email").value, password: $("#password").value });
    location.assign(f.dataset.next || "/dashboard");
  });
}

function pageRegister() {
  const f = $("#register-form");
  if (!f) return;
  const inv = takeParam("invitation");
  if (inv) $("#invitation").value = inv;
  onSubmit(f, async () => {
    const body = { email: $("#email").value, password: $("#password").value };
    const iv = $("#invitation").value.trim();
    if (iv) body.invitation = iv;
    const an = $("#account_name");
    if (an && an.value.trim()) body.account_name = an.value.trim();
    await api("POST", "/auth/register", body);
    location.assign("/dashboard");
  });
}

function pageLink() {
  const inv = takeParam("invitation");
  if (inv) $("#invitation").value = inv;
  onSubmit($("#link-form"), async () => {
    await api("POST", "/auth/link", { invitation: $("#invitation").value.trim() });
    location.assign("/dashboard");
  });
}

function pageSettings() {
  onSubmit($("#password-form"), async () => {
    await api("POST", "/auth/password", { current_password: $("#current_password").value, new_password: $("#new_password").value });
    // The session was replaced: reload for the new CSRF token.
    toast("Password changed; your other sessions ended.");
    setTimeout(() => location.reload(), 800);
  });
}

// ---- overview

async function pageOverview() {
  const [acct, stats, jobs] = await Promise.all([
    api("GET", "/dashboard/api/account"), api("GET", "/dashboard/api/stats?days=30"), api("GET", "/dashboard/api/jobs?limit=10"),
  ]);
  $("#balance").textContent = fmtNum(acct.balance);
  $("#held").textContent = acct.held ? fmtNum(acct.held) + " held by validations in flight" : "";
  $("#plan").textContent = acct.plan;
  $("#total30").textContent = fmtNum(stats.days.reduce((s, d) => s + d.total, 0));
  drawChart($("#chart"), stats.days);
  $("#legend").replaceChildren(...VERDICTS.map((v) => el("li", {}, el("span", { class: "sw v-" + v, "aria-hidden": "true" }), v)));
  $("#chart-table").replaceChildren(table(
    [{ label: "Day" }, { label: "Total", num: true }, ...VERDICTS.map((v) => ({ label: v, num: true }))],
    stats.days.slice().reverse().map((d) => [d.day, fmtNum(d.total), ...VERDICTS.map((v) => fmtNum(d.counts[v] || 0))])));
  renderJobs($("#jobs"), jobs.jobs);
  if (jobs.jobs.some((j) => j.status === "queued" || j.status === "running")) {
    setTimeout(async () => { renderJobs($("#jobs"), (await api("GET", "/dashboard/api/jobs?limit=10")).jobs); }, 3000);
  }
}

// jobLink names a job by the first 8 hex digits of its id (the whole id in
// its title, for copying) and opens its page.
function jobLink(id) {
  return el("a", { class: "mono", href: "/dashboard/batch?job=" + encodeURIComponent(id), title: id }, id.slice(0, 8));
}

function renderJobs(box, jobs) {
  box.replaceChildren(table(
    [{ label: "Job" }, { label: "List" }, { label: "Status" }, { label: "Progress" }, { label: "Created" }, { label: "Completed" }, { label: "Results" }],
    jobs.map((j) => [
      jobLink(j.job_id), j.list_name ? el("span", { class: "list-name", text: j.list_name }) : "—", j.status,
      el("span", { class: "nowrap" }, el("progress", { max: Math.max(1, j.progress.total), value: j.progress.processed, "aria-label": "progress of job " + j.job_id }),
        " " + fmtNum(j.progress.processed) + " / " + fmtNum(j.progress.total)),
      el("span", { class: "nowrap", text: fmtTime(j.created_at) }), el("span", { class: "nowrap", text: fmtTime(j.completed_at) }),
      j.results_url ? el("span", { class: "downloads" },
        el("a", { href: j.results_url, download: "" }, "All"), " · ",
        el("a", { href: filtered(j.results_url, ["valid"]), download: "" }, "Valid")) : "—",
    ])));
}

// filtered is the results.csv URL of only those verdicts.
function filtered(url, verdicts) { return url + "?status=" + verdicts.join(","); }

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) e.append(typeof c === "string" ? document.createTextNode(c) : c);
  return e;
}

// drawChart draws stacked bars, one per day, one band per verdict.
function drawChart(box, days) {
  const W = 900, H = 240, L = 44, B = 22, T = 8;
  const max = Math.max(1, ...days.map((d) => d.total));
  const step = niceStep(max / 4);
  const top = Math.ceil(max / step) * step;
  const bw = (W - L - 4) / Math.max(1, days.length);
  const y = (n) => T + (H - T - B) * (1 - n / top);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Validations per day by verdict, last " + days.length + " days" });
  for (let v = 0; v <= top; v += step) {
    root.append(svg("line", { x1: L, x2: W, y1: y(v), y2: y(v), class: "axis", "stroke-opacity": v ? 0.3 : 1 }));
    root.append(svg("text", { x: L - 6, y: y(v) + 3, "text-anchor": "end" }, fmtNum(v)));
  }
  days.forEach((d, i) => {
    let acc = 0;
    const x = L + 2 + i * bw;
    const g = svg("g", {});
    g.append(svg("title", {}, d.day + ": " + fmtNum(d.total) + " (" + VERDICTS.filter((v) => d.counts[v]).map((v) => v + " " + d.counts[v]).join(", ") + ")"));
    for (const v of VERDICTS) {
      const n = d.counts[v] || 0;
      if (!n) continue;
      g.append(svg("rect", { x, width: Math.max(1, bw - 3), y: y(acc + n), height: y(acc) - y(acc + n), class: "v-" + v }));
      acc += n;
    }
    if (!d.total) g.append(svg("rect", { x, width: Math.max(1, bw - 3), y: y(0) - 1, height: 1, fill: "#d8dde3" }));
    root.append(g);
    if (i % 5 === days.length % 5 || i === days.length - 1) {
      root.append(svg("text", { x: x + bw / 2, y: H - 6, "text-anchor": "middle" }, d.day.slice(5)));
    }
  });
  box.replaceChildren(root);
}

function niceStep(x) {
  if (x <= 1) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

// ---- validate

function pageValidate() {
  onSubmit($("#validate-form"), async () => {
    const body = { email: $("#email").value };
    if ($("#cache").checked) body.cache = true;
    const r = await fetch("/v1/validate", {
      method: "POST", credentials: "same-origin", cache: "no-store",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": CSRF }, body: JSON.stringify(body),
    });
    const text = await r.text();
    let data = null;
    try { data = JSON.parse(text); } catch (_) { /* shown below */ }
    if (!r.ok || !data) {
      const e = new Error((data && data.error && data.error.message) || r.status + " " + r.statusText);
      e.status = r.status; e.data = data;
      throw e;
    }
    showReceipt(data);
  });
  // A suggestion goes into the form, not straight to a validation: that
  // would cost a credit the person did not ask to spend.
  $("#r-dym-use").addEventListener("click", () => {
    $("#email").value = $("#r-dym-use").textContent;
    $("#email").focus();
  });
}

function showReceipt(rc) {
  $("#receipt").hidden = false;
  $("#r-status").replaceWith(Object.assign(badge(rc.status), { id: "r-status" }));
  $("#r-score").textContent = String(rc.score);
  $("#r-email").textContent = rc.email;
  const dym = rc.did_you_mean;
  $("#r-dym").hidden = !dym;
  if (dym) {
    $("#r-dym-use").textContent = dym.email;
    $("#r-dym-why").textContent = dym.reason === "tld_typo"
      ? "(the ending of the domain looks mistyped)"
      : dym.reason === "local_part_typo" ? "(the dots before the @ look mistyped)" : "(the domain looks mistyped)";
  }
  $("#r-json").textContent = JSON.stringify(rc, null, 2);
  const rows = [];
  const flat = (obj, prefix) => {
    for (const k of Object.keys(obj).sort()) {
      const v = obj[k];
      if (v && typeof v === "object" && !Array.isArray(v)) flat(v, prefix + k + ".");
      else rows.push([el("code", { text: prefix + k }), Array.isArray(v) ? v.join(", ") || "—" : String(v)]);
    }
  };
  flat(rc.checks || {}, "checks.");
  rows.push([el("code", { text: "probed_at" }), rc.probed_at], [el("code", { text: "latency_ms" }), String(rc.latency_ms)],
    [el("code", { text: "cached" }), String(rc.cached)], [el("code", { text: "credits_remaining" }), fmtNum(rc.credits_remaining)],
    [el("code", { text: "kid" }), rc.kid]);
  $("#r-checks").replaceChildren(table(["Check", "Value"], rows));
  const sig = $("#r-sig");
  sig.className = "sig";
  sig.textContent = "Checking the signature…";
  verifyReceipt(rc).then((res) => {
    sig.className = "sig " + res.cls;
    sig.textContent = res.msg;
  });
}

// canonical writes a value as RFC 8785 (JCS) text: JSON.stringify's
// strings and numbers are exactly JCS's; members sorted by UTF-16 code
// units, which is what the default sort compares.
function canonical(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
}

function b64url(s) {
  const b = atob(s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4));
  return Uint8Array.from(b, (c) => c.charCodeAt(0));
}

// verifyReceipt checks the Ed25519 signature against the key set the
// server publishes, in the browser (WebCrypto).
async function verifyReceipt(rc) {
  if (!window.crypto || !crypto.subtle) {
    return { cls: "na", msg: "This page is not in a secure context (HTTPS or localhost), so the browser offers no WebCrypto: verify the signed JSON with verifier-py instead." };
  }
  try {
    const jwks = await api("GET", "/.well-known/jwks.json");
    const jwk = (jwks.keys || []).find((k) => k.kid === rc.kid);
    if (!jwk) return { cls: "bad", msg: "Signature NOT verified: no key " + rc.kid + " in the published key set." };
    const key = await crypto.subtle.importKey("jwk", { kty: "OKP", crv: "Ed25519", x: jwk.x }, { name: "Ed25519" }, false, ["verify"]);
    const rest = Object.assign({}, rc);
    delete rest.sig;
    const ok = await crypto.subtle.verify({ name: "Ed25519" }, key, b64url(rc.sig), new TextEncoder().encode(canonical(rest)));
    return ok
      ? { cls: "ok", msg: "✓ Signature verified in this browser against key " + rc.kid + " of /.well-known/jwks.json (Ed25519 over the RFC 8785 form)." }
      : { cls: "bad", msg: "✗ Signature does NOT verify: the receipt was changed, or signed by another key." };
  } catch (err) {
    return { cls: "na", msg: "The browser could not check the signature (" + err.message + "); verify the signed JSON with verifier-py." };
  }
}

// ---- batch

// parseCSV reads RFC 4180 CSV (quotes, doubled quotes, CRLF).
function parseCSV(text) {
  const rows = [];
  let row = [], f = "", q = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (q) {
      if (c === '"') { if (text[i + 1] === '"') { f += '"'; i++; } else q = false; }
      else f += c;
    } else if (c === '"' && f === "") q = true;
    else if (c === ",") { row.push(f); f = ""; }
    else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(f); rows.push(row); row = []; f = "";
    } else f += c;
  }
  if (f !== "" || row.length) { row.push(f); rows.push(row); }
  return rows.filter((r) => r.some((c) => c.trim() !== ""));
}

function pageBatch() {
  const shown = new URLSearchParams(location.search).get("job");
  if (shown) watchJob(shown);
  const state = { rows: [], header: false, emails: [] };
  const drop = $("#drop"), file = $("#file"), col = $("#column"), form = $("#batch-form");
  const load = async (f) => {
    clearError(form);
    if (!f) return;
    if (f.size > 8 << 20) { showError(form, new Error("The file is larger than the 8 MB a batch may be.")); return; }
    const text = await f.text();
    const isCSV = /\.csv$/i.test(f.name) || f.type === "text/csv";
    state.rows = isCSV ? parseCSV(text) : text.split(/\r?\n/).filter((l) => l.trim() !== "").map((l) => [l]);
    const width = Math.max(0, ...state.rows.map((r) => r.length));
    state.header = state.rows.length > 0 && !state.rows[0].some((c) => c.includes("@"));
    col.replaceChildren();
    let best = 0, bestN = -1;
    for (let i = 0; i < width; i++) {
      const name = state.header ? state.rows[0][i] || "column " + (i + 1) : "column " + (i + 1);
      const n = state.rows.filter((r) => (r[i] || "").includes("@")).length;
      if (n > bestN) { best = i; bestN = n; }
      const sample = state.rows.find((r, j) => (!state.header || j > 0) && r[i]);
      col.append(el("option", { value: i }, name + (sample ? " — e.g. " + sample[i].slice(0, 40) : "")));
    }
    col.value = String(best);
    $("#column-row").hidden = width < 2;
    recount();
  };
  const recount = () => {
    const i = Number(col.value || 0);
    const seen = new Set();
    let rows = 0, empty = 0, noAt = 0;
    state.rows.forEach((r, j) => {
      if (state.header && j === 0) return;
      rows++;
      const e = (r[i] || "").trim().toLowerCase();
      if (!e) { empty++; return; }
      // The API refuses an item without "@" (it is no address at all);
      // such rows are left out and counted, not sent.
      if (!e.includes("@")) { noAt++; return; }
      seen.add(e);
    });
    state.emails = [...seen];
    const dups = rows - empty - noAt - state.emails.length;
    const count = $("#count");
    count.replaceChildren(
      el("strong", {}, fmtNum(state.emails.length) + " unique addresses"),
      " from " + fmtNum(rows) + " rows" + (dups ? ", " + fmtNum(dups) + (dups === 1 ? " duplicate" : " duplicates") : "") + (empty ? ", " + fmtNum(empty) + " empty" : "") +
      (noAt ? ", " + fmtNum(noAt) + " without @ left out" : "") +
      ". Credits needed: ", el("strong", {}, fmtNum(state.emails.length)), ".");
    api("GET", "/v1/balance").then((b) => {
      count.append(" Your balance: " + fmtNum(b.credits) + ".");
      if (b.credits < state.emails.length) count.append(el("span", { class: "state-bad" }, " Not enough credits."));
    }).catch(() => {});
    $("#submit-batch").disabled = state.emails.length === 0 || state.emails.length > 100000;
    if (state.emails.length > 100000) showError(form, new Error("A batch holds at most 100,000 addresses."));
  };
  file.addEventListener("change", () => load(file.files[0]));
  col.addEventListener("change", recount);
  for (const t of ["dragenter", "dragover"]) drop.addEventListener(t, (ev) => { ev.preventDefault(); drop.classList.add("over"); });
  for (const t of ["dragleave", "drop"]) drop.addEventListener(t, () => drop.classList.remove("over"));
  drop.addEventListener("drop", (ev) => { ev.preventDefault(); if (ev.dataTransfer.files.length) load(ev.dataTransfer.files[0]); });
  onSubmit(form, async () => {
    const body = { emails: state.emails };
    const ln = $("#listName").value.trim();
    if (ln) body.listName = ln;
    const wh = $("#webhookUrl").value.trim();
    if (wh) body.webhookUrl = wh;
    const job = await api("POST", "/v1/batch", body);
    watchJob(job.job_id);
  });
}

async function watchJob(id) {
  $("#job").hidden = false;
  $("#job-id").textContent = id;
  $("#job-list").textContent = "";
  $("#summary").replaceChildren();
  $("#downloads").replaceChildren();
  $("#download-row").hidden = true;
  const prog = $("#progress"), txt = $("#progress-text");
  for (;;) {
    let j;
    try { j = await api("GET", "/v1/jobs/" + encodeURIComponent(id)); } catch (err) {
      if (err.status >= 400 && err.status < 500 && err.status !== 429) {
        $("#job-status").textContent = "Cannot read the job: " + err.message;
        return;
      }
      $("#job-status").textContent = "Cannot read the job: " + err.message + " (retrying)";
      await sleep(2000);
      continue;
    }
    prog.max = Math.max(1, j.progress.total);
    prog.value = j.progress.processed;
    const pct = j.progress.total ? Math.floor((100 * j.progress.processed) / j.progress.total) : 0;
    txt.textContent = fmtNum(j.progress.processed) + " / " + fmtNum(j.progress.total) + " (" + pct + " %)";
    $("#job-status").textContent = "Status: " + j.status;
    $("#job-list").textContent = j.list_name ? "List: " + j.list_name : "";
    summarize(j);
    if (j.status === "completed") { downloads(j); return; }
    if (j.status === "failed") { $("#job-status").textContent = "The job failed; its unused credits were refunded."; return; }
    await sleep(700);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// summarize shows the job's breakdown: each verdict with its share and
// its reasons, as the job has them so far.
function summarize(j) {
  const done = j.progress.processed;
  const rows = VERDICTS.filter((v) => j.breakdown[v] && j.breakdown[v].count).map((v) => {
    const b = j.breakdown[v];
    const reasons = Object.entries(b.reasons).sort((x, y) => y[1] - x[1]);
    return [badge(v), fmtNum(b.count), (100 * b.count / Math.max(1, done)).toFixed(1) + " %",
      el("ul", { class: "reasons" }, reasons.map(([r, n]) => el("li", {}, el("code", { text: r }), " " + fmtNum(n))))];
  });
  $("#summary").replaceChildren(el("h3", { text: j.status === "completed" ? "Results by verdict" : "Results so far, by verdict" }),
    table([{ label: "Verdict" }, { label: "Addresses", num: true }, { label: "Share", num: true }, { label: "Reasons" }], rows));
}

// downloads offers the CSV of the whole job and of each verdict set a
// list cleaner asks for, one click each.
function downloads(j) {
  const n = (vs) => vs.reduce((s, v) => s + ((j.breakdown[v] && j.breakdown[v].count) || 0), 0);
  const link = (label, vs, cls) => {
    // The file is named by the server: job-<id>.csv, job-<id>-valid.csv…
    const href = vs ? filtered(j.results_url, vs) : j.results_url;
    const count = vs ? n(vs) : j.progress.total;
    return el("li", {}, el("a", { class: cls, href, download: "" }, label), " ", el("span", { class: "muted", text: fmtNum(count) + (count === 1 ? " address" : " addresses") }));
  };
  $("#downloads").replaceChildren(
    link("All results", null, "button"),
    link("Valid only: safe to send", ["valid"]),
    link("Valid and risky: catch-all and role addresses too", ["valid", "risky"]),
    link("Invalid only: to remove", ["invalid"]),
    link("Unknown only: to try again later", ["unknown"]),
  );
  $("#download-row").hidden = false;
  suggestions(j);
}

// suggestions offers the job's did-you-mean file when it has rows: the
// addresses that look mistyped (GET /v1/jobs/{id}/suggestions.csv),
// counted from the file itself.
async function suggestions(j) {
  const url = j.results_url.replace(/\/results\.csv$/, "/suggestions.csv");
  const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
  if (!r.ok) return;
  const rows = (await r.text()).split("\r\n").filter((l) => l !== "").length - 1;
  const a = $("#suggestions-link");
  a.href = url;
  a.textContent = "Did you mean: " + fmtNum(rows) + (rows === 1 ? " address looks" : " addresses look") + " mistyped";
  $("#suggestions").hidden = rows < 1;
}

// ---- history

function pageHistory() {
  const cursors = [""]; // cursors[i] is the cursor of page i
  let page = 0, next = null;
  const load = async () => {
    const q = new URLSearchParams({ limit: $("#limit").value, kind: $("#kind").value });
    if (cursors[page]) q.set("cursor", cursors[page]);
    const p = await api("GET", "/v1/results?" + q);
    next = p.next_cursor;
    $("#history").replaceChildren(table(
      [{ label: "Address" }, { label: "Verdict" }, { label: "Score", num: true }, { label: "Kind" }, { label: "Job" }, { label: "Latency", num: true }, { label: "Probed at" }, { label: "Cached from" }],
      p.results.map((r) => [el("span", { class: "addr", text: r.email }), badge(r.status), String(r.score), r.kind,
        r.job_id ? el("span", { class: "mono", text: r.job_id.slice(0, 8) }) : "—",
        r.latency_ms === null ? "—" : r.latency_ms + " ms", fmtTime(r.probed_at), r.cached_from ? el("span", { class: "mono", text: r.cached_from.slice(0, 8) }) : "—"])));
    $("#older").disabled = !next;
    $("#newer").disabled = page === 0;
  };
  const reset = () => { cursors.length = 1; page = 0; load().catch((e) => toast(e.message)); };
  $("#kind").addEventListener("change", reset);
  $("#limit").addEventListener("change", reset);
  $("#older").addEventListener("click", () => { cursors[page + 1] = next; page++; load().catch((e) => toast(e.message)); });
  $("#newer").addEventListener("click", () => { page--; load().catch((e) => toast(e.message)); });
  reset();
}

// ---- accuracy

const EVENTS = ["delivered", "hard_bounce", "soft_bounce", "complaint", "unsubscribed"];
const fmtPct = (f) => (f === null || f === undefined ? "—" : (100 * f).toFixed(1) + " %");

async function pageAccuracy() {
  const scope = $("#scope");
  const load = async () => {
    const days = $("#days").value;
    const all = scope && scope.value === "all";
    const r = await api("GET", (all ? "/dashboard/api/operator/accuracy?days=" : "/v1/accuracy?days=") + encodeURIComponent(days));
    renderAccuracy(r);
  };
  $("#days").addEventListener("change", () => load().catch((e) => toast(e.message)));
  platformsForm();
  const del = $("#delete-outcomes");
  if (del) {
    del.addEventListener("click", async () => {
      if (!confirm("Delete every delivery outcome of this account? This cannot be undone.")) return;
      try {
        const r = await api("POST", "/dashboard/api/outcomes/delete", {});
        toast(fmtNum(r.deleted) + " outcomes deleted.");
        await load();
      } catch (e) { toast(e.message); }
    });
  }
  if (scope) scope.addEventListener("change", () => load().catch((e) => toast(e.message)));
  await load();
}

// platformsForm shows and saves the account's sending-platform settings
// (owners), with the webhook address of each platform.
async function platformsForm() {
  const form = $("#platforms-form");
  if (!form) return;
  const account = form.dataset.account;
  for (const c of form.querySelectorAll("code.receiver")) {
    const u = new URL("/v1/outcomes/" + c.dataset.platform, location.origin);
    u.searchParams.set("account", account);
    if (c.dataset.auth) { u.username = $("#postmark-user").value || "user"; u.password = "password"; }
    c.textContent = u.href;
  }
  const s = await api("GET", "/dashboard/api/outcome-settings");
  $("#ses-topics").value = s.ses_topics.join("\n");
  $("#sendgrid-key").value = s.sendgrid_key;
  $("#mailgun-key").placeholder = s.mailgun_key_set ? "set (type to replace)" : "";
  $("#postmark-user").value = s.postmark_user;
  $("#postmark-password").placeholder = s.postmark_password_set ? "set (type to replace)" : "";
  $("#postmark-generate").addEventListener("click", () => {
    const b = new Uint8Array(18);
    crypto.getRandomValues(b);
    const pw = btoa(String.fromCharCode(...b)).replace(/[+/=]/g, "x");
    const input = $("#postmark-password");
    input.type = "text";
    input.value = pw;
    if (!$("#postmark-user").value) $("#postmark-user").value = "verifyd";
  });
  onSubmit(form, async () => {
    const body = {
      ses_topics: $("#ses-topics").value.split("\n").map((l) => l.trim()).filter(Boolean),
      sendgrid_key: $("#sendgrid-key").value.trim(),
      postmark_user: $("#postmark-user").value.trim(),
    };
    if ($("#mailgun-key").value) body.mailgun_key = $("#mailgun-key").value.trim();
    if ($("#postmark-password").value) body.postmark_password = $("#postmark-password").value;
    if (!body.postmark_user) body.postmark_password = "";
    const r = await api("POST", "/dashboard/api/outcome-settings", body);
    $("#mailgun-key").value = "";
    $("#mailgun-key").placeholder = r.mailgun_key_set ? "set (type to replace)" : "";
    $("#postmark-password").value = "";
    $("#postmark-password").type = "password";
    $("#postmark-password").placeholder = r.postmark_password_set ? "set (type to replace)" : "";
    $("#platforms-saved").textContent = "Saved.";
  });
}

function renderAccuracy(r) {
  $("#acc-empty").hidden = r.outcomes > 0;
  $("#acc-outcomes").textContent = fmtNum(r.outcomes);
  $("#acc-matched").textContent = fmtNum(r.matched) + " matched to a verdict, " + fmtNum(r.unmatched) + " not; " +
    fmtNum(r.false_negatives) + (r.false_negatives === 1 ? " delivery" : " deliveries") + " to addresses called invalid";
  $("#acc-pvalid").textContent = fmtPct(r.precision_valid);
  $("#acc-pinvalid").textContent = fmtPct(r.precision_invalid);
  $("#acc-catchall").textContent = fmtPct(r.catch_all.bounced_share);
  $("#acc-catchall-n").textContent = fmtNum(r.catch_all.bounced) + " of " + fmtNum(r.catch_all.outcomes) + " outcomes of risky catch-all verdicts";

  // The confusion matrix: a row per verdict with outcomes, shaded by its share.
  const rows = VERDICTS.filter((v) => EVENTS.some((e) => r.confusion[v][e]));
  $("#confusion").replaceChildren(table(
    [{ label: "Verdict" }, ...EVENTS.map((e) => ({ label: e.replace("_", " "), num: true })), { label: "Total", num: true }],
    rows.map((v) => {
      const c = r.confusion[v];
      const total = EVENTS.reduce((s, e) => s + c[e], 0);
      return [badge(v), ...EVENTS.map((e) => el("span", { class: "heat heat-" + Math.min(5, Math.ceil((5 * c[e]) / Math.max(1, total))), text: fmtNum(c[e]) })), fmtNum(total)];
    }), "Matched outcomes by the verdict given and what happened"));

  // The reliability diagram.
  const cal = r.calibration;
  $("#calibration").textContent = cal
    ? "Scores are calibrated on this account's outcomes: model " + cal.model + ", fitted on " + fmtNum(cal.outcomes) + " outcomes" +
      (cal.providers.length ? " (own models for " + cal.providers.map((p) => p.provider).join(", ") + ")" : "") + "."
    : "Scores are the engine's own: calibration starts once enough outcomes are matched.";
  drawReliability($("#reliability"), r.reliability, cal);
  $("#reliability-table").replaceChildren(table(
    [{ label: "Engine score" }, { label: "Delivered", num: true }, { label: "Bounced", num: true }, { label: "Delivered share", num: true }],
    r.reliability.map((b) => [b.from + "–" + b.to, fmtNum(b.deliverable), fmtNum(b.bounced), fmtPct(b.deliverable_share)])));

  drawDaily($("#daily"), r.daily);
  $("#daily-table").replaceChildren(table(
    [{ label: "Day" }, { label: "Outcomes", num: true }, { label: "Precision of valid", num: true }, { label: "Precision of invalid", num: true }],
    r.daily.slice().reverse().map((d) => [d.key, fmtNum(d.outcomes), fmtPct(d.precision_valid), fmtPct(d.precision_invalid)])));

  const sliceRows = (list) => list.map((d) => [el("span", { class: "addr", text: d.key || "—" }), fmtNum(d.outcomes), fmtNum(d.valid_bounced) + " of " + fmtNum(d.valid),
    fmtPct(d.precision_valid), fmtPct(d.precision_invalid)]);
  const sliceHead = (first) => [{ label: first }, { label: "Outcomes", num: true }, { label: "Valid that bounced", num: true }, { label: "Precision of valid", num: true }, { label: "Precision of invalid", num: true }];
  $("#worst").replaceChildren(table(sliceHead("Domain"), sliceRows(r.worst_domains)));
  $("#providers").replaceChildren(table(sliceHead("Provider"), sliceRows(r.by_provider)));
}

// drawReliability plots the delivered share of each score bucket (a dot
// sized by its outcomes) against the score, with the diagonal a perfectly
// calibrated score would follow and, when there is one, the calibration.
function drawReliability(box, buckets, cal) {
  const W = 900, H = 260, L = 44, B = 24, T = 10, R = 10;
  const x = (s) => L + (W - L - R) * (s / 100);
  const y = (p) => T + (H - T - B) * (1 - p);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Delivered share by score: a reliability diagram" });
  for (let p = 0; p <= 1.0001; p += 0.25) {
    root.append(svg("line", { x1: L, x2: W - R, y1: y(p), y2: y(p), class: "axis", "stroke-opacity": p ? 0.3 : 1 }));
    root.append(svg("text", { x: L - 6, y: y(p) + 3, "text-anchor": "end" }, Math.round(100 * p) + " %"));
  }
  for (let s = 0; s <= 100; s += 10) root.append(svg("text", { x: x(s), y: H - 6, "text-anchor": "middle" }, String(s)));
  root.append(svg("line", { x1: x(0), y1: y(0), x2: x(100), y2: y(1), class: "ideal" }));
  if (cal) {
    root.append(svg("polyline", { class: "cal", points: cal.scores.map((c, i) => x(10 * i) + "," + y(c / 100)).join(" ") }));
  }
  const max = Math.max(1, ...buckets.map((b) => b.deliverable + b.bounced));
  const pts = [];
  for (const b of buckets) {
    if (b.deliverable_share === null) continue;
    const mid = b.to === 100 ? 95 : b.from + 4.5;
    pts.push(x(mid) + "," + y(b.deliverable_share));
    const n = b.deliverable + b.bounced;
    const dot = svg("circle", { class: "pt", cx: x(mid), cy: y(b.deliverable_share), r: 3 + 7 * Math.sqrt(n / max) });
    dot.append(svg("title", {}, "score " + b.from + "–" + b.to + ": " + fmtPct(b.deliverable_share) + " delivered of " + fmtNum(n)));
    root.append(dot);
  }
  if (pts.length > 1) root.insertBefore(svg("polyline", { class: "measured", points: pts.join(" ") }), root.querySelector("circle"));
  box.replaceChildren(root);
}

// drawDaily plots the precision of valid and of invalid per day.
function drawDaily(box, days) {
  const W = 900, H = 240, L = 44, B = 22, T = 8, R = 10;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Precision of valid and invalid verdicts per day" });
  const y = (p) => T + (H - T - B) * (1 - p);
  const x = (i) => L + (W - L - R) * (days.length > 1 ? i / (days.length - 1) : 0.5);
  for (let p = 0; p <= 1.0001; p += 0.25) {
    root.append(svg("line", { x1: L, x2: W - R, y1: y(p), y2: y(p), class: "axis", "stroke-opacity": p ? 0.3 : 1 }));
    root.append(svg("text", { x: L - 6, y: y(p) + 3, "text-anchor": "end" }, Math.round(100 * p) + " %"));
  }
  for (const [k, cls] of [["precision_valid", "line-valid"], ["precision_invalid", "line-invalid"]]) {
    const pts = days.map((d, i) => (d[k] === null ? null : x(i) + "," + y(d[k]))).filter(Boolean);
    if (pts.length > 1) root.append(svg("polyline", { class: cls, points: pts.join(" ") }));
    days.forEach((d, i) => {
      if (d[k] === null) return;
      const c = svg("circle", { class: cls, cx: x(i), cy: y(d[k]), r: 3 });
      c.append(svg("title", {}, d.key + ": " + k.replace("_", " of ") + " " + fmtPct(d[k]) + " (" + fmtNum(d.outcomes) + " outcomes)"));
      root.append(c);
    });
  }
  days.forEach((d, i) => {
    if (i % 7 === (days.length - 1) % 7) root.append(svg("text", { x: x(i), y: H - 6, "text-anchor": "middle" }, d.key.slice(5)));
  });
  box.replaceChildren(root);
}

// ---- keys

function pageKeys() {
  const list = async () => {
    const { keys } = await api("GET", "/dashboard/api/keys");
    keys.reverse(); // newest first
    $("#keys").replaceChildren(table(
      [{ label: "Prefix" }, { label: "Label" }, { label: "Scopes" }, { label: "Created" }, { label: "Last used" }, { label: "State" }],
      keys.map((k) => [el("span", { class: "mono", text: k.prefix }), k.label || "—", k.scopes.join(", "), fmtTime(k.created_at), fmtTime(k.last_used),
        k.revoked ? el("span", { class: "state-bad" }, "revoked " + fmtTime(k.revoked_at))
          : el("button", { type: "button", class: "danger", "aria-label": "Revoke key " + k.prefix, onclick: () => revoke(k) }, "Revoke")])));
  };
  const revoke = async (k) => {
    if (!confirm("Revoke key " + k.prefix + (k.label ? " (" + k.label + ")" : "") + "? Requests with it will get 401 at once.")) return;
    try { await api("POST", "/dashboard/api/keys/" + encodeURIComponent(k.prefix) + "/revoke", {}); toast("Key " + k.prefix + " revoked."); } catch (err) { toast(err.message); }
    list();
  };
  onSubmit($("#mint-form"), async () => {
    const scopes = [...document.querySelectorAll("#mint-form input[type=checkbox]:checked")].map((c) => c.value);
    const body = { scopes };
    const label = $("#label").value.trim();
    if (label) body.label = label;
    const k = await api("POST", "/dashboard/api/keys", body);
    $("#minted").hidden = false;
    $("#minted-key").value = k.key;
    $("#minted-key").focus();
    $("#label").value = "";
    list();
  });
  $("#copy-key").addEventListener("click", () => copyText($("#minted-key")));
  list().catch((e) => toast(e.message));
}

// ---- webhooks

function pageWebhooks() {
  const load = async () => {
    const [dead, outbox, att] = await Promise.all([
      api("GET", "/dashboard/api/webhooks/dead-letters"), api("GET", "/dashboard/api/webhooks/outbox"), api("GET", "/dashboard/api/webhooks/attempts?limit=50"),
    ]);
    const evCells = (e) => [el("span", { class: "mono", text: e.id }), e.type, el("span", { class: "addr", text: e.url }), String(e.attempts),
      e.last_status ? String(e.last_status) : "—", e.last_error || "—"];
    $("#dead").replaceChildren(table(["Event", "Type", "URL", "Attempts", "Last status", "Last error", "Given up", ""],
      dead.events.map((e) => [...evCells(e), fmtTime(e.dead_at),
        el("button", { type: "button", "aria-label": "Re-send event " + e.id, onclick: () => resend(e) }, "Re-send")])));
    $("#outbox").replaceChildren(table(["Event", "Type", "URL", "Attempts", "Last status", "Last error", "Next attempt"],
      outbox.events.map((e) => [...evCells(e), fmtTime(e.next_attempt)])));
    $("#attempts").replaceChildren(table(["At", "Event", "Attempt", "Outcome", "Status", "Error", "Took"],
      att.attempts.map((a) => [fmtTime(a.at), el("span", { class: "mono", text: a.event_id }), String(a.attempt), a.outcome,
        a.status ? String(a.status) : "—", a.error || "—", a.duration_ms + " ms"])));
  };
  const resend = async (e) => {
    try { await api("POST", "/dashboard/api/webhooks/events/" + encodeURIComponent(e.id) + "/resend", {}); toast("Event " + e.id + " is due again."); } catch (err) { toast(err.message); }
    load();
  };
  $("#reveal").addEventListener("click", async () => {
    const s = $("#secret");
    if ($("#reveal").textContent === "Hide") { s.value = "••••••••••••••••"; $("#reveal").textContent = "Reveal"; return; }
    try {
      const w = await api("GET", "/dashboard/api/webhook-secret");
      s.value = w.webhook_secret;
      $("#reveal").textContent = "Hide";
      $("#rotated").textContent = w.rotated_at ? "Rotated " + fmtTime(w.rotated_at) : "";
    } catch (err) { toast(err.message); }
  });
  $("#rotate").addEventListener("click", async () => {
    if (!confirm("Rotate the webhook secret? Receivers must take the new one: signatures with the old one stop at once.")) return;
    try {
      const w = await api("POST", "/dashboard/api/webhook-secret/rotate", {});
      $("#secret").value = w.webhook_secret;
      $("#reveal").textContent = "Hide";
      $("#rotated").textContent = "Rotated " + fmtTime(w.rotated_at);
    } catch (err) { toast(err.message); }
  });
  $("#test-event").addEventListener("click", async () => {
    const out = $("#test-result");
    out.textContent = "Sending…";
    try {
      const t = await api("POST", "/dashboard/api/webhooks/test", {});
      out.replaceChildren(el("span", { class: t.delivered ? "state-ok" : "state-bad" }, t.delivered ? "Delivered" : "Not delivered"),
        " — event " + t.event_id + " replaying " + t.replay_of + " (" + t.type + ") to ", el("span", { class: "addr", text: t.url }),
        ": " + (t.status ? "HTTP " + t.status : "no answer") + (t.error ? ", " + t.error : "") + ", " + t.duration_ms + " ms.");
    } catch (err) { out.textContent = err.message; }
    load();
  });
  load().catch((e) => toast(e.message));
}

// ---- team

function pageTeam() {
  const owner = document.body.dataset.owner === "true";
  const load = async () => {
    const { members } = await api("GET", "/dashboard/api/members");
    $("#members").replaceChildren(table(["Email", "Role", ""], members.map((m) => [
      el("span", { class: "addr" }, m.email, m.you ? " (you)" : "", m.operator ? " · operator" : ""),
      owner ? roleSelect(m) : m.role,
      owner && !m.you ? el("button", { type: "button", class: "danger", "aria-label": "Remove " + m.email, onclick: () => setRole(m, "") }, "Remove") : "",
    ])));
    if (!owner) return;
    const { invites } = await api("GET", "/dashboard/api/invites");
    $("#invites").replaceChildren(table(["Id", "Role", "For", "Created", "Expires", ""], invites.map((iv) => [
      el("span", { class: "mono", text: iv.id }), iv.role, iv.email || "anyone", fmtTime(iv.created_at), fmtTime(iv.expires_at),
      el("button", { type: "button", class: "danger", "aria-label": "Revoke invitation " + iv.id, onclick: () => revoke(iv) }, "Revoke"),
    ])));
  };
  const roleSelect = (m) => {
    const s = el("select", { "aria-label": "Role of " + m.email },
      el("option", { value: "owner", selected: m.role === "owner" }, "owner"), el("option", { value: "member", selected: m.role === "member" }, "member"));
    s.addEventListener("change", () => setRole(m, s.value));
    return s;
  };
  const setRole = async (m, role) => {
    if (role === "" && !confirm("Remove " + m.email + " from this account?")) return;
    try { await api("POST", "/dashboard/api/members/" + encodeURIComponent(m.id) + "/role", { role }); toast("Saved."); } catch (err) { toast(err.message); }
    load();
  };
  const revoke = async (iv) => {
    try { await api("POST", "/dashboard/api/invites/" + encodeURIComponent(iv.id) + "/revoke", {}); } catch (err) { toast(err.message); }
    load();
  };
  onSubmit($("#invite-form"), async () => {
    const body = { role: $("#invite-role").value };
    const e = $("#invite-email").value.trim();
    if (e) body.email = e;
    const iv = await api("POST", "/dashboard/api/invites", body);
    $("#invited").hidden = false;
    $("#invite-link").value = location.origin + "/register?invitation=" + encodeURIComponent(iv.token);
    $("#invite-token").value = iv.token;
    load();
  });
  const ci = $("#copy-invite");
  if (ci) ci.addEventListener("click", () => copyText($("#invite-link")));
  load().catch((e) => toast(e.message));
}

// ---- operator

function pageOperator() {
  let target = null;
  const load = async () => {
    const [pool, accts] = await Promise.all([api("GET", "/dashboard/api/operator/egress"), api("GET", "/dashboard/api/operator/accounts")]);
    $("#egress").replaceChildren(table(["Address", "HELO name", "State", "In flight", "Sessions", "Cooldowns", "Self-check", ""],
      pool.map((a) => {
        a.cooldowns = a.cooldowns || [];
        a.findings = a.findings || [];
        const name = a.addr || "system address";
        const state = a.disabled ? el("span", { class: "state-bad" }, "disabled: " + (a.disabled_reason || "")) :
          a.draining ? el("span", { class: "state-warn" }, "draining") : el("span", { class: "state-ok" }, "in rotation");
        const cools = a.cooldowns.length ? el("ul", { class: "plain" }, a.cooldowns.map((c) => el("li", {}, c.dest + " until " + fmtTime(c.until) + " (" + c.cause + ", ×" + c.repeats + ")"))) : "none";
        const checks = !a.checked_at ? "not checked yet" : a.findings.length ? el("ul", { class: "plain" }, a.findings.map((f) => el("li", {}, f))) :
          el("span", { class: "state-ok" }, "passed " + fmtTime(a.checked_at));
        const act = !a.addr ? "" : a.disabled
          ? el("button", { type: "button", "aria-label": "Enable " + a.addr, onclick: () => egressDo(a.addr, "enable") }, "Enable")
          : el("button", { type: "button", class: "danger", "aria-label": "Drain " + a.addr, onclick: () => egressDo(a.addr, "drain") }, "Drain");
        return [el("span", { class: "mono", text: name }), a.helo_name || "—", state, String(a.in_flight), fmtNum(a.sessions), cools, checks, act];
      })));
    $("#accounts").replaceChildren(table([{ label: "Id" }, { label: "Name" }, { label: "Plan" }, { label: "Balance", num: true }, { label: "Held", num: true }, { label: "Created" }, { label: "" }],
      accts.accounts.map((a) => [el("span", { class: "mono", text: a.id }), a.name, a.plan, fmtNum(a.balance), fmtNum(a.held), fmtTime(a.created_at),
        el("button", { type: "button", class: "secondary", "aria-label": "Add credits to " + a.name, onclick: () => openCredits(a) }, "Add credits")])));
  };
  const egressDo = async (addr, what) => {
    if (what === "drain" && !confirm("Drain " + addr + "? Its sessions finish; no new one starts until it is enabled.")) return;
    try { await api("POST", "/dashboard/api/operator/egress/" + encodeURIComponent(addr) + "/" + what, {}); toast(addr + (what === "drain" ? " drained." : " enabled.")); } catch (err) { toast(err.message); }
    load();
  };
  const openCredits = (a) => {
    target = a;
    $("#credits-form").hidden = false;
    $("#credits-account").textContent = a.name + " (" + a.id + ")";
    $("#credits-add").focus();
  };
  $("#credits-cancel").addEventListener("click", () => { $("#credits-form").hidden = true; });
  onSubmit($("#credits-form"), async () => {
    const body = { add: Number($("#credits-add").value) };
    const note = $("#credits-note").value.trim();
    if (note) body.note = note;
    await api("POST", "/dashboard/api/operator/accounts/" + encodeURIComponent(target.id) + "/credits", body);
    $("#credits-form").hidden = true;
    toast("Credits added.");
    load();
  });
  load().catch((e) => toast(e.message));
}

// ---- start

// pageDocs renders /openapi.json: every operation by tag, with its
// parameters, request body and answers. Every text comes from the
// document and is set as text, never as markup.
async function pageDocs() {
  const r = await fetch("/openapi.json", { headers: { Accept: "application/json" } });
  if (!r.ok) throw new Error("cannot load /openapi.json: HTTP " + r.status);
  const spec = await r.json();
  const schemas = (spec.components && spec.components.schemas) || {};
  const resolve = (s) => {
    for (let i = 0; s && s.$ref && i < 8; i++) s = schemas[s.$ref.split("/").pop()];
    return s || {};
  };
  const typeOf = (s) => {
    const ref = s && s.$ref ? s.$ref.split("/").pop() : "";
    s = resolve(s);
    if (ref) return ref;
    if (s.type === "array") return "array of " + typeOf(s.items || {});
    if (s.enum) return (s.type || "") + " (" + s.enum.join(", ") + ")";
    return Array.isArray(s.type) ? s.type.join(" or ") : (s.type || "object");
  };
  const fields = (schema) => {
    let s = resolve(schema);
    if (s.type === "array") s = resolve(s.items);
    const props = s.properties || {};
    const req = new Set(s.required || []);
    const rows = Object.entries(props).map(([name, p]) => [
      el("code", { text: name }), typeOf(p), req.has(name) ? "yes" : "", resolve(p).description || p.description || ""]);
    return rows.length ? table(["field", "type", "required", "meaning"], rows) : null;
  };
  const groups = new Map();
  for (const [path, item] of Object.entries(spec.paths || {})) {
    for (const method of ["get", "post", "put", "patch", "delete"]) {
      const op = item[method];
      if (!op) continue;
      const tag = (op.tags && op.tags[0]) || "Other";
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push({ method: method.toUpperCase(), path, op });
    }
  }
  const root = $("#api-docs");
  const toc = $("#api-toc");
  root.replaceChildren();
  const tocList = el("ul", {});
  toc.replaceChildren(tocList);
  let n = 0;
  for (const [tag, ops] of groups) {
    const id = "tag-" + tag.toLowerCase().replace(/[^a-z0-9]+/g, "-");
    tocList.append(el("li", {}, el("a", { href: "#" + id, text: tag + " (" + ops.length + ")" })));
    const section = el("section", { id, class: "card" }, el("h2", { text: tag }));
    for (const { method, path, op } of ops) {
      const opID = "op-" + (n++);
      const parts = [el("h3", { id: opID }, el("code", { class: "method", text: method }), " ", el("code", { text: path }))];
      if (op.summary) parts.push(el("p", { text: op.summary }));
      if (op.description) parts.push(el("p", { class: "muted", text: op.description }));
      const params = (op.parameters || []).map((p) => [el("code", { text: p.name }), p.in, p.required ? "yes" : "",
        typeOf(p.schema || {}), p.description || ""]);
      if (params.length) parts.push(el("h4", { text: "Parameters" }), table(["name", "in", "required", "type", "meaning"], params));
      const body = op.requestBody && op.requestBody.content;
      if (body) {
        for (const [ctype, c] of Object.entries(body)) {
          parts.push(el("h4", { text: "Request body (" + ctype + ")" }));
          const f = fields(c.schema || {});
          if (f) parts.push(f);
        }
      }
      const answers = Object.entries(op.responses || {}).map(([code, a]) => {
        const c = a.content ? Object.keys(a.content).join(", ") : "";
        const s = a.content && a.content["application/json"] ? typeOf(a.content["application/json"].schema || {}) : "";
        return [el("code", { text: code }), a.description || "", c + (s ? " · " + s : "")];
      });
      parts.push(el("h4", { text: "Answers" }), table(["status", "meaning", "body"], answers));
      const ok = Object.entries(op.responses || {}).find(([code, a]) => code.startsWith("2") && a.content && a.content["application/json"]);
      if (ok) {
        const f = fields(ok[1].content["application/json"].schema || {});
        if (f) parts.push(el("details", {}, el("summary", { text: "Fields of the " + ok[0] + " answer" }), f));
      }
      section.append(el("article", { class: "op" }, ...parts));
    }
    root.append(section);
  }
}

const pages = {
  docs: pageDocs,
  login: pageLogin, register: pageRegister, link: pageLink, settings: pageSettings, overview: pageOverview,
  validate: pageValidate, batch: pageBatch, history: pageHistory, accuracy: pageAccuracy, keys: pageKeys, webhooks: pageWebhooks,
  team: pageTeam, operator: pageOperator,
};

document.addEventListener("DOMContentLoaded", () => {
  frame();
  const p = pages[document.body.dataset.page];
  if (p && !document.querySelector("main .notice[role=alert]")) {
    Promise.resolve().then(p).catch((err) => toast(err.message));
  }
});
