// The queue page: reads /debug/queue and /debug/nodes from the server that served it and
// draws them, again every REFRESH_MS. Everything shown is built with textContent, never HTML:
// job and pod names come from the cluster.
"use strict";

const REFRESH_MS = 2000;
const TERMS = ["user", "job", "wait", "parallelism"];
let renders = 0;
let lastGood = null;

// el makes an element with attributes (class, data-*, title, ...) and children (nodes or text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fixed(x) {
  return (typeof x === "number" ? x : 0).toFixed(2);
}

// bar is a horizontal bar of value in [0,1] with its number beside it.
function bar(value, cls) {
  const v = Math.max(0, Math.min(1, typeof value === "number" ? value : 0));
  const fill = el("span", { class: "fill" });
  fill.style.width = (v * 100).toFixed(1) + "%";
  return el("span", { class: "bar " + (cls || ""), "data-value": fixed(value) }, el("span", { class: "track" }, fill), el("span", { class: "num" }, fixed(value)));
}

// jobColour gives each job its own hue, the same on every refresh.
function jobColour(key) {
  let h = 0;
  for (const ch of key) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return "hsl(" + (h % 360) + ", 55%, 42%)";
}

// gangText is the gang's progress as the text table of /debug/queue?format=table says it.
function gangText(d) {
  return d.bound + "/" + d.minMember + " bound" + (d.held > 0 ? ", " + d.held + " held" : "");
}

function gang(d) {
  const min = Math.max(d.minMember, 1);
  const bound = el("span", { class: "fill" });
  bound.style.width = (Math.min(d.bound, min) / min * 100).toFixed(1) + "%";
  const held = el("span", { class: "fill held" });
  held.style.width = (Math.min(d.held, Math.max(min - d.bound, 0)) / min * 100).toFixed(1) + "%";
  return el("span", { class: "gang", title: d.pods + " pods exist; the gang needs " + d.minMember },
    el("span", { class: "track" }, bound, held),
    el("span", { class: "num", "data-field": "gang" }, gangText(d)));
}

function phase(d) {
  return el("span", { class: "phase " + d.phase.toLowerCase(), "data-field": "phase" }, d.phase);
}

// waitsFor is what keeps the job from running, in a few words (its blocker), with the whole
// sentence as the tooltip and badges for the waits that end on their own.
function waitsFor(d) {
  let text = d.blocker || "";
  if (d.phase === "Admitted") text = d.held > 0 ? "its gang gathering at bind" : "";
  else if (d.phase === "Running") text = "";
  return el("td", { class: "waits", title: d.reason || "" },
    d.starved ? el("span", { class: "badge" }, "starved") : null,
    d.repair ? el("span", { class: "badge" }, "repair") : null,
    d.coolingDown ? el("span", { class: "badge" }, "cooling down") : null,
    el("span", { "data-field": "waits" }, text.trim()));
}

// placementText is where the plan puts an admitted job, or where a waiting job reserves room:
// the level and its domains ("" when the server sends no placement).
function placementText(d) {
  const p = d.placement;
  if (!p || !p.level) return "";
  const where = p.level + (p.domains && p.domains.length ? ": " + p.domains.join(", ") : "");
  return (d.phase === "Waiting" || d.phase === "Preempting" ? "reserved: " : "") + where;
}

// localityText is how many of the job's workers the plan puts near a PS.
function localityText(d) {
  const p = d.placement;
  if (!p || !p.workers) return "";
  return p.nearPSDomain + "/" + p.workers + " workers near a PS, " + p.nearPSNode + " on its node";
}

function placementCell(d, show) {
  if (!show) return null;
  return el("td", { class: "placement" },
    el("span", { "data-field": "placement" }, placementText(d)),
    el("span", { class: "locality", "data-field": "locality" }, localityText(d)));
}

function jobCell(d) {
  const swatch = el("span", { class: "swatch" });
  swatch.style.backgroundColor = jobColour(d.job);
  return el("td", { class: "job", title: d.reason || "" }, swatch, el("span", { "data-field": "job" }, d.job));
}

function queueRow(d, showPlacement) {
  return el("tr", { "data-job": d.job },
    el("td", { "data-field": "position" }, d.position),
    jobCell(d),
    el("td", {}, phase(d)),
    el("td", { "data-field": "p" }, bar(d.p, "p")),
    ...TERMS.map((t) => el("td", { "data-field": "term-" + t }, bar(d.terms[t], "term"))),
    el("td", {}, gang(d)),
    placementCell(d, showPlacement),
    waitsFor(d));
}

