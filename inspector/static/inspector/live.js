// A run's page, live: follow ws/runs/<id>/?after=<last event>&changes=1 and, whenever the run
// changes, fetch the page's body again from the server (one rendering, no client templates).
(function () {
  "use strict";
  const root = document.querySelector("[data-live-run]");
  if (!root) return;
  const runId = root.dataset.runId;
  const fragmentUrl = root.dataset.fragmentUrl;
  let after = parseInt(root.dataset.lastEvent || "0", 10);
  let connected = false;
  let pending = null;
  let loading = false;
  let again = false;
  let retryDelay = 500;

  function indicate() {
    root.querySelectorAll("[data-live-indicator]").forEach(function (el) {
      el.classList.toggle("on", connected);
      el.textContent = connected ? "live" : "reconnecting…";
    });
  }

  function keepOpenState() {
    const state = {};
    root.querySelectorAll("details[data-keep]").forEach(function (d) { state[d.dataset.keep] = d.open; });
    return state;
  }

  async function refresh() {
    if (loading) { again = true; return; }
    loading = true;
    try {
      const state = keepOpenState();
      const response = await fetch(fragmentUrl, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } });
      if (response.ok && !response.redirected) {  // a redirect: the session ended (login page)
        const html = await response.text();
        root.innerHTML = html;
        root.querySelectorAll("details[data-keep]").forEach(function (d) {
          if (Object.prototype.hasOwnProperty.call(state, d.dataset.keep)) d.open = state[d.dataset.keep];
        });
        const head = root.querySelector("[data-run-status]");
        if (head) root.dataset.status = head.dataset.runStatus;
        root.dataset.refreshed = String((parseInt(root.dataset.refreshed || "0", 10)) + 1);
        indicate();
      }
    } catch (err) {
      // the socket's next message or reconnect retries
    } finally {
      loading = false;
      if (again) { again = false; schedule(); }
    }
  }

  function schedule() {
    if (pending) return;
    pending = setTimeout(function () { pending = null; refresh(); }, 120);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    // seen: the run as this page was rendered; the socket reports a change only if it differs.
    const seen = root.dataset.seen ? "&seen=" + encodeURIComponent(root.dataset.seen) : "";
    const socket = new WebSocket(scheme + "://" + location.host + "/ws/runs/" + runId + "/?changes=1&after=" + after + seen);
    socket.onopen = function () { connected = true; retryDelay = 500; indicate(); };
    socket.onmessage = function (message) {
      const data = JSON.parse(message.data);
      if (typeof data.id === "number") after = Math.max(after, data.id);
      schedule();
    };
    socket.onclose = function (event) {
      connected = false;
      indicate();
      if (event.code >= 4400 && event.code < 4500) return;  // refused (4403, 4404, 4400): retrying won't help
      setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 10000);
    };
  }

  // While a step runs its bar grows with the clock: redraw now and then (nothing is recorded yet).
  setInterval(function () { if (root.dataset.status === "running") schedule(); }, 3000);
  connect();
})();
