// pilot serve: live updates over server-sent events. Without JavaScript
// the pages refresh themselves while something runs.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var ev = document.getElementById("evidence");
  if (ev) ev.scrollIntoView({block: "center"});
  var live = document.getElementById("live");
  if (live && live.dataset.live) {
    var es = new EventSource(live.dataset.live);
    es.addEventListener("fragment", function (e) { live.innerHTML = e.data; });
    es.addEventListener("end", function () { es.close(); });
  }
  var log = document.getElementById("log");
  if (log && log.dataset.live) {
    var ls = new EventSource(log.dataset.live);
    ls.addEventListener("log", function (e) {
      var m = JSON.parse(e.data);
      m.lines.forEach(function (l) {
        var span = document.createElement("span");
        span.className = "line " + l.s;
        if (l.s) {
          var i = document.createElement("i");
          i.textContent = l.s;
          span.appendChild(i);
          span.appendChild(document.createTextNode(" "));
        }
        span.appendChild(document.createTextNode(l.t));
        log.appendChild(span);
        if (!l.cut) log.appendChild(document.createTextNode("\n"));
      });
      log.scrollTop = log.scrollHeight;
    });
    ls.addEventListener("status", function (e) {
      var s = document.querySelector("#status .status");
      if (s) s.textContent = JSON.parse(e.data).status;
    });
    // The verdict: the page again, with the evidence marked.
    ls.addEventListener("end", function () { ls.close(); location.reload(); });
  }
});
