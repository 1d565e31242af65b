// Poll the re-run's status fragment every second until the server says its state can no longer
// change by itself (header X-Rerun-Poll: 0, set by frontend.views.rerun_status): it ended, or its
// worker stopped reporting and only the reaper will close it.
// A file, not an inline script: the Content-Security-Policy allows scripts from the site only.
(function () {
  var box = document.getElementById("rerun-status");
  if (box.dataset.poll !== "1") return;
  var timer = setInterval(function () {
    fetch(box.dataset.url, {headers: {"Accept": "text/html"}}).then(function (response) {
      var more = response.headers.get("X-Rerun-Poll") === "1";
      return response.text().then(function (html) {
        box.innerHTML = html;
        if (!more) clearInterval(timer);
      });
    });
  }, 1000);
})();
