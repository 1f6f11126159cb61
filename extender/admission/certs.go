package admission

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionregistrationv1 "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
)

// The self-kept certificate's lifetime, and how long before its end it is renewed. The
// renewal keeps the previous CA in the bundle, so a replica still serving the previous
// certificate stays trusted until it reads the new one (within CertsOptions.Interval).
const (
	certValidity = 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
	retryAfter   = 5 * time.Second // after a failed round
)

// Keys of the certificate Secret (type kubernetes.io/tls, plus the CA bundle to trust).
const (
	secretCert = corev1.TLSCertKey       // tls.crt
	secretKey  = corev1.TLSPrivateKeyKey // tls.key
	secretCA   = "ca.crt"                // the issuing CA first, then the one before it
)

// CertsOptions configures Certs.
type CertsOptions struct {
	Log *zap.Logger
	// Secrets and Webhooks are the Kubernetes I/O: the Secret that holds the certificate and
	// the MutatingWebhookConfiguration whose caBundle must trust it.
	Secrets  corev1client.SecretsGetter
	Webhooks admissionregistrationv1.MutatingWebhookConfigurationsGetter
	// Secret is namespace/name; Configuration names the MutatingWebhookConfiguration.
	Secret        string
	Configuration string
	// Hosts are the DNS names and IP addresses the certificate is for (CertHosts).
	Hosts []string
	// Interval is how often the Secret and the caBundle are checked (default 1 minute).
	Interval time.Duration
	Clock    clock.Clock
}

// Certs keeps the webhook's serving certificate without an operator: it is created once in
// a Secret (the replicas share it: the first to create it wins, the others read it),
// renewed there before it expires, and its CA is kept in the webhook configuration's
// caBundle, which the API server trusts when it calls the webhook.
type Certs struct {
	opts            CertsOptions
	namespace, name string
	current         atomic.Pointer[tls.Certificate]
	missing         atomic.Bool // the webhook configuration was not found (logged once)
}

// NewCerts checks the options; Run (or Ensure) gets the first certificate.
func NewCerts(opts CertsOptions) (*Certs, error) {
	ns, name, ok := strings.Cut(opts.Secret, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("webhook certificate Secret %q is not namespace/name", opts.Secret)
	}
	if len(opts.Hosts) == 0 {
		return nil, errors.New("webhook certificate: no hosts")
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	return &Certs{opts: opts, namespace: ns, name: name}, nil
}

// CertHosts are the names the API server may call a webhook behind service (namespace/name)
// by, and the extra hosts.
func CertHosts(service string, extra []string) []string {
	ns, name, _ := strings.Cut(service, "/")
	return append([]string{name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"}, extra...)
}

// TLSConfig serves the current certificate; until there is one, handshakes fail (and the
// API server, with failurePolicy Ignore, creates pods ungated).
func (c *Certs) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if cert := c.current.Load(); cert != nil {
				return cert, nil
			}
			return nil, errors.New("no webhook certificate yet")
		},
	}
}

// Run ensures the certificate every Interval (every few seconds while that fails) until
// ctx ends.
func (c *Certs) Run(ctx context.Context) {
	for {
		wait := c.opts.Interval
		if err := c.Ensure(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			c.opts.Log.Warn("keeping the webhook certificate", zap.Error(err), zap.Duration("retryIn", retryAfter))
			wait = retryAfter
		}
		select {
		case <-ctx.Done():
			return
		case <-c.opts.Clock.After(wait):
		}
	}
}

// Ensure makes the Secret hold a certificate valid for a while yet for every host, serves
// it, and puts its CA bundle into the webhook configuration.
func (c *Certs) Ensure(ctx context.Context) error {
	secrets := c.opts.Secrets.Secrets(c.namespace)
	secret, err := secrets.Get(ctx, c.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		secret, err = c.create(ctx)
	}
	if err != nil {
		return fmt.Errorf("secret %s: %w", c.opts.Secret, err)
	}
	cert, bundle, why := c.usable(secret)
	if why != "" {
		c.opts.Log.Info("issuing a new webhook certificate", zap.String("secret", c.opts.Secret), zap.String("why", why))
		if secret, err = c.renew(ctx, secret); err != nil {
			return fmt.Errorf("renewing secret %s: %w", c.opts.Secret, err)
		}
		if cert, bundle, why = c.usable(secret); why != "" {
			return fmt.Errorf("secret %s: %s", c.opts.Secret, why)
		}
	}
	// The CA first, then the certificate: a caller that trusts the new CA meets it.
	if err := c.injectCA(ctx, bundle); err != nil {
		return fmt.Errorf("caBundle of MutatingWebhookConfiguration %s: %w", c.opts.Configuration, err)
	}
	c.current.Store(cert)
	return nil
}

