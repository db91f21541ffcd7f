(function () {
  "use strict";
  // The charts and tables are complete without this script: it only adds hover highlighting,
  // quicker tooltips, model filtering, table sorting and the failure filter. It never writes HTML:
  // only classes, attributes and textContent.
  var doc = document;
  function all(selector, root) { return Array.prototype.slice.call((root || doc).querySelectorAll(selector)); }
  function reveal(id) { var node = doc.getElementById(id); if (node) node.hidden = false; return node; }
  function seriesOf(node) { var mark = node && node.closest ? node.closest("[data-series]") : null; return mark ? mark.getAttribute("data-series") : null; }

  function highlight() {
    all(".chart svg").forEach(function (svg) {
      var marks = all("[data-series]", svg);
      svg.addEventListener("mouseover", function (event) {
        var series = seriesOf(event.target);
        marks.forEach(function (m) { m.classList.toggle("dim", series !== null && m.getAttribute("data-series") !== series); });
      });
      svg.addEventListener("mouseleave", function () { marks.forEach(function (m) { m.classList.remove("dim"); }); });
    });
  }

  function tooltips() {
    var tip = doc.createElement("div");
    tip.id = "chart-tip";
    tip.hidden = true;
    doc.body.appendChild(tip);
    all(".chart svg title").forEach(function (title) {
      var owner = title.parentNode;
      if (owner.tagName.toLowerCase() === "svg") return;  // the chart's own name stays for screen readers
      owner.setAttribute("data-tip", title.textContent);
      owner.removeChild(title);  // no second, slower native tooltip
    });
    doc.addEventListener("mousemove", function (event) {
      var owner = event.target.closest ? event.target.closest("[data-tip]") : null;
      if (!owner) { tip.hidden = true; return; }
      tip.textContent = owner.getAttribute("data-tip");
      tip.hidden = false;
      tip.style.left = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + "px";
      tip.style.top = (event.clientY + 16) + "px";
    });
  }

  function modelFilter() {
    var box = reveal("model-filter");
    if (!box) return;
    box.addEventListener("change", function () {
      var hidden = {};
      all("input[data-series]", box).forEach(function (input) { hidden[input.getAttribute("data-series")] = !input.checked; });
      all(".chart [data-series], tr[data-series]").forEach(function (node) {
        node.classList.toggle("filtered-out", hidden[node.getAttribute("data-series")] === true);
      });
    });
  }

  function sortKey(row, index, numeric) {
    var cell = row.children[index];
    var text = cell ? cell.textContent.trim() : "";
    if (!numeric) return text;
    var value = parseFloat(text.replace(/^[^\d-]+/, ""));
    return isNaN(value) ? null : value;
  }

  function sortable() {
    doc.documentElement.classList.add("js");
    all("table.sortable").forEach(function (table) {
      var heads = all("thead th", table);
      heads.forEach(function (head, index) {
        head.addEventListener("click", function () {
          var body = table.tBodies[0];
          var rows = all("tr", body).filter(function (r) { return !r.classList.contains("total") && r.children.length === heads.length; });
          if (rows.length < 2) return;
          var numeric = rows.some(function (r) { var c = r.children[index]; return c && c.classList.contains("num"); });
          var order = head.getAttribute("aria-sort") === "ascending" ? -1 : 1;
          heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
          head.setAttribute("aria-sort", order === 1 ? "ascending" : "descending");
          rows.sort(function (a, b) {
            var x = sortKey(a, index, numeric), y = sortKey(b, index, numeric);
            if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;  // n/a last
            return order * (numeric ? x - y : String(x).localeCompare(String(y), undefined, {numeric: true}));
          });
          var after = all("tr.total", body);
          rows.concat(after).forEach(function (r) { body.appendChild(r); });
        });
      });
    });
  }

  function failureTools() {
    reveal("failure-tools");
    var items = all("details.failure");
    var box = doc.getElementById("failure-filter");
    if (box) box.addEventListener("input", function () {
      var q = box.value.toLowerCase();
      items.forEach(function (d) { d.hidden = q !== "" && d.textContent.toLowerCase().indexOf(q) < 0; });
    });
    var open = doc.getElementById("expand-all"), shut = doc.getElementById("collapse-all");
    if (open) open.addEventListener("click", function () { items.forEach(function (d) { if (!d.hidden) d.open = true; }); });
    if (shut) shut.addEventListener("click", function () { items.forEach(function (d) { d.open = false; }); });
    function openTarget() { var t = location.hash ? doc.getElementById(location.hash.slice(1)) : null; if (t && t.tagName === "DETAILS") t.open = true; }
    window.addEventListener("hashchange", openTarget);
    openTarget();
  }

  var failed = [];
  [highlight, tooltips, modelFilter, sortable, failureTools].forEach(function (step) {
    try { step(); } catch (err) { failed.push(step.name); if (window.console) console.error("helmbench report:", step.name, err); }
  });
  doc.documentElement.setAttribute("data-script", failed.length ? "failed: " + failed.join(" ") : "ready");
})();
