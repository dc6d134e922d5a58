// Start Swagger UI on the spec named by the page (kept out of inline script for our CSP), in
// Swagger UI's own dark mode while the system prefers dark.
window.addEventListener("load", function () {
  var node = document.getElementById("swagger-ui");
  var dark = window.matchMedia("(prefers-color-scheme: dark)");
  function follow() { document.documentElement.classList.toggle("dark-mode", dark.matches); }
  follow();
  dark.addEventListener("change", follow);
  window.ui = SwaggerUIBundle({
    url: node.dataset.specUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    persistAuthorization: true,
  });
});
