// gpuwatch live page: polls /api/v1/ and redraws. No library; every value
// goes into the page as text, never as HTML.
"use strict";
(function () {
  const SVGNS = "http://www.w3.org/2000/svg";
  let intervalMs = 5000;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c);
    return e;
  }
  const na = "n/a";
  const pct = (v) => (v == null ? na : (v * 100).toFixed(0) + " %");
  function bytes(v) {
    if (v == null) return na;
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return v.toFixed(i ? 1 : 0) + " " + units[i];
  }
  const num = (v, unit, digits) => (v == null ? na : v.toFixed(digits || 0) + " " + unit);
  const mhz = (v) => (v == null ? na : (v / 1e6).toFixed(0) + " MHz");

  // chart draws values (nulls are gaps) against their times as an SVG
  // line scaled to [0, max]; a gap of more than one bucket breaks the line.
  function chart(label, times, values, max, bucketMs) {
    const svg = document.createElementNS(SVGNS, "svg");
    svg.setAttribute("class", "chart");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", label);
    svg.setAttribute("viewBox", "0 0 100 100");
    svg.setAttribute("preserveAspectRatio", "none");
    const title = document.createElementNS(SVGNS, "title");
    title.textContent = label;
    svg.append(title);
    const t0 = times[0], span = times[times.length - 1] - t0;
    let points = 0, seg = [], prev = null;
    const flush = () => {
      if (seg.length) {
        const pl = document.createElementNS(SVGNS, "polyline");
        pl.setAttribute("points", seg.join(" "));
        svg.append(pl);
        seg = [];
      }
    };
    values.forEach((v, i) => {
      if (v == null || (prev != null && times[i] - prev > 1.5 * bucketMs)) flush();
      prev = times[i];
      if (v == null) return;
      const x = span > 0 ? ((times[i] - t0) / span) * 100 : 100;
      const y = 100 - Math.min(1, Math.max(0, v / (max || 1))) * 98 - 1;
      seg.push(x.toFixed(2) + "," + y.toFixed(2));
      points++;
    });
    flush();
    svg.dataset.points = String(points);
    if (times.length) { svg.dataset.first = String(t0); svg.dataset.last = String(times[times.length - 1]); }
    return svg;
  }

  // history is the charts' data: the whole of /api/v1/history once, then
  // merged with what changed (?since=), so an open page fetches a few
  // points per interval rather than the whole window.
  let history = null;
  const gpuColumns = ["utilization_gpu", "memory_used_bytes", "power_watts", "temperature_celsius"];
  const ownerColumns = ["memory_used_bytes", "sm_utilization"];
  const ownerKey = (o) => o.kind + "\u0000" + o.name;

  // mergeSeries replaces old's points from upd's first time on with upd's
  // (the first is the bucket that grew), then drops those before cutoff.
  function mergeSeries(old, upd, columns, cutoff) {
    if (old && upd.time_ms.length) {
      const first = upd.time_ms[0];
      let k = old.time_ms.length;
      while (k > 0 && old.time_ms[k - 1] >= first) k--;
      old.time_ms.splice(k, Infinity, ...upd.time_ms);
      for (const c of columns) old[c].splice(k, Infinity, ...upd[c]);
    }
    const s = old || upd;
    let drop = 0;
    while (drop < s.time_ms.length && s.time_ms[drop] <= cutoff) drop++;
    if (drop) {
      s.time_ms.splice(0, drop);
      for (const c of columns) s[c].splice(0, drop);
    }
    return s;
  }

  function mergeHistory(doc) {
    if (doc.since_ms == null || history == null || doc.bucket_seconds !== history.bucket_seconds) {
      // A gpuwatch restarted with other flags answers in other buckets:
      // show what came, and load the whole history at the next poll.
      history = doc;
      if (doc.since_ms != null) delete history.newest_ms;
      return;
    }
    const cutoff = doc.newest_ms - doc.max_samples * doc.interval_seconds * 1000;
    const gpus = new Map(history.gpus.map((g) => [g.index, g]));
    const owners = new Map(history.owners.map((o) => [ownerKey(o), o]));
    doc.gpus = doc.gpus.map((g) => mergeSeries(gpus.get(g.index), g, gpuColumns, cutoff));
    doc.owners = doc.owners.map((o) => mergeSeries(owners.get(ownerKey(o)), o, ownerColumns, cutoff));
    history = doc;
  }

  function historyPath() {
    return "/api/v1/history" + (history && history.newest_ms != null ? "?since=" + history.newest_ms : "");
  }

  // spanText says how much time a history covers: "last 12 min".
  function spanText(times) {
    if (times.length < 2) return "collecting…";
    const s = (times[times.length - 1] - times[0]) / 1000;
    return "last " + (s < 120 ? s.toFixed(0) + " s" : (s / 60).toFixed(0) + " min");
  }
  const figure = (caption, svg) => el("figure", { class: "chart-fig" }, el("figcaption", {}, caption), svg);

  // holder names the workload of an allocation: "job 4225 of alice",
  // "pod inference/vllm-0".
  function holder(a) {
    if (a.slurm) return "job " + a.slurm.job_id + (a.slurm.user ? " of " + a.slurm.user : "");
    if (a.pod) return "pod " + a.pod.namespace + "/" + a.pod.name;
    return "a workload";
  }

  // allocationLine says who holds the GPU (or a MIG instance of it), and
  // that nothing runs there when that is so.
  function allocationLine(a) {
    const where = a.gpu_instance_id == null ? "" : " (MIG GI " + a.gpu_instance_id + ")";
    return el("p", { class: "alloc" + (a.idle ? " idle" : "") }, (a.idle ? "Idle, held by " : "Held by ") + holder(a) + where);
  }

  function gpuCard(d, hist, allocs) {
    const card = el("article", { class: "card" + (d.up ? "" : " down"), "data-gpu": String(d.index), "aria-labelledby": "gpu-" + d.index });
    const state = el("span", { class: "state " + (d.up ? "up" : "down") });
    state.textContent = d.up ? "up" : "down";
    const h = el("h3", { id: "gpu-" + d.index }, "GPU " + d.index, state);
    card.append(h, el("p", { class: "name" }, (d.name || "") + (d.uuid ? " · " + d.uuid : "")));
    card.append(...allocs.map(allocationLine));
    if (!d.up) {
      card.append(el("p", {}, "Down: " + (d.down_reason || "no answer")));
      return card;
    }
    const dl = el("dl");
    const row = (k, v, cls) => { dl.append(el("dt", {}, k)); const dd = el("dd", cls ? { class: cls } : {}, v); dl.append(dd); };
    row("Utilization", pct(d.utilization_gpu));
    row("Memory", d.memory_used_bytes == null ? na : bytes(d.memory_used_bytes) + " / " + bytes(d.memory_total_bytes));
    row("Temperature", num(d.temperature_celsius, "°C"));
    row("Power", num(d.power_watts, "W") + (d.power_limit_watts == null ? "" : " / " + num(d.power_limit_watts, "W")));
    for (const c of d.clocks || []) {
      if (c.type === "sm" || c.type === "memory") row("Clock " + c.type, mhz(c.current_hz) + (c.max_hz == null ? "" : " / " + mhz(c.max_hz)));
    }
    row("Throttle", d.throttle_reasons.length ? d.throttle_reasons.join(", ") : "none", d.throttle_reasons.length ? "throttle" : "");
    const hl = d.health || {};
    const health = [];
    if (hl.xid_events) health.push(hl.xid_events + " XID (last " + hl.xid_last_code + ")");
    if (hl.ecc_volatile_uncorrected) health.push(hl.ecc_volatile_uncorrected + " uncorrected ECC");
    if (hl.remapped_rows_uncorrectable) health.push(hl.remapped_rows_uncorrectable + (hl.remapped_rows_uncorrectable === 1 ? " remapped row" : " remapped rows"));
    if (hl.remapped_rows_pending) health.push("row remap pending");
    if (hl.remapped_rows_failure) health.push("row remap failed");
    row("Health", health.length ? health.join(", ") : "ok", health.length ? "throttle" : "");
    card.append(dl);
    if (hist) {
      const span = spanText(hist.time_ms);
      const bucketMs = history.bucket_seconds * 1000;
      card.append(figure("Utilization, " + span, chart("GPU " + d.index + " utilization, " + span, hist.time_ms, hist.utilization_gpu, 1, bucketMs)));
      card.append(figure("Memory, " + span, chart("GPU " + d.index + " memory used, " + span, hist.time_ms, hist.memory_used_bytes, d.memory_total_bytes, bucketMs)));
    }
    if (d.mig_instances && d.mig_instances.length) {
      const ul = el("ul");
      for (const m of d.mig_instances) {
        ul.append(el("li", { class: "mig-instance" }, m.profile + " (GI " + m.gpu_instance_id + ", CI " + m.compute_instance_id + "): " +
          bytes(m.memory_used_bytes) + " / " + bytes(m.memory_total_bytes) + (m.sm_active == null ? "" : ", SM " + pct(m.sm_active))));
      }
      card.append(el("div", { class: "mig" }, "MIG instances", ul));
    }
    return card;
  }

  function processRow(p) {
    const c = p.container || {}, pod = p.pod || {}, job = p.slurm || {};
    const td = (v, cls) => el("td", cls ? { class: cls } : {}, v || "-");
    return el("tr", {},
      td(String(p.gpu) + (p.mig_uuid ? " (MIG " + p.gpu_instance_id + "/" + p.compute_instance_id + ")" : "")),
      td(String(p.pid), "num"), td(p.user || (p.uid ? "uid " + p.uid : "")),
      td(c.name), td(c.compose_service ? c.compose_project + "/" + c.compose_service : ""),
      td(pod.name ? pod.namespace + "/" + pod.name : ""), td(job.job_id ? job.job_id + (job.user ? " (" + job.user + ")" : "") : ""),
      td(bytes(p.used_memory_bytes), "num"), td(pct(p.sm_utilization), "num"), td(p.command));
  }

  function ownerCard(o) {
    const maxMem = Math.max(1, ...o.memory_used_bytes.filter((v) => v != null));
    const last = o.memory_used_bytes[o.memory_used_bytes.length - 1];
    return el("div", { class: "owner" },
      el("strong", {}, o.kind.replace("_", " ") + " " + o.name), " — " + bytes(last),
      chart("GPU memory of " + o.kind + " " + o.name + ", " + spanText(o.time_ms), o.time_ms, o.memory_used_bytes, maxMem, history.bucket_seconds * 1000));
  }

  async function getJSON(path) {
    const r = await fetch(path, { cache: "no-store" });
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }

  async function refresh() {
    const status = document.getElementById("status");
    try {
      const [snap, procs, hist] = await Promise.all([getJSON("/api/v1/snapshot"), getJSON("/api/v1/processes"), getJSON(historyPath())]);
      intervalMs = Math.max(500, snap.interval_seconds * 1000);
      mergeHistory(hist);
      const byGPU = new Map(history.gpus.map((g) => [g.index, g]));
      const allocs = snap.allocations || [];
      document.getElementById("gpus").replaceChildren(...snap.devices.map((d) =>
        gpuCard(d, byGPU.get(d.index), allocs.filter((a) => a.gpu_uuid ? a.gpu_uuid === d.uuid : a.gpu === d.index))));
      document.querySelector("#processes tbody").replaceChildren(...procs.processes.map(processRow));
      document.getElementById("owners").replaceChildren(...history.owners.map(ownerCard));
      const up = snap.devices.filter((d) => d.up).length;
      status.className = snap.error ? "error" : "";
      status.textContent = (snap.error ? "Latest collection failed: " + snap.error + ". " : "") +
        up + " of " + snap.devices.length + " GPUs up, " + procs.processes.length + " processes · " +
        (snap.clock === "simulated" ? "simulated time " : "") + new Date(snap.time).toLocaleString();
    } catch (e) {
      status.className = "error";
      status.textContent = "Cannot reach gpuwatch: " + e.message;
    }
    setTimeout(refresh, intervalMs);
  }
  refresh();
})();
