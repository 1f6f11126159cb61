package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// CertReloader serves a TLS certificate and key from files and reloads them when their
// content changes (a renewed Secret), checked at most once per interval, on a handshake.
// A pair that fails to load is logged and the previous one stays in use.
type CertReloader struct {
	log      *zap.Logger
	certFile string
	keyFile  string
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	certPEM []byte
	keyPEM  []byte
	checked time.Time
}

// NewCertReloader loads the pair once; an error here stops the start. interval 0 never
// reloads.
func NewCertReloader(log *zap.Logger, certFile, keyFile string, interval time.Duration) (*CertReloader, error) {
	c := &CertReloader{log: log, certFile: certFile, keyFile: keyFile, interval: interval, now: time.Now}
	certPEM, keyPEM, err := c.read()
	if err != nil {
		return nil, err
	}
	if err := c.load(certPEM, keyPEM); err != nil {
		return nil, err
	}
	c.checked = c.now()
	return c, nil
}

// TLSConfig is the server's TLS configuration, serving the current certificate.
func (c *CertReloader) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.GetCertificate}
}

// GetCertificate returns the current certificate, reloading it first if the files changed.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); c.interval > 0 && now.Sub(c.checked) >= c.interval {
		c.checked = now
		c.reloadIfChanged()
	}
	return c.cert, nil
}

// reloadIfChanged reloads the pair when either file's content differs. The caller holds mu.
func (c *CertReloader) reloadIfChanged() {
	certPEM, keyPEM, err := c.read()
	if err != nil {
		c.log.Error("TLS reload: reading the certificate files; the current certificate stays", zap.Error(err))
		return
	}
	if bytes.Equal(certPEM, c.certPEM) && bytes.Equal(keyPEM, c.keyPEM) {
		return
	}
	if err := c.load(certPEM, keyPEM); err != nil {
		// Often a rotation caught half-way (new cert, old key): the next check retries.
		c.log.Error("TLS reload: the new pair does not load; the current certificate stays", zap.Error(err))
		return
	}
	c.log.Info("TLS certificate reloaded", zap.String("certFile", c.certFile), zap.Time("notAfter", c.cert.Leaf.NotAfter))
}

func (c *CertReloader) read() ([]byte, []byte, error) {
	certPEM, err := os.ReadFile(c.certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls.certFile: %w", err)
	}
	keyPEM, err := os.ReadFile(c.keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls.keyFile: %w", err)
	}
	return certPEM, keyPEM, nil
}

// load parses the pair and makes it current. The caller holds mu (or owns c).
func (c *CertReloader) load(certPEM, keyPEM []byte) error {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("tls: loading %s and %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert, c.certPEM, c.keyPEM = &cert, certPEM, keyPEM
	return nil
}

// ClientCAReloader keeps a pool of client certificate authorities from a PEM file,
// reloaded when the file changes (checked at most once per interval, on a handshake). A
// bundle that fails to load is logged and the previous pool stays in use.
type ClientCAReloader struct {
	log      *zap.Logger
	file     string
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	pool    *x509.CertPool
	pem     []byte
	checked time.Time
}

// NewClientCAReloader loads the bundle once; an error here stops the start. interval 0
// never reloads.
func NewClientCAReloader(log *zap.Logger, file string, interval time.Duration) (*ClientCAReloader, error) {
	c := &ClientCAReloader{log: log, file: file, interval: interval, now: time.Now}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls.clientCAFile: %w", err)
	}
	if c.pool, err = ClientCAs(pem); err != nil {
		return nil, fmt.Errorf("tls.clientCAFile %s: %w", file, err)
	}
	c.pem, c.checked = pem, c.now()
	return c, nil
}

// Pool returns the current pool, reloading it first if the file changed.
func (c *ClientCAReloader) Pool() *x509.CertPool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); c.interval > 0 && now.Sub(c.checked) >= c.interval {
		c.checked = now
		pem, err := os.ReadFile(c.file)
		switch {
		case err != nil:
			c.log.Error("TLS reload: reading the client CA bundle; the current one stays", zap.Error(err))
		case !bytes.Equal(pem, c.pem):
			if pool, err := ClientCAs(pem); err != nil {
				c.log.Error("TLS reload: the new client CA bundle does not load; the current one stays", zap.Error(err))
			} else {
				c.pool, c.pem = pool, pem
				c.log.Info("TLS client CA bundle reloaded", zap.String("clientCAFile", c.file))
			}
		}
	}
	return c.pool
}

// RequestClients makes base ask callers for a client certificate, which the access check of
// each endpoint verifies against Pool (Access.ClientCAs): a call without one is still
// served where no certificate is needed (the probes, /metrics), and one with a wrong one
// gets an HTTP answer saying so.
func RequestClients(base *tls.Config) *tls.Config {
	out := base.Clone()
	out.ClientAuth = tls.RequestClientCert
	return out
}
