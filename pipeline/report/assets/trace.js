// Full subagent texts on demand: the page holds each call cut to its first
// characters; the full texts sit in sidecar scripts of CHUNK calls each
// (<id>.calls-<k>.js), loaded by a <script> tag so it works from file://
// (fetch() of a local file is refused there).
(function () {
  var cfg = JSON.parse(document.getElementById("page-config").textContent);
  var store = (window.RLM_CALLS = window.RLM_CALLS || {});
  var waiting = {};
  function chunk(k, done) {
    if (store[k]) return done(store[k]);
    if (waiting[k]) return waiting[k].push(done);
    waiting[k] = [done];
    var s = document.createElement("script");
    s.src = cfg.sidecar.replace("{k}", k);
    s.onload = function () { waiting[k].forEach(function (f) { f(store[k]); }); delete waiting[k]; };
    s.onerror = function () { alert("could not load " + s.src); };
    document.head.appendChild(s);
  }
  function call(i, done) {
    chunk(Math.floor(i / cfg.chunk), function (c) { done(c[i]); });
  }
  function cut(text) {
    if (!text) return ["", 0];
    return text.length > cfg.cut ? [text.slice(0, cfg.cut), text.length - cfg.cut] : [text, 0];
  }
  function pre(text, i, field) {
    var p = cut(text), out = document.createElement("div"), el = document.createElement("pre");
    el.textContent = p[0];
    out.appendChild(el);
    if (p[1]) out.appendChild(fullButton(i, field, p[1], el));
    return out;
  }
  function fullButton(i, field, more, el) {
    var b = document.createElement("button");
    b.className = "full";
    b.textContent = "[... " + more.toLocaleString() + " more characters: show all]";
    b.onclick = function () { call(i, function (c) { el.textContent = c[field] || ""; b.remove(); }); };
    return b;
  }
  function firstLine(t) { return (t || "").split("\n").find(function (l) { return l.trim(); }) || ""; }
  function details(i, c) {
    var d = document.createElement("details"), s = document.createElement("summary");
    d.className = "call";
    s.textContent = "#" + i + " · " + c.t[0] + "+" + c.t[1] + " tok · " + c.t[2].toFixed(1) + " s" +
      (c.e ? " · ERROR " : " · ") + firstLine(c.p).slice(0, 110) + " → " + firstLine(c.e || c.r).slice(0, 110);
    d.appendChild(s);
    var h = document.createElement("div"); h.textContent = "prompt"; h.className = "muted"; d.appendChild(h);
    d.appendChild(pre(c.p, i, "p"));
    h = document.createElement("div"); h.textContent = c.e ? "error" : "answer"; h.className = "muted"; d.appendChild(h);
    d.appendChild(pre(c.e || c.r, i, c.e ? "e" : "r"));
    return d;
  }
  document.addEventListener("click", function (ev) {
    var b = ev.target;
    if (b.matches("button.full")) {
      var el = b.previousElementSibling;
      call(+b.dataset.call, function (c) { el.textContent = c[b.dataset.field] || ""; b.remove(); });
    } else if (b.matches("button.more")) {
      var from = +b.dataset.from, to = +b.dataset.to, box = b.parentNode, n = 0;
      b.disabled = true;
      b.textContent = "loading ...";
      for (var k = Math.floor(from / cfg.chunk); k <= Math.floor(to / cfg.chunk); k++) {
        chunk(k, function () {
          if (++n <= Math.floor(to / cfg.chunk) - Math.floor(from / cfg.chunk)) return;
          var frag = document.createDocumentFragment();
          for (var i = from; i <= to; i++) frag.appendChild(details(i, store[Math.floor(i / cfg.chunk)][i]));
          box.replaceChild(frag, b);
        });
      }
    }
  });
})();

// Coverage by folder: [folder, probes, seen by any model, by the root, by a subagent] per folder.
(function () {
  var node = document.getElementById("coverage-data");
  if (!node) return;
  var rows = JSON.parse(node.textContent), canvas = document.getElementById("coverage-strip");
  var ctx = canvas.getContext("2d"), w = canvas.width / rows.length;
  function share(r) { return r[1] ? r[2] / r[1] : 0; }
  rows.forEach(function (r, i) {
    var s = share(r);
    ctx.fillStyle = "hsl(" + Math.round(120 * s) + ", 65%, " + Math.round(88 - 30 * s) + "%)";
    ctx.fillRect(Math.floor(i * w), 0, Math.max(1, Math.ceil(w)), canvas.height);
  });
  var tip = document.getElementById("coverage-tip"), legend = tip.textContent;
  canvas.addEventListener("mousemove", function (ev) {
    var r = rows[Math.min(rows.length - 1, Math.floor((ev.offsetX * canvas.width) / canvas.clientWidth / w))];
    tip.textContent = r[0] + ": " + r[2] + "/" + r[1] + " probes seen (" + (100 * share(r)).toFixed(1) +
      "%); root " + r[3] + ", subagents " + r[4];
  });
  canvas.addEventListener("mouseleave", function () { tip.textContent = legend; });
  var details = document.getElementById("coverage-details");
  details.addEventListener("toggle", function () {
    var table = document.getElementById("coverage-table");
    if (table.rows.length) return;
    var head = table.insertRow();
    ["folder", "probes", "seen (any model)", "share", "seen by the root", "seen by subagents"].forEach(
      function (h) { var th = document.createElement("th"); th.textContent = h; head.appendChild(th); });
    rows.forEach(function (r) {
      var tr = table.insertRow();
      [r[0], r[1], r[2], (100 * share(r)).toFixed(1) + "%", r[3], r[4]].forEach(function (v, j) {
        var td = tr.insertCell(); td.textContent = v; if (j) td.className = "num";
      });
    });
  });
})();
