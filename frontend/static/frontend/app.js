// LakeUI's little bit of interactivity: live job progress, and the table page's data preview.
(function () {
  "use strict";

  function pollJob(wrap) {
    var url = wrap.getAttribute("data-job-status");
    var reloadWhenDone = wrap.hasAttribute("data-reload");
    var timer = null;
    function show(state) {
      var bar = wrap.querySelector("progress");
      bar.value = state.progress;
      bar.textContent = state.progress + "%";
      var status = wrap.querySelector('[data-field="status"]');
      status.textContent = state.status;
      status.className = "job-state status-" + state.status;
      wrap.querySelector('[data-field="percent"]').textContent = state.progress + "%";
      wrap.querySelector('[data-field="message"]').textContent = state.message || "";
    }
    function tick() {
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (state) {
          if (!state) { clearInterval(timer); return; }
          show(state);
          if (state.finished) {
            clearInterval(timer);
            wrap.setAttribute("data-finished", "1");
            if (reloadWhenDone) { window.location.reload(); }
          }
        })
        .catch(function () { clearInterval(timer); });
    }
    timer = setInterval(tick, 1000);
  }

  // A read a worker answers comes back at once naming its job ([data-read-again]): read again until it is there.
  var READ_AGAIN_MS = 1000;

  function loadRows(box, url, fragmentLinks, again) {
    box.setAttribute("aria-busy", "true");
    if (!again) { box.innerHTML = '<p class="muted">Reading rows…</p>'; }
    fetch(url, { credentials: "same-origin" })
      .then(function (response) { return response.text(); })
      .then(function (html) {
        box.innerHTML = html;
        if (box.querySelector("[data-read-again]")) {
          setTimeout(function () { loadRows(box, url, fragmentLinks, true); }, READ_AGAIN_MS);
          return;
        }
        box.removeAttribute("aria-busy");
        box.querySelectorAll("a[data-rows-page]").forEach(function (link) {
          link.addEventListener("click", function (event) {
            event.preventDefault();
            var href = link.getAttribute("href");
            loadRows(box, fragmentLinks ? href : href + "&fragment=1", fragmentLinks);
          });
        });
      })
      .catch(function () {
        box.removeAttribute("aria-busy");
        box.innerHTML = '<p class="msg msg-error" role="alert">The rows could not be read.</p>';
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    // A whole page whose read a worker is making: the page again once it has.
    if (document.querySelector("[data-read-again]")) {
      setTimeout(function () { window.location.reload(); }, READ_AGAIN_MS);
    }
    // At most MAX_POLLED bars poll at once (a long list of queued jobs must not flood the server).
    var MAX_POLLED = 10;
    var polled = 0;
    document.querySelectorAll("[data-job-status]").forEach(function (wrap) {
      if (wrap.getAttribute("data-finished") !== "1" && polled < MAX_POLLED) { polled += 1; pollJob(wrap); }
    });
    // Changed rows of a table: read when its <details> is first opened (a page with many tables stays fast).
    document.querySelectorAll("details[data-rows-url]").forEach(function (details) {
      function open() {
        if (details.open && !details.getAttribute("data-loaded")) {
          details.setAttribute("data-loaded", "1");
          loadRows(details.querySelector(".rows-box"), details.getAttribute("data-rows-url"), true);
        }
      }
      details.addEventListener("toggle", open);
      open();
    });
    var rows = document.getElementById("rows");
    if (rows && rows.getAttribute("data-fragment")) { loadRows(rows, rows.getAttribute("data-fragment")); }
  });
})();
