// The anarchon status page: polls api/status and renders it. No build step, no network.
"use strict";
(function () {
  const config = JSON.parse(document.body.dataset.config);
  const tokenBox = document.getElementById("token-box");
  const tokenInput = document.getElementById("token");
  if (config.tokenRequired && (config.writable || config.errorsNeedToken)) {
    tokenBox.hidden = false;
    tokenInput.value = sessionStorage.getItem("anarchon-token") || "";
    tokenInput.addEventListener("change", () => sessionStorage.setItem("anarchon-token", tokenInput.value));
  }

  function iso(ms) {
    if (ms === null || ms === undefined) return "-";
    return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value; else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child instanceof Node ? child : String(child));
    return node;
  }
  function badge(text, kind) { return el("span", { class: "badge " + (kind || text) }, text); }
  function showError(message) {
    const box = document.getElementById("error");
    box.hidden = !message;
    box.textContent = message || "";
  }

  function authHeaders() {
    const headers = {};
    if (config.tokenRequired && tokenInput.value) headers.Authorization = "Bearer " + tokenInput.value;
    return headers;
  }

  async function act(job, action) {
    const headers = {};
    if (config.tokenRequired) headers.Authorization = "Bearer " + tokenInput.value;
    const response = await fetch("api/jobs/" + encodeURIComponent(job) + "/" + action, { method: "POST", headers });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      showError(action + " " + job + ": " + ((body.error && body.error.code + ": " + body.error.message) || response.status));
      return;
    }
    showError("");
    await refresh();
  }

  function timeline(runs) {
    const line = el("div", { class: "timeline" });
    for (const run of runs.slice().reverse()) {
      const kind = run.status + (run.attempt > 1 ? " retry" : "");
      const title = iso(run.slot) + " " + run.status + (run.reason ? " (" + run.reason + ")" : "") +
        " attempt " + run.attempt + " on " + run.instance_id +
        (run.duration_ms !== null ? ", " + run.duration_ms + " ms" : "") + (run.error ? ": " + run.error : "");
      line.append(el("span", { class: "run " + kind, title, "data-status": run.status, "data-attempt": run.attempt, "data-slot": run.slot }));
    }
    return line;
  }

  function jobRow(job) {
    const last = job.last_run;
    const lastCell = last
      ? el("td", {}, badge(last.status), " ", el("code", {}, last.instance_id), last.attempt > 1 ? " attempt " + last.attempt : "")
      : el("td", {}, "-");
    const state = el("td", {}, job.paused ? badge("paused") : badge("active"));
    if (Object.keys(job.drift || {}).length) state.append(" ", badge("drift"));
    const instances = (job.instances || []).map((i) => i.instance_id).join(", ") || "-";
    const candidates = (job.candidates || []).join(", ") || "-";
    const actions = el("td", { class: "actions" });
    if (config.writable) {
      const action = job.paused ? "resume" : "pause";
      const button = el("button", { type: "button", "data-job": job.job, "data-action": action }, action);
      button.addEventListener("click", () => act(job.job, action));
      actions.append(button);
    }
    return el("tr", { "data-job": job.job },
      el("td", {}, el("strong", {}, job.job)),
      el("td", { class: "mono" }, job.schedule || "-"),
      el("td", { class: "mono" }, iso(job.next_slot)),
      lastCell,
      el("td", {}, job.live_leases),
      el("td", { class: "mono instances" }, instances),
      el("td", { class: "mono candidates" }, candidates),
      state,
      el("td", {}, timeline(job.runs || [])),
      actions);
  }

  function leaseRow(lease) {
    return el("tr", { "data-job": lease.job },
      el("td", {}, lease.job), el("td", { class: "mono" }, iso(lease.slot)), el("td", {}, lease.attempt),
      el("td", { class: "mono" }, lease.runner), el("td", { class: "mono" }, iso(lease.lease_expires_at)),
      el("td", {}, lease.live ? badge("live", "ok") : badge("expired", "skipped")));
  }

  function seconds(ms) { return (ms / 1000).toFixed(1) + " s"; }
  function memberRow(member, now) {
    return el("tr", { "data-member": member.instance_id },
      el("td", { class: "mono" }, member.instance_id), el("td", {}, member.k === null ? "-" : member.k),
      el("td", { class: "mono" }, member.group), el("td", {}, seconds(Math.max(0, now - member.seen_at)) + " ago"),
      el("td", {}, seconds(Math.max(0, member.expires_at - now))),
      el("td", {}, member.candidate_of === null ? "-" : member.candidate_of + " job(s)"));
  }
  function memberRows(members, now) {
    if (members === null || members === undefined) {
      return [el("tr", {}, el("td", { colspan: 6 }, "this store keeps no membership records: every instance claims every job-slot"))];
    }
    if (!members.length) {
      return [el("tr", {}, el("td", { colspan: 6 }, "no live members: no instance runs, or they run with candidates=None"))];
    }
    return members.map((member) => memberRow(member, now));
  }

  let page = 1;
  let pages = 1;
  const pager = document.getElementById("pager");
  function turn(step) {
    page = Math.min(Math.max(1, page + step), pages);
    refresh();
  }
  document.getElementById("prev").addEventListener("click", () => turn(-1));
  document.getElementById("next").addEventListener("click", () => turn(1));

  let readFailed = false;
  async function refresh() {
    try {
      const query = "?page=" + page + "&per_page=" + config.perPage;
      const response = await fetch("api/status" + query, { headers: authHeaders() });
      const body = await response.json();
      if (!response.ok) throw new Error(body.error.code + ": " + body.error.message);
      pages = body.pages;
      if (page > pages) { page = pages; return refresh(); }
      pager.hidden = pages <= 1;
      document.getElementById("page").textContent =
        "page " + body.page + " of " + body.pages + " (" + body.total + " jobs)";
      document.getElementById("prev").disabled = body.page <= 1;
      document.getElementById("next").disabled = body.page >= body.pages;
      document.querySelector("#jobs tbody").replaceChildren(
        ...(body.jobs.length ? body.jobs.map(jobRow) : [el("tr", {}, el("td", { colspan: 10 }, "no instance declares a job yet"))]));
      const leases = body.jobs.flatMap((job) => job.leases);
      document.querySelector("#leases tbody").replaceChildren(
        ...(leases.length ? leases.map(leaseRow) : [el("tr", {}, el("td", { colspan: 6 }, "no active leases"))]));
      document.querySelector("#members tbody").replaceChildren(...memberRows(body.members, body.now));
      document.getElementById("updated").textContent = "store time " + iso(body.now);
      document.body.dataset.loaded = "true";
      if (readFailed) showError("");
      readFailed = false;
    } catch (error) {
      readFailed = true;
      showError("cannot read the status: " + error.message);
    }
  }

  refresh();
  setInterval(refresh, config.refreshMs);
})();
