package server

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// request serves "METHOD /path" (or just "/path", a GET).
func request(srv http.Handler, line string) *httptest.ResponseRecorder {
	method, path, ok := strings.Cut(line, " ")
	if !ok {
		method, path = http.MethodGet, line
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func uiTestServer(t *testing.T) *Server {
	t.Helper()
	f := layoutJobs(t)
	srv, err := New(Options{Access: OpenAccess, Log: zap.NewNop(), MaxRequestBytes: 1 << 20, Ready: readyFlag(true), Queue: f, Layout: f})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestUIServesItsFiles(t *testing.T) {
	srv := uiTestServer(t)
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{path: "/ui", contentType: "text/html", contains: `<script src="ui/app.js" defer></script>`},
		{path: "/ui/app.js", contentType: "text/javascript", contains: `getJSON("debug/queue")`},
		{path: "/ui/app.css", contentType: "text/css", contains: ".pod.held"},
		{path: "/ui/favicon.svg", contentType: "image/svg+xml", contains: "<svg"},
	} {
		rec := request(srv, tc.path)
		h := rec.Header()
		if rec.Code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), tc.contentType) || !strings.Contains(rec.Body.String(), tc.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v; want 200 %s", tc.path, rec.Code, h.Get("Content-Type"), tc.contains, strings.Contains(rec.Body.String(), tc.contains), tc.contentType)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: policy %q, nosniff %q", tc.path, csp, h.Get("X-Content-Type-Options"))
		}
	}
	for _, line := range []string{"POST /ui", "PUT /ui/app.js", "DELETE /ui"} {
		if rec := request(srv, line); rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405: the page is read-only", line, rec.Code)
		}
	}
	if rec := request(srv, "/ui/other.js"); rec.Code != http.StatusNotFound {
		t.Errorf("/ui/other.js: %d, want 404", rec.Code)
	}
}

// TestUIIsSelfContained: the page loads nothing from elsewhere (it must work offline, and the
// policy would block it anyway), and every path its script fetches is served here.
func TestUIIsSelfContained(t *testing.T) {
	remote := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(`)
	err := fs.WalkDir(uiFiles, "ui", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := uiFiles.ReadFile(path)
		if err != nil {
			return err
		}
		// The SVG namespace is a name, not something loaded.
		text := strings.ReplaceAll(string(body), `xmlns="http://www.w3.org/2000/svg"`, "")
		if m := remote.FindString(text); m != "" {
			t.Errorf("%s refers to %q: the page must load nothing from elsewhere", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	js, _ := uiFiles.ReadFile("ui/app.js")
	fetched := regexp.MustCompile(`getJSON\("([^"]+)"\)`).FindAllStringSubmatch(string(js), -1)
	if len(fetched) != 2 {
		t.Fatalf("app.js fetches %v, want debug/queue and debug/nodes", fetched)
	}
	srv := uiTestServer(t)
	for _, m := range fetched {
		// Relative to /ui, as the browser resolves it.
		if rec := request(srv, "/"+m[1]); rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Errorf("the page fetches %s: %d %q, want JSON", m[1], rec.Code, rec.Header().Get("Content-Type"))
		}
	}
	if strings.Contains(string(js), "innerHTML") {
		t.Error("app.js uses innerHTML: job and pod names come from the cluster; build nodes with textContent")
	}
}
