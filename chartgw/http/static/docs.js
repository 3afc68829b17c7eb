// GET /docs: Swagger UI over the gateway's joined OpenAPI document (served beside the page, at openapi.json),
// fetching nothing from anywhere else: no validator badge (validatorUrl null) and no top bar (BaseLayout).
window.addEventListener("load", function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: new URL(root.dataset.openapi, document.baseURI).href,
    domNode: root,
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    defaultModelsExpandDepth: -1,
  });
});
