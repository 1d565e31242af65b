// Poll the re-run's status fragment every second until the server says the re-run
// is done (header X-Rerun-Done, set by frontend.views.rerun_status).
// A file, not an inline script: the Content-Security-Policy allows scripts from the site only.
(function () {
  var box = document.getElementById("rerun-status");
  if (box.dataset.done === "1") return;
  var timer = setInterval(function () {
    fetch(box.dataset.url, {headers: {"Accept": "text/html"}}).then(function (response) {
      var done = response.headers.get("X-Rerun-Done") === "1";
      return response.text().then(function (html) {
        box.innerHTML = html;
        if (done) clearInterval(timer);
      });
    });
  }, 1000);
})();
