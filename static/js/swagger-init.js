// Start Swagger UI on the spec named by the page (kept out of inline script for our CSP).
window.addEventListener("load", function () {
  var node = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: node.dataset.specUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    persistAuthorization: true,
  });
});
