package server

import (
	"embed"
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// uiFiles are the queue page's files. The page loads nothing else: it works offline,
// and its script reads /debug/queue and /debug/nodes from the same origin, so it is served
// behind the extender's own TLS like every other route.
//
//go:embed ui/index.html ui/app.js ui/app.css ui/favicon.svg
var uiFiles embed.FS

// uiSecurityPolicy lets the page load only its own script and style and call only its own
// origin; it may not be framed.
const uiSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// uiFile serves one of the page's files, read-only, with its content type and the policy.
func uiFile(body []byte, contentType string) httprouter.Handle {
	return func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Content-Security-Policy", uiSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(body)
	}
}

// routeUI adds GET /ui (the queue page) and its script, style and icon.
func routeUI(get func(path string, h httprouter.Handle)) error {
	for _, f := range []struct{ path, file, contentType string }{
		{"/ui", "ui/index.html", "text/html; charset=utf-8"},
		{"/ui/app.js", "ui/app.js", "text/javascript; charset=utf-8"},
		{"/ui/app.css", "ui/app.css", "text/css; charset=utf-8"},
		{"/ui/favicon.svg", "ui/favicon.svg", "image/svg+xml"},
	} {
		body, err := uiFiles.ReadFile(f.file)
		if err != nil {
			return fmt.Errorf("extender server: the queue page's %s: %w", f.file, err)
		}
		get(f.path, uiFile(body, f.contentType))
	}
	return nil
}