// create issues a certificate into a new Secret; when another replica created it first,
// that one is read and used.
func (c *Certs) create(ctx context.Context) (*corev1.Secret, error) {
	data, err := issue(c.opts.Hosts, c.opts.Clock.Now(), nil)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name,
			Labels: map[string]string{"app.kubernetes.io/part-of": "cps-extender"}},
		Type: corev1.SecretTypeTLS,
		Data: data,
	}
	made, err := c.opts.Secrets.Secrets(c.namespace).Create(ctx, secret, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return c.opts.Secrets.Secrets(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
	}
	return made, err
}

// renew issues a new certificate into secret, keeping its CA in the bundle; when another
// replica changed the Secret first, that version is read and used.
func (c *Certs) renew(ctx context.Context, secret *corev1.Secret) (*corev1.Secret, error) {
	data, err := issue(c.opts.Hosts, c.opts.Clock.Now(), firstCert(secret.Data[secretCA]))
	if err != nil {
		return nil, err
	}
	next := secret.DeepCopy()
	next.Data = data
	made, err := c.opts.Secrets.Secrets(c.namespace).Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return c.opts.Secrets.Secrets(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
	}
	return made, err
}

// usable returns the Secret's certificate and CA bundle, or why they cannot serve: missing
// or unparsable, not for every host, not signed by the bundle, or near its end.
func (c *Certs) usable(secret *corev1.Secret) (*tls.Certificate, []byte, string) {
	pair, err := tls.X509KeyPair(secret.Data[secretCert], secret.Data[secretKey])
	if err != nil {
		return nil, nil, fmt.Sprintf("no usable certificate and key: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Sprintf("certificate: %v", err)
	}
	bundle := secret.Data[secretCA]
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return nil, nil, "no CA bundle (" + secretCA + ")"
	}
	now := c.opts.Clock.Now()
	for _, host := range c.opts.Hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now}); err != nil {
			return nil, nil, fmt.Sprintf("not valid for %s: %v", host, err)
		}
	}
	if left := leaf.NotAfter.Sub(now); left < renewBefore {
		return nil, nil, fmt.Sprintf("expires in %v", left.Round(time.Minute))
	}
	pair.Leaf = leaf
	return &pair, bundle, ""
}

// injectCA puts bundle into the caBundle of every webhook of the configuration. A missing
// configuration is no error: the webhook is not installed, and nothing calls it.
func (c *Certs) injectCA(ctx context.Context, bundle []byte) error {
	found, updated, err := updateWebhooks(ctx, c.opts.Webhooks, c.opts.Configuration, func(hook *admissionv1.MutatingWebhook) bool {
		if bytes.Equal(hook.ClientConfig.CABundle, bundle) {
			return false
		}
		hook.ClientConfig.CABundle = bundle
		return true
	})
	if err != nil {
		return err
	}
	if !found && !c.missing.Swap(true) {
		c.opts.Log.Info("no MutatingWebhookConfiguration to give the CA to: the turn-gate webhook is not installed",
			zap.String("configuration", c.opts.Configuration))
	}
	if found {
		c.missing.Store(false)
	}
	if updated {
		c.opts.Log.Info("gave the webhook configuration the CA", zap.String("configuration", c.opts.Configuration))
	}
	return nil
}

// issue makes a CA and a serving certificate for hosts, valid from now (less an hour, for
// clock skew) for certValidity: the Secret's data, its bundle the new CA then previousCA.
func issue(hosts []string, now time.Time, previousCA []byte) (map[string][]byte, error) {
	caSerial, leafSerial, err := serials()
	if err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	notBefore, notAfter := now.Add(-time.Hour), now.Add(certValidity)
	caTemplate := &x509.Certificate{
		SerialNumber: caSerial, Subject: pkix.Name{CommonName: "cps-extender webhook CA"},
		NotBefore: notBefore, NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: leafSerial, Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	bundle := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), previousCA...)
	return map[string][]byte{
		secretCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		secretKey:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		secretCA:   bundle,
	}, nil
}

// firstCert is the first PEM certificate of bundle (nil if none).
func firstCert(bundle []byte) []byte {
	block, _ := pem.Decode(bundle)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil
	}
	return pem.EncodeToMemory(block)
}

// serials are two random 128-bit certificate serial numbers.
func serials() (*big.Int, *big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	a, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, nil, err
	}
	b, err := rand.Int(rand.Reader, limit)
	return a, b, err
}