function neverRow(d) {
  return el("tr", { "data-job": d.job },
    jobCell(d),
    el("td", { "data-field": "p" }, bar(d.p, "p")),
    el("td", {}, gang(d)),
    el("td", { class: "waits", title: d.reason || "" }, el("span", { "data-field": "waits" }, (d.wait || d.reason || "").trim())));
}

function runningRow(d) {
  return el("tr", { "data-job": d.job },
    jobCell(d),
    el("td", { "data-field": "p" }, bar(d.p, "p")),
    el("td", {}, gang(d)));
}

function fillTable(id, rows) {
  document.querySelector("#" + id + " tbody").replaceChildren(...rows);
  document.getElementById(id).hidden = rows.length === 0;
  document.getElementById(id + "-empty").hidden = rows.length > 0;
  document.getElementById(id + "-count").textContent = "(" + rows.length + ")";
}

function resourceBar(node, name, unit, scale) {
  const cap = (node.capacity || {})[name];
  if (!cap) return null;
  const free = (node.free || {})[name] || 0;
  const used = Math.max(cap - free, 0);
  const fill = el("span", { class: "fill" });
  fill.style.width = Math.min(used / cap * 100, 100).toFixed(1) + "%";
  const fmt = (x) => String(Math.round(x / scale * 10) / 10);
  return el("div", { class: "res", "data-resource": name },
    el("span", { class: "label" }, unit), el("span", { class: "track" }, fill), el("span", { class: "num" }, fmt(used) + "/" + fmt(cap)));
}

function podChip(p) {
  const chip = el("span", {
    class: "pod " + p.state, "data-pod": p.pod, "data-job": p.job, "data-state": p.state, "data-role": p.role,
    title: p.pod + " (" + p.job + ", " + p.role + ", " + p.state + ")",
  }, p.pod.slice(p.pod.indexOf("/") + 1));
  chip.style.borderColor = jobColour(p.job);
  if (p.state === "bound") chip.style.backgroundColor = jobColour(p.job);
  return chip;
}

function nodeBox(n) {
  return el("div", { class: "node", "data-node": n.name },
    el("div", { class: "name" }, n.name),
    resourceBar(n, "cpu", "cpu", 1000),
    resourceBar(n, "nvidia.com/gpu", "gpu", 1),
    el("div", { class: "pods" }, ...n.pods.map(podChip)));
}

function renderNodes(report) {
  const boxes = report.domains.map((d) =>
    el("div", { class: "domain", "data-domain": d.name },
      el("h3", {}, d.name === "-" ? "no topology label" : d.name, el("span", { class: "count" }, " " + d.nodes.length + " nodes")),
      el("div", { class: "nodes" }, ...d.nodes.map(nodeBox))));
  document.getElementById("domains").replaceChildren(...boxes);
}

function render(queue, nodes) {
  const jobs = queue.jobs || [];
  const queued = jobs.filter((d) => d.position > 0);
  // Older servers send no placement: then the column stays hidden.
  const showPlacement = queued.some((d) => d.placement !== undefined);
  document.getElementById("placement-head").hidden = !showPlacement;
  fillTable("queue", queued.map((d) => queueRow(d, showPlacement)));
  fillTable("never", jobs.filter((d) => d.phase === "Unschedulable").map(neverRow));
  fillTable("running", jobs.filter((d) => d.phase === "Running").map(runningRow));
  renderNodes(nodes);
  renders++;
  document.body.dataset.renders = String(renders);
  document.body.dataset.computed = queue.computed;
}

async function getJSON(path) {
  const resp = await fetch(path, { cache: "no-store", headers: { Accept: "application/json" } });
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(path + ": " + resp.status + (body.error ? " " + body.error : ""));
  return body;
}

function setStatus(state, text) {
  const s = document.getElementById("status");
  s.dataset.state = state;
  s.textContent = text;
}

async function refresh() {
  try {
    const [queue, nodes] = await Promise.all([getJSON("debug/queue"), getJSON("debug/nodes")]);
    render(queue, nodes);
    lastGood = new Date(queue.computed);
    setStatus("ok", "queue computed " + lastGood.toLocaleTimeString());
  } catch (err) {
    setStatus("error", "could not refresh: " + err.message + (lastGood ? " (showing the queue of " + lastGood.toLocaleTimeString() + ")" : ""));
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

document.getElementById("interval").textContent = String(REFRESH_MS / 1000);
refresh();
