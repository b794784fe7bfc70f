// A run's streams, live: follow the run's Server-Sent Events (every stream) and show, per stream
// and step, the latest attempt's text as it is written. A chunk with seq 0 starts its step's text
// over (a retry, a rerun after a crash), so the page never shows a mix of two attempts. The
// browser's EventSource reconnects on its own and resumes after the last id it saw
// (Last-Event-ID); `end` says the run finished and every chunk was sent.
(function () {
  "use strict";
  const root = document.querySelector("[data-run-streams]");
  if (!root) return;
  const list = root.querySelector("[data-stream-list]");
  const texts = {};  // "stream\u0000step" -> the element showing that step's latest attempt

  function piece(data) {
    return typeof data === "string" ? data : JSON.stringify(data) + "\n";
  }

  function target(chunk) {
    const key = chunk.stream + "\u0000" + chunk.step;
    if (!texts[key]) {
      const block = document.createElement("div");
      block.className = "wf-stream";
      block.dataset.stream = chunk.stream;
      block.dataset.step = chunk.step;
      const head = document.createElement("h3");
      head.textContent = chunk.stream === chunk.step ? chunk.stream : chunk.stream + " (" + chunk.step + ")";
      const attempt = document.createElement("span");
      attempt.className = "wf-stream-attempt";
      head.appendChild(document.createTextNode(" "));
      head.appendChild(attempt);
      const pre = document.createElement("pre");
      pre.dataset.streamText = "";
      block.appendChild(head);
      block.appendChild(pre);
      list.appendChild(block);
      texts[key] = block;
    }
    return texts[key];
  }

  function show(chunk) {
    const block = target(chunk);
    const pre = block.querySelector("pre");
    if (chunk.seq === 0 || block.dataset.attempt !== String(chunk.attempt)) {
      pre.textContent = "";  // a new attempt: its text replaces the last one's
      block.dataset.attempt = String(chunk.attempt);
      block.querySelector(".wf-stream-attempt").textContent = chunk.attempt > 1 ? "attempt " + chunk.attempt : "";
    }
    pre.textContent += piece(chunk.data);
    block.dataset.chunks = String(parseInt(block.dataset.chunks || "0", 10) + 1);
    root.hidden = false;
  }

  const source = new EventSource(root.dataset.sseUrl, { withCredentials: true });
  source.addEventListener("open", function () { root.dataset.connected = "1"; });
  source.addEventListener("chunk", function (message) {
    root.dataset.lastChunk = message.lastEventId;
    show(JSON.parse(message.data));
  });
  source.addEventListener("end", function () {
    root.dataset.ended = "1";
    source.close();
  });
})();
