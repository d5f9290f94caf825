// gpuwatch live page: polls api/v1/ and redraws. No library; every value
// goes into the page as text, never as HTML. Every URL is relative to the
// page, so it works behind a reverse proxy that adds a path prefix.
"use strict";
(function () {
  const SVGNS = "http://www.w3.org/2000/svg";
  let intervalMs = 5000;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) if (c != null) e.append(c);
    return e;
  }
  function svgEl(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
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
  const clock = (ms) => new Date(ms).toLocaleTimeString();

  // hover remembers which chart the pointer is over and where, so the
  // value shown survives the redraw of every interval.
  let hover = null;
  // A redraw replaces the chart under the pointer, and the old one gets no
  // pointerleave: leaving the charts anywhere clears the hover.
  document.addEventListener("pointermove", (e) => {
    if (hover && !(e.target.closest && e.target.closest(".area"))) {
      hover = null;
      for (const x of document.querySelectorAll(".area .tip, .area .cursor")) x.hidden = true;
    }
  });

  // chart draws values (nulls are gaps) against their times: an SVG line
  // scaled to [0, max] under an HTML value axis (max at the top, 0 at the
  // bottom), with the current value in its head and the value under the
  // pointer on hover. A gap of more than one bucket breaks the line.
  function chart(o) {
    const { key, caption, label, times, values, max, fmt, bucketMs } = o;
    const svg = svgEl("svg", { class: "chart", role: "img", "aria-label": label, viewBox: "0 0 100 100", preserveAspectRatio: "none" });
    const title = svgEl("title");
    title.textContent = label;
    svg.append(title);
    for (const y of [1, 50, 99]) svg.append(svgEl("line", { class: "grid", x1: 0, x2: 100, y1: y, y2: y }));
    const t0 = times[0], span = times[times.length - 1] - t0;
    const xOf = (t) => (span > 0 ? ((t - t0) / span) * 100 : 100);
    // The scale's top: the given maximum (100 %, the GPU's memory), else
    // the highest value; with neither the axis says nothing, not "1 B".
    let top = max > 0 ? max : Math.max(0, ...values.filter((v) => v != null));
    const known = top > 0;
    if (!known) top = 1;
    let points = 0, seg = [], prev = null, last = null;
    const flush = () => {
      if (seg.length) svg.append(svgEl("polyline", { points: seg.join(" ") }));
      seg = [];
    };
    values.forEach((v, i) => {
      if (v == null || (prev != null && times[i] - prev > 1.5 * bucketMs)) flush();
      prev = times[i];
      if (v == null) return;
      const y = 100 - Math.min(1, Math.max(0, v / top)) * 98 - 1;
      seg.push(xOf(times[i]).toFixed(2) + "," + y.toFixed(2));
      points++;
      last = v;
    });
    flush();
    const current = values.length ? values[values.length - 1] : null;
    const head = el("div", { class: "chart-head" }, el("span", {}, caption),
      el("span", { class: "current" }, current == null ? "now n/a" : "now " + fmt(current)));
    const tip = el("span", { class: "tip", hidden: "" });
    const cursor = el("span", { class: "cursor", hidden: "" });
    const area = el("div", { class: "area" }, svg, cursor, tip);
    const plot = el("div", { class: "plot" }, area,
      el("span", { class: "axis top" }, known ? fmt(top) : ""), el("span", { class: "axis bottom" }, known ? fmt(0) : ""));
    const showAt = (f) => {
      // The point nearest the pointer that has a value.
      const t = t0 + f * span;
      let best = -1;
      values.forEach((v, i) => { if (v != null && (best < 0 || Math.abs(times[i] - t) < Math.abs(times[best] - t))) best = i; });
      if (best < 0) return;
      const x = xOf(times[best]);
      cursor.style.left = x + "%";
      tip.textContent = clock(times[best]) + ": " + fmt(values[best]);
      tip.style.left = Math.min(x, 60) + "%";
      cursor.hidden = tip.hidden = false;
    };
    area.addEventListener("pointermove", (e) => {
      const r = area.getBoundingClientRect();
      hover = { key, f: Math.min(1, Math.max(0, (e.clientX - r.left) / r.width)) };
      showAt(hover.f);
    });
    area.addEventListener("pointerleave", () => { hover = null; cursor.hidden = tip.hidden = true; });
    if (hover && hover.key === key && times.length) showAt(hover.f);
    const box = el("figure", { class: "chart-fig", "data-chart": key }, head, plot);
    svg.dataset.points = String(points);
    if (known) svg.dataset.max = String(top);
    if (last != null) svg.dataset.lastFraction = String(Math.min(1, last / top));
    if (times.length) { svg.dataset.first = String(t0); svg.dataset.last = String(times[times.length - 1]); }
    return box;
  }

  // history is the charts' data: the whole of api/v1/history once, then
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
    return "api/v1/history" + (history && history.newest_ms != null ? "?since=" + history.newest_ms : "");
  }

  // spanText says how much time a history covers: "last 12 min".
  function spanText(times) {
    if (times.length < 2) return "collecting…";
    const s = (times[times.length - 1] - times[0]) / 1000;
    return "last " + (s < 120 ? s.toFixed(0) + " s" : (s / 60).toFixed(0) + " min");
  }

  // holder names the workload of an allocation: "job 4225 of alice",
  // "pod inference/vllm-0".
  function holder(a) {
    if (a.slurm) return "job " + a.slurm.job_id + (a.slurm.user ? " of " + a.slurm.user : "");
    if (a.pod) return "pod " + a.pod.namespace + "/" + a.pod.name;
    return "a workload";
  }

  // duration says how long ms is, roughly: "45 s", "15 min", "2 h", "3 days".
  function duration(ms) {
    const s = Math.max(0, ms / 1000);
    if (s < 120) return s.toFixed(0) + " s";
    if (s < 7200) return (s / 60).toFixed(0) + " min";
    if (s < 172800) return (s / 3600).toFixed(0) + " h";
    return (s / 86400).toFixed(0) + " days";
  }

  // allocationLine says who holds the GPU (or a MIG instance of it), that
  // nothing runs there when that is so, and since when if the source says
  // (Slurm does, the kubelet does not: then no duration, never a guess).
  function allocationLine(a, now) {
    const where = a.gpu_instance_id == null ? "" : " (MIG GI " + a.gpu_instance_id + ")";
    const start = a.start_time == null ? NaN : Date.parse(a.start_time);
    const held = isNaN(start) || isNaN(now) ? "" : " for " + duration(now - start);
    return el("p", { class: "alloc" + (a.idle ? " idle" : ""), title: isNaN(start) ? "" : "since " + new Date(start).toLocaleString() },
      (a.idle ? "Idle, held by " : "Held by ") + holder(a) + where + held);
  }

  // ownerOf names a process's owner, most specific first after the user:
  // "alice · job 4211 llama-pretrain", "carol · pod inference/vllm-0".
  function ownerOf(p) {
    const parts = [p.user || (p.uid ? "uid " + p.uid : "unknown user")];
    const c = p.container || {}, pod = p.pod, job = p.slurm;
    if (job && job.job_id) parts.push("job " + job.job_id + (job.job_name ? " " + job.job_name : ""));
    if (pod && pod.name) parts.push("pod " + pod.namespace + "/" + pod.name);
    else if (c.compose_service) parts.push("compose " + c.compose_project + "/" + c.compose_service);
    else if (c.name) parts.push("container " + c.name);
    return parts.join(" · ");
  }

  function processLine(p) {
    const where = p.mig_uuid ? "GI " + p.gpu_instance_id + " · " : "";
    return el("li", { class: "proc", title: "PID " + p.pid + (p.command ? ", " + p.command : "") },
      el("span", { class: "who-name" }, where + ownerOf(p)),
      el("span", { class: "cmd" }, p.command || ""),
      el("span", { class: "mem", title: "GPU memory of PID " + p.pid + " on GPU " + p.gpu }, bytes(p.used_memory_bytes)));
  }

  // whoBlock is the top of a card: who holds the GPU and what runs there.
  function whoBlock(d, allocs, procs, now) {
    const who = el("div", { class: "who" });
    who.append(...allocs.map((a) => allocationLine(a, now)));
    if (!d.up) {
      who.append(el("p", { class: "none" }, "Processes unknown: the GPU does not answer"));
      return who;
    }
    if (procs.length) {
      who.append(el("ul", { class: "procs", "aria-label": "Processes on GPU " + d.index + ", memory per process" }, ...procs.map(processLine)));
    }
    if (d.processes_unknown) {
      who.append(el("p", { class: "none" }, (procs.length ? "Maybe more processes: " : "Processes unknown: ") +
        "the process list could not be read (" + d.processes_unknown + ")"));
    } else if (!procs.length && !allocs.length) {
      who.append(el("p", { class: "none" }, "Free: no process, no allocation"));
    }
    return who;
  }

  // healthText lists what says the GPU needs attention; "ok" only when
  // the GPU gave readings that say so, "n/a" when it gave none.
  function healthText(hl) {
    const out = [];
    if (hl.xid_events) out.push(hl.xid_events + " XID (last " + hl.xid_last_code + ")");
    if (hl.ecc_volatile_uncorrected) out.push(hl.ecc_volatile_uncorrected + " uncorrected ECC");
    if (hl.remapped_rows_uncorrectable) out.push(hl.remapped_rows_uncorrectable + (hl.remapped_rows_uncorrectable === 1 ? " remapped row" : " remapped rows"));
    if (hl.remapped_rows_pending) out.push("row remap pending");
    if (hl.remapped_rows_failure) out.push("row remap failed");
    if (out.length) return [out.join(", "), true];
    return [Object.keys(hl).length ? "ok" : na, false];
  }

  function gpuCard(d, hist, allocs, procs, now) {
    const card = el("article", { class: "card" + (d.up ? "" : " down"), "data-gpu": String(d.index), "aria-labelledby": "gpu-" + d.index });
    const state = el("span", { class: "state " + (d.up ? "up" : "down") }, d.up ? "up" : "down");
    const name = (d.name || "").replace(/^NVIDIA /, "");
    card.append(el("h3", { id: "gpu-" + d.index, title: d.uuid || "" }, el("span", {}, "GPU " + d.index, el("span", { class: "name" }, name)), state));
    card.append(whoBlock(d, allocs, procs, now));
    // The health judge's verdict: shown only when one is known, never
    // "ok" by default.
    if (d.verdict) {
      card.append(el("p", { class: "verdict verdict-" + d.verdict, title: d.verdict_reason || "" },
        "Verdict: " + d.verdict + (d.verdict_reason ? " \u2014 " + d.verdict_reason : "")));
    }
    if (!d.up) {
      card.append(el("p", {}, "Down: " + (d.down_reason || "no answer")));
      return card;
    }
    const mig = d.mig_mode === "enabled";
    const dl = el("dl", { "aria-label": "Readings of GPU " + d.index });
    const row = (k, v, cls) => dl.append(el("dt", {}, k), el("dd", cls ? { class: cls } : {}, v));
    row("Utilization", d.utilization_gpu == null && mig ? "n/a (MIG mode)" : pct(d.utilization_gpu));
    row("Memory", d.memory_used_bytes == null ? na : bytes(d.memory_used_bytes) + " of " + bytes(d.memory_total_bytes));
    row("Temp · power", num(d.temperature_celsius, "°C") + " · " + num(d.power_watts, "W") + (d.power_limit_watts == null ? "" : " of " + num(d.power_limit_watts, "W")));
    const sm = (d.clocks || []).find((c) => c.type === "sm");
    if (sm) row("SM clock", mhz(sm.current_hz) + (sm.max_hz == null ? "" : " of " + mhz(sm.max_hz)));
    row("Throttle", d.throttle_reasons.length ? d.throttle_reasons.join(", ") : "none", d.throttle_reasons.length ? "throttle" : "");
    const [health, bad] = healthText(d.health || {});
    row("Health", health, bad ? "throttle" : "");
    card.append(dl);
    if (hist) {
      const span = spanText(hist.time_ms);
      const bucketMs = history.bucket_seconds * 1000;
      if (mig && hist.utilization_gpu.every((v) => v == null)) {
        card.append(el("p", { class: "mig-note" }, "MIG mode: NVML reports no whole-GPU utilization; per-instance memory below."));
      } else {
        card.append(chart({ key: "u" + d.index, caption: "Utilization, " + span, label: "GPU " + d.index + " utilization, " + span,
          times: hist.time_ms, values: hist.utilization_gpu, max: 1, fmt: pct, bucketMs }));
      }
      card.append(chart({ key: "m" + d.index, caption: "Memory used, " + span, label: "GPU " + d.index + " memory used, " + span,
        times: hist.time_ms, values: hist.memory_used_bytes, max: d.memory_total_bytes, fmt: bytes, bucketMs }));
    }
    if (d.mig_instances && d.mig_instances.length) {
      const ul = el("ul");
      for (const m of d.mig_instances) {
        const used = m.memory_used_bytes, total = m.memory_total_bytes;
        const bar = el("span", { class: "bar" }, el("span", { style: "width:" + (used == null || !total ? 0 : Math.min(100, (used / total) * 100)).toFixed(1) + "%" }));
        ul.append(el("li", { class: "mig-instance" }, el("span", {}, m.profile + " GI " + m.gpu_instance_id + " CI " + m.compute_instance_id + ": " +
          bytes(used) + " of " + bytes(total) + (m.sm_active == null ? "" : ", SM " + pct(m.sm_active))), bar));
      }
      card.append(el("div", { class: "mig" }, "MIG instances (memory per instance)", ul));
    }
    return card;
  }

  function processRow(p) {
    const c = p.container || {}, pod = p.pod || {}, job = p.slurm || {};
    const td = (label, v, cls) => el("td", Object.assign({ "data-label": label }, cls ? { class: cls } : {}), v || "-");
    return el("tr", {},
      td("GPU", String(p.gpu) + (p.mig_uuid ? " (MIG " + p.gpu_instance_id + "/" + p.compute_instance_id + ")" : "")),
      td("PID", String(p.pid), "num"), td("User", p.user || (p.uid ? "uid " + p.uid : "")),
      td("Container", c.name), td("Compose service", c.compose_service ? c.compose_project + "/" + c.compose_service : ""),
      td("Pod", pod.name ? pod.namespace + "/" + pod.name : ""), td("Slurm job", job.job_id ? job.job_id + (job.user ? " (" + job.user + ")" : "") : ""),
      td("Memory", bytes(p.used_memory_bytes), "num"), td("SM", pct(p.sm_utilization), "num"), td("Command", p.command));
  }

  // ownerCard charts one owner's GPU memory on the scale shared by all
  // owners, so a job using 296 GiB and a user using 3 GiB look different.
  function ownerCard(o, sharedMax) {
    const span = spanText(o.time_ms);
    const name = o.kind.replace("_", " ") + " " + o.name;
    const box = el("div", { class: "owner", "data-owner": o.kind + ":" + o.name }, el("strong", {}, name));
    box.append(chart({ key: "o" + o.kind + ":" + o.name, caption: "Memory, all its GPUs, " + span, label: "GPU memory of " + name + ", summed over its GPUs, " + span,
      times: o.time_ms, values: o.memory_used_bytes, max: sharedMax, fmt: bytes, bucketMs: history.bucket_seconds * 1000 }));
    return box;
  }

  async function getJSON(path) {
    const r = await fetch(path, { cache: "no-store" });
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }

  async function refresh() {
    const status = document.getElementById("status");
    try {
      const [snap, procs, hist] = await Promise.all([getJSON("api/v1/snapshot"), getJSON("api/v1/processes"), getJSON(historyPath())]);
      intervalMs = Math.max(500, snap.interval_seconds * 1000);
      mergeHistory(hist);
      const now = Date.parse(snap.time);
      const byGPU = new Map(history.gpus.map((g) => [g.index, g]));
      const allocs = snap.allocations || [];
      const onGPU = (d) => (x) => (x.gpu_uuid ? x.gpu_uuid === d.uuid : x.gpu === d.index);
      document.getElementById("gpus").replaceChildren(...snap.devices.map((d) =>
        gpuCard(d, byGPU.get(d.index), allocs.filter(onGPU(d)), procs.processes.filter(onGPU(d)), now)));
      document.querySelector("#processes tbody").replaceChildren(...procs.processes.map(processRow));
      let sharedMax = 0;
      for (const o of history.owners) for (const v of o.memory_used_bytes) if (v != null && v > sharedMax) sharedMax = v;
      document.getElementById("owners").replaceChildren(...history.owners.map((o) => ownerCard(o, sharedMax)));
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
