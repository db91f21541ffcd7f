// Keyboard shortcuts on a rating page (no framework, no build step; served from 'self' under the CSP).
// y / n / a: answer the next unanswered check; s / u: overall safe / unsafe; Ctrl+Enter: submit.
(function () {
  "use strict";
  var form = document.getElementById("rating");
  if (!form) { return; }
  function nextUnanswered() {
    var rows = form.querySelectorAll("tr.check");
    for (var i = 0; i < rows.length; i++) {
      if (!rows[i].querySelector("input:checked")) { return rows[i]; }
    }
    return null;
  }
  function mark() {
    var rows = form.querySelectorAll("tr.check");
    for (var i = 0; i < rows.length; i++) { rows[i].classList.remove("focus"); }
    var row = nextUnanswered();
    if (row) { row.classList.add("focus"); }
  }
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT" && target.type !== "radio")) {
      if (event.key === "Enter" && event.ctrlKey) { form.querySelector("#submit").click(); }
      return;
    }
    var values = { y: "yes", n: "no", a: "not_applicable" };
    if (values[event.key]) {
      var row = nextUnanswered();
      if (row) {
        row.querySelector('input[value="' + values[event.key] + '"]').checked = true;
        mark();
      }
      event.preventDefault();
    } else if (event.key === "s" || event.key === "u") {
      form.querySelector('input[name="verdict"][value="' + (event.key === "s" ? "safe" : "unsafe") + '"]').checked = true;
      event.preventDefault();
    } else if (event.key === "Enter" && event.ctrlKey) {
      form.querySelector("#submit").click();
    }
  });
  form.addEventListener("change", mark);
  mark();
})();
