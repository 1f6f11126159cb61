package server

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cps-extender/cps-extender/internal/testcerts"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestCertReloaderServesRotatedCertificates: real TLS handshakes against a listener that
// serves the reloader's TLSConfig see a rotated pair once the check interval has passed,
// and a broken new pair leaves the last good one in service.
func TestCertReloaderServesRotatedCertificates(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := testcerts.NewCA(t)
	cert1, key1 := ca.Issue(t, 1)
	cert2, key2 := ca.Issue(t, 2)
	testcerts.WriteFile(t, certFile, cert1)
	testcerts.WriteFile(t, keyFile, key1)

	core, logs := observer.New(zap.InfoLevel)
	r, err := NewCertReloader(zap.New(core), certFile, keyFile, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	r.now, r.checked = clock.Now, clock.Now()

	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(raw, r.TLSConfig())
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_ = conn.(*tls.Conn).Handshake()
			conn.Close()
		}
	}()
	roots := ca.Pool()
	served := func() int64 {
		t.Helper()
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second, Deadline: time.Now().Add(10 * time.Second)}, "tcp", raw.Addr().String(),
			&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}

	steps := []struct {
		name       string
		cert, key  []byte // written before the handshake (nil: unchanged)
		advance    time.Duration
		wantSerial int64
	}{
		{name: "the first pair", wantSerial: 1},
		{name: "rotated, within the check interval: still the old pair", cert: cert2, key: key2, advance: time.Second, wantSerial: 1},
		{name: "past the interval: the new pair", advance: 5 * time.Second, wantSerial: 2},
		{name: "a broken new certificate: the last good pair stays", cert: []byte("not a certificate"), advance: 6 * time.Second, wantSerial: 2},
		{name: "a half-done rotation (old cert, new key): the last good pair stays", cert: cert1, advance: 6 * time.Second, wantSerial: 2},
		{name: "the rotation completes", key: key1, advance: 6 * time.Second, wantSerial: 1},
	}
	for _, s := range steps {
		if s.cert != nil {
			testcerts.WriteFile(t, certFile, s.cert)
		}
		if s.key != nil {
			testcerts.WriteFile(t, keyFile, s.key)
		}
		clock.advance(s.advance)
		if got := served(); got != s.wantSerial {
			t.Errorf("%s: served serial %d, want %d", s.name, got, s.wantSerial)
		}
	}
	if n := logs.FilterMessage("TLS reload: the new pair does not load; the current certificate stays").Len(); n != 2 {
		t.Errorf("%d error lines for the broken pairs, want 2", n)
	}
	if n := logs.FilterMessage("TLS certificate reloaded").Len(); n != 2 {
		t.Errorf("%d reload lines, want 2", n)
	}
}

func TestCertReloaderNeedsAGoodPairToStart(t *testing.T) {
	dir := t.TempDir()
	cert, key := testcerts.NewCA(t).Issue(t, 1)
	good, goodKey := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	testcerts.WriteFile(t, good, cert)
	testcerts.WriteFile(t, goodKey, key)
	garbage := filepath.Join(dir, "garbage")
	testcerts.WriteFile(t, garbage, []byte("garbage"))
	for _, tt := range []struct{ cert, key, want string }{
		{filepath.Join(dir, "missing.crt"), goodKey, "tls.certFile: open"},
		{good, filepath.Join(dir, "missing.key"), "tls.keyFile: open"},
		{good, garbage, "tls: loading"},
	} {
		if _, err := NewCertReloader(zap.NewNop(), tt.cert, tt.key, time.Second); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("cert %s key %s: err %v, want %q", tt.cert, tt.key, err, tt.want)
		}
	}
}
