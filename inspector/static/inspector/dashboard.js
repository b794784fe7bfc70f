// The dashboard, live: ws/runs/ sends {"run": {...}} for each run created or changed; rows are
// updated in place and the figures above are fetched again (at most once a second).
(function () {
  "use strict";
  const table = document.getElementById("wf-runs");
  const stats = document.getElementById("wf-stats");
  if (!table) return;
  const body = table.tBodies[0];
  const runUrl = table.dataset.runUrl;
  const MAX_ROWS = 50;
  let statsTimer = null;
  let retryDelay = 500;

  function indicate(on) {
    document.querySelectorAll("[data-live-indicator]").forEach(function (el) {
      el.classList.toggle("on", on);
      el.textContent = on ? "live" : "reconnecting…";
    });
  }

  function cell(row, text, cls) {
    const td = row.insertCell();
    if (cls) td.className = cls;
    if (text instanceof Node) td.appendChild(text); else td.textContent = text == null ? "—" : String(text);
    return td;
  }

  function badge(status) {
    const span = document.createElement("span");
    span.className = "wf-badge wf-" + status;
    span.textContent = status;
    return span;
  }

  // The labels the run's workflow declares: the title, then the others as chips (_labels.html).
  function labels(run) {
    const span = document.createElement("span");
    const given = run.labels || {};
    if (!given.title && !(given.details || []).length) return span;
    span.className = "wf-labels";
    span.dataset.runLabels = "";
    if (given.title) {
      const title = document.createElement("strong");
      title.dataset.labelTitle = "";
      title.textContent = given.title;
      span.appendChild(title);
    }
    (given.details || []).forEach(function (d) {
      const chip = document.createElement("span");
      chip.className = "wf-chip";
      chip.dataset.label = d.key;
      const key = document.createElement("span");
      key.className = "wf-muted";
      key.textContent = d.key;
      chip.append(key, " " + d.text);
      span.append(" ", chip);
    });
    return span;
  }

  function render(run) {
    const row = document.createElement("tr");
    row.dataset.run = run.id;
    row.dataset.created = run.created_at;
    const link = document.createElement("a");
    link.className = "wf-mono";
    link.href = runUrl.replace("00000000-0000-0000-0000-000000000000", run.id);
    link.textContent = run.id.replaceAll("-", "").slice(-8);  // as short_run_id: the random end
    cell(row, link);
    cell(row, run.workflow);
    cell(row, (run.key || []).join(" / "), "wf-mono");
    cell(row, labels(run));
    cell(row, badge(run.status));
    cell(row, run.current_step || "—");
    cell(row, run.attempts);
    cell(row, (run.created_at || "").slice(11, 19));
    cell(row, run.duration);
    return row;
  }

  function upsert(run) {
    const empty = body.querySelector(".wf-empty");
    if (empty) empty.remove();
    const row = render(run);
    row.classList.add("wf-flash");
    const existing = body.querySelector('tr[data-run="' + run.id + '"]');
    if (existing) { body.replaceChild(row, existing); return; }
    // newest created first
    const rows = Array.from(body.rows);
    const before = rows.find(function (r) { return (r.dataset.created || "") < (run.created_at || ""); });
    body.insertBefore(row, before || null);
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
  }

  function refreshStats() {
    if (!stats || statsTimer) return;
    statsTimer = setTimeout(async function () {
      statsTimer = null;
      try {
        const response = await fetch(stats.dataset.statsUrl, { credentials: "same-origin" });
        if (response.ok && !response.redirected) stats.innerHTML = await response.text();
      } catch (err) { /* next change retries */ }
    }, 1000);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(scheme + "://" + location.host + "/ws/runs/");
    socket.onopen = function () { indicate(true); retryDelay = 500; };
    socket.onmessage = function (message) {
      const data = JSON.parse(message.data);
      if (data.run) { upsert(data.run); refreshStats(); }
    };
    socket.onclose = function (event) {
      indicate(false);
      if (event.code >= 4400 && event.code < 4500) return;  // refused (4403, 4404, 4400): retrying won't help
      setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 10000);
    };
  }
  connect();
  // Runners come and go without a run changing: re-read the figures and the runners now and then.
  setInterval(refreshStats, 15000);
})();
