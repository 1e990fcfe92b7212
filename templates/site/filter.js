(function () {
  "use strict";
  var form = document.getElementById("filters");
  var count = document.getElementById("count");
  var rows = document.querySelectorAll("#images tbody tr");
  var items = document.querySelectorAll("[data-item]");
  function matches(el, f) {
    var gpus = (el.getAttribute("data-gpus") || "").split("|");
    return (!f.gpu || gpus.indexOf(f.gpu) >= 0) &&
      (!f.rocm || el.getAttribute("data-rocm") === f.rocm) &&
      (!f.os || el.getAttribute("data-os") === f.os) &&
      (!f.flavor || el.getAttribute("data-flavor") === f.flavor) &&
      (!f.q || (el.getAttribute("data-search") || "").indexOf(f.q) >= 0);
  }
  function apply() {
    var f = { gpu: form.elements.gpu.value, rocm: form.elements.rocm.value, os: form.elements.os.value,
              flavor: form.elements.flavor.value, q: form.elements.q.value.trim().toLowerCase() };
    var shown = 0;
    for (var i = 0; i < items.length; i++) {
      var ok = matches(items[i], f);
      items[i].hidden = !ok;
    }
    for (var j = 0; j < rows.length; j++) {
      if (!rows[j].hidden) { shown++; }
    }
    count.textContent = shown + " of " + rows.length + " images";
  }
  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("submit", function (event) { event.preventDefault(); apply(); });
  apply();
}());
