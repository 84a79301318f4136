// The dashboard's only script: a job page's live event view. Each SSE
// `line` event carries a line the server rendered as `paddock run` shows
// it; the job wrote that text, so it is set as text, never as markup.
"use strict";
(function () {
  var list = document.getElementById("events");
  var live = document.getElementById("live");
  if (!list || !window.EventSource) {
    return;
  }
  var source = new EventSource(list.getAttribute("data-stream"));
  source.addEventListener("open", function () {
    live.textContent = "live";
  });
  source.addEventListener("line", function (e) {
    var data = JSON.parse(e.data);
    var item = document.createElement("li");
    item.textContent = data.line;
    item.setAttribute("data-seq", String(data.seq));
    item.setAttribute("data-kind", data.kind);
    list.appendChild(item);
  });
  source.addEventListener("end", function (e) {
    var data = JSON.parse(e.data);
    source.close();
    live.textContent = "ended";
    var cancel = document.getElementById("cancel");
    if (cancel) {
      cancel.remove();
    }
    var status = document.getElementById("job-status");
    if (status) {
      status.textContent = data.status;
      status.className = "status " + data.status;
    }
  });
  source.addEventListener("error", function () {
    if (source.readyState === EventSource.CLOSED) {
      live.textContent = "disconnected";
    } else {
      live.textContent = "reconnecting…";
    }
  });
})();
