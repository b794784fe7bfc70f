// Live progress of bulk operations: each [data-bulk-poll] element is refreshed from its data-url,
// every second while an operation in it is unfinished, every 10 seconds otherwise.
(function () {
  "use strict";
  function active(el) {
    return el.querySelector('[data-finished="0"], [data-active="1"]') !== null;
  }
  function poll(el) {
    const next = function () { setTimeout(function () { poll(el); }, active(el) ? 1000 : 10000); };
    fetch(el.dataset.url, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) { if (html !== null) { el.innerHTML = html; } })
      .catch(function () {})
      .finally(next);
  }
  document.querySelectorAll("[data-bulk-poll]").forEach(function (el) {
    setTimeout(function () { poll(el); }, active(el) ? 1000 : 10000);
  });
})();
