// The trajectory list: rows embedded in the page as JSON, filtered in the
// browser (no server, works from file://). The URL hash holds the filters
// (#reason=score&room=room-1), so the report can link to a filtered list.
(function () {
  var rows = JSON.parse(document.getElementById("rows").textContent), SHOWN = 2000;
  var keys = ["policy", "room", "purpose", "status", "reason"];
  var body = document.querySelector("#list tbody"), count = document.getElementById("count");
  function el(id) { return document.getElementById("f-" + id); }
  keys.forEach(function (k) {
    var values = Array.from(new Set(rows.map(function (r) { return r[k]; }))).sort();
    values.forEach(function (v) {
      var o = document.createElement("option");
      o.value = v; o.textContent = v;
      el(k).appendChild(o);
    });
  });
  function fromHash() {
    var h = new URLSearchParams(location.hash.slice(1));
    keys.concat(["min", "max"]).forEach(function (k) { if (h.has(k)) el(k).value = h.get(k); });
  }
  function esc(v) {
    return String(v).replace(/[&<>"]/g, function (c) { return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]; });
  }
  function pct(v) { return v === null ? "–" : (100 * v).toFixed(1) + "%"; }
  function render() {
    var f = {}, h = new URLSearchParams();
    keys.concat(["min", "max"]).forEach(function (k) { f[k] = el(k).value; if (f[k]) h.set(k, f[k]); });
    var lo = f.min === "" ? -Infinity : +f.min / 100, hi = f.max === "" ? Infinity : +f.max / 100;
    var shown = rows.filter(function (r) {
      for (var i = 0; i < keys.length; i++) if (f[keys[i]] && r[keys[i]] !== f[keys[i]]) return false;
      var s = r.score === null ? -1 : r.score;
      return s >= lo && s <= hi;
    });
    // a run of many thousand trajectories: the table holds the first SHOWN matches, the count says so
    var html = shown.slice(0, SHOWN).map(function (r) {
      var id = r.href ? '<a href="' + esc(r.href) + '">' + esc(r.id) + "</a>" : esc(r.id);
      return "<tr data-reason=\"" + esc(r.reason) + "\"><td>" + id + "</td><td>" + esc(r.policy) + "</td><td>" +
        esc(r.room) + "</td><td>" + esc(r.purpose) + "</td><td>" + esc(r.status) + "</td><td class=num>" +
        pct(r.score) + "</td><td class=num>" + pct(r.coverage) + "</td><td class=num>" + r.cost.toFixed(4) +
        "</td><td>" + esc(r.reason) + "</td></tr>";
    }).join("");
    body.innerHTML = html;
    count.textContent = shown.length + " of " + rows.length + " trajectories" +
      (shown.length > SHOWN ? " (the first " + SHOWN + " listed: narrow the filters)" : "");
    history.replaceState(null, "", "#" + h.toString());
  }
  fromHash();
  keys.concat(["min", "max"]).forEach(function (k) { el(k).addEventListener("input", render); });
  render();
})();
