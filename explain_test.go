package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExplain(t *testing.T) {
	const table = "queue computed 2026-11-29T21:00:00Z: 1 queued, 0 running\nPOS  JOB  PHASE\n1    ns/a Waiting\n"
	const report = `{"computed":"2026-11-29T21:00:00Z","jobs":[{"job":"ns/a"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/queue" {
			http.NotFound(w, r)
			return
		}
		if auth := r.Header.Get("Authorization"); auth != "" && auth != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"the bearer token is not valid"}`))
			return
		}
		switch r.URL.Query().Get("format") {
		case "table":
			_, _ = w.Write([]byte(table))
		case "json":
			_, _ = w.Write([]byte(report))
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"unknown format"}`))
		}
	}))
	defer srv.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"no queue computed yet: cluster view not synced"}`))
	}))
	defer broken.Close()

	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("forged"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "the table", args: []string{"--url", srv.URL}, want: table},
		{name: "a trailing slash in the URL", args: []string{"--url", srv.URL + "/"}, want: table},
		{name: "JSON", args: []string{"--url=" + srv.URL, "--json"}, want: report},
		{name: "nobody listening", args: []string{"--url", down.URL}, wantErr: "explain: the extender at " + down.URL + " is not reachable"},
		{name: "an error answer is shown", args: []string{"--url", broken.URL}, wantErr: "503 Service Unavailable: {\"error\":\"no queue computed yet: cluster view not synced\"}"},
		{name: "a CA file that is not there", args: []string{"--url", srv.URL, "--ca-file", "/nonexistent/ca.crt"}, wantErr: "explain: --ca-file"},
		{name: "a bearer token from a file", args: []string{"--url", srv.URL, "--token-file", good}, want: table},
		{name: "a token the extender refuses", args: []string{"--url", srv.URL, "--token-file", bad}, wantErr: "401 Unauthorized: {\"error\":\"the bearer token is not valid\"}"},
		{name: "stray arguments", args: []string{"--url", srv.URL, "extra"}, wantErr: "unexpected arguments: [extra]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runExplain(tt.args, &out, &errOut)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("printed %q, want %q", out.String(), tt.want)
			}
		})
	}
}
