// Hookline's console and portal: one page, plain ES modules, no build step.
// It talks only to the public API under /ui/api (the same routes as /v1,
// authenticated by the key or portal token the person signs in with).
document.getElementById("main").textContent = "Hookline console";
