// Start ReDoc on the spec named by the page, with a dark theme while the system prefers dark
// (ReDoc themes through its options; a change of preference re-renders it).
(function () {
  "use strict";
  var node = document.getElementById("redoc");
  var dark = window.matchMedia("(prefers-color-scheme: dark)");
  var DARK = {
    colors: {
      primary: { main: "#93c5fd" },
      text: { primary: "#e4e6e6", secondary: "#b7bcbf" },
      border: { dark: "#4b5563", light: "#374151" },
      http: { get: "#4ade80", post: "#60a5fa", put: "#fbbf24", delete: "#f87171" }
    },
    schema: { nestedBackground: "#111416", typeNameColor: "#b7bcbf", linesColor: "#4b5563" },
    sidebar: { backgroundColor: "#111416", textColor: "#e4e6e6" },
    rightPanel: { backgroundColor: "#0b0d0e" },
    typography: { code: { color: "#f0abfc", backgroundColor: "#111416" },
                  links: { color: "#93c5fd" } }
  };
  function draw() {
    document.documentElement.dataset.theme = dark.matches ? "dark" : "light";
    Redoc.init(node.dataset.specUrl, dark.matches ? { theme: DARK } : {}, node);
  }
  draw();
  dark.addEventListener("change", draw);
})();
