//go:build e2e

package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/internal/testcerts"
	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// TestSchedulerOverHTTPS: kube-scheduler calls cps-extender over HTTPS (enableHTTPS with
// tlsConfig.caFile, as an operator would configure it) and a gang still binds whole; the
// serving certificate is then rotated on disk, new handshakes get the new one, and
// scheduling goes on.
func TestSchedulerOverHTTPS(t *testing.T) {
	e := newEnv(t, framework.Nodes("node", 2, "4", "8Gi")...)
	ca, caFile, certFile, keyFile := e.extenderCerts(100)
	roots := ca.Pool()

	e.startExtender(fmt.Sprintf("tls:\n  certFile: %s\n  keyFile: %s\nreload:\n  interval: 1s\n", certFile, keyFile))
	e.startScheduler(true, schedulerOverHTTPS(t, e, caFile))
	if resp, err := http.Get("http://" + e.extAddr + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the extender also answers plain HTTP; want HTTPS only")
		}
	}

	first := jobSpec{name: "tls-a", ps: 1, workers: 3}
	e.createJobs(first)
	e.waitJobBound(first, 90*time.Second)
	// The scheduler's filter and bind calls reached the extender over HTTPS.
	e.waitRequestsLogged(map[string]int{"/scheduler/filter": 4, "/scheduler/bind": 4})
	if got := servedSerial(t, e.extAddr, roots); got != 100 {
		t.Fatalf("served certificate serial %d, want 100", got)
	}

	// Rotate: a new certificate from the same CA. New handshakes must get it.
	ca.IssueFiles(t, 200, certFile, keyFile)
	framework.WaitFor(t, 30*time.Second, "the rotated certificate served", func() (bool, error) {
		got := servedSerial(t, e.extAddr, roots)
		return got == 200, fmt.Errorf("serial %d", got)
	})
	if !e.extenderLogHas(`"msg":"TLS certificate reloaded"`) {
		t.Error("no 'TLS certificate reloaded' log line")
	}
	second := jobSpec{name: "tls-b", ps: 1, workers: 3}
	e.createJobs(second)
	e.waitJobBound(second, 90*time.Second)
}

// extenderCerts makes a CA in a test folder, writes its certificate to caFile and a serving
// certificate of that serial to certFile and keyFile, and has the test's helpers trust it.
func (e *env) extenderCerts(serial int64) (ca *testcerts.CA, caFile, certFile, keyFile string) {
	e.t.Helper()
	dir := e.t.TempDir()
	caFile, certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca = testcerts.NewCA(e.t)
	testcerts.WriteFile(e.t, caFile, ca.PEM)
	ca.IssueFiles(e.t, serial, certFile, keyFile)
	e.extTLS = newTLSClientConfig(ca)
	return ca, caFile, certFile, keyFile
}

// newTLSClientConfig trusts the certificates ca issues, for the helpers that talk to the
// extender.
func newTLSClientConfig(ca *testcerts.CA) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
}

// schedulerOverHTTPS edits the shipped scheduler config to call the extender over HTTPS,
// trusting caFile (enableHTTPS with tlsConfig.caFile, as an operator would configure it).
func schedulerOverHTTPS(t *testing.T, e *env, caFile string) func(string) string {
	return func(cfg string) string {
		plain := "urlPrefix: http://" + e.extAddr + "/scheduler"
		if !strings.Contains(cfg, plain) || !strings.Contains(cfg, "enableHTTPS: false") {
			t.Fatalf("the scheduler config has no %q or no enableHTTPS: false", plain)
		}
		cfg = strings.Replace(cfg, plain, "urlPrefix: https://"+e.extAddr+"/scheduler", 1)
		return strings.Replace(cfg, "enableHTTPS: false", "enableHTTPS: true\n  tlsConfig:\n    caFile: "+caFile, 1)
	}
}

// servedSerial handshakes with the extender (verifying its certificate against roots) and
// returns the serial number of the certificate it served.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) int64 {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS handshake with the extender: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}
