package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// runExplain is `cps-extender explain`: it prints the admission queue of a running
// extender (GET /debug/queue, as a table or as JSON).
func runExplain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cps-extender explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8888", "base URL of the running extender (https:// when it serves TLS)")
	asJSON := fs.Bool("json", false, "print the JSON report instead of the table")
	caFile := fs.String("ca-file", "", "PEM CA bundle that signed the extender's certificate (https only; default: the system roots)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the answer")
	tokenFile := fs.String("token-file", "", "a file holding a bearer token whose user may get /debug/queue (not needed through `kubectl port-forward`, which arrives over loopback)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cps-extender explain [--url=http://127.0.0.1:8888] [--json] [--ca-file=ca.crt] [--token-file=token]")
		fmt.Fprintln(stderr, "Prints the admission queue: each job's position, P and its four terms, state, gang progress and what it waits for.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("explain: unexpected arguments: %v", fs.Args())
	}
	client := &http.Client{Timeout: *timeout}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return fmt.Errorf("explain: --ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("explain: --ca-file %s holds no PEM certificate", *caFile)
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	format := "table"
	if *asJSON {
		format = "json"
	}
	url := strings.TrimSuffix(*base, "/") + "/debug/queue?format=" + format
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("explain: --url %s: %w", *base, err)
	}
	if *tokenFile != "" {
		token, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("explain: --token-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("explain: the extender at %s is not reachable: %w", *base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("explain: reading the answer of %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("explain: GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	_, err = stdout.Write(body)
	return err
}
