package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var (
	testHosts = CertHosts("cps-system/cps-extender", []string{"127.0.0.1"})
	testStart = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
)

func webhookConfiguration(caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "cps-extender-turn-gate"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "turn-gate.cps-extender.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: caBundle}},
			{Name: "second.cps-extender.io"},
		},
	}
}

// secretFor is a certificate Secret issued at issued for hosts (another replica's, say).
func secretFor(t *testing.T, hosts []string, issued time.Time) *corev1.Secret {
	t.Helper()
	data, err := issue(hosts, issued, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cps-system", Name: "cps-extender-webhook-tls", ResourceVersion: "7"},
		Type: corev1.SecretTypeTLS, Data: data}
}

// TestCertsEnsure: the Secret is created, kept or renewed, the caBundle follows it, and the
// certificate served is the Secret's.
func TestCertsEnsure(t *testing.T) {
	tests := []struct {
		name string
		// objects are the cluster's before Ensure; now is the clock.
		objects func(t *testing.T) []runtime.Object
		now     time.Time
		// kept: the Secret's certificate is the one it held; renewed: a new one, with the old CA
		// second in the bundle; neither: a new Secret.
		kept, renewed bool
		noHook        bool
	}{
		{name: "no Secret yet: one is created", objects: func(t *testing.T) []runtime.Object {
			return []runtime.Object{webhookConfiguration(nil)}
		}, now: testStart},
		{name: "another replica's Secret is used", objects: func(t *testing.T) []runtime.Object {
			return []runtime.Object{webhookConfiguration(nil), secretFor(t, testHosts, testStart.Add(-24*time.Hour))}
		}, now: testStart, kept: true},
		{name: "a Secret near its end is renewed", objects: func(t *testing.T) []runtime.Object {
			return []runtime.Object{webhookConfiguration([]byte("stale")), secretFor(t, testHosts, testStart)}
		}, now: testStart.Add(certValidity - renewBefore + time.Hour), renewed: true},
		{name: "a Secret for other names is renewed", objects: func(t *testing.T) []runtime.Object {
			return []runtime.Object{webhookConfiguration(nil), secretFor(t, []string{"other.cps-system.svc"}, testStart)}
		}, now: testStart, renewed: true},
		{name: "a Secret with no certificate is renewed", objects: func(t *testing.T) []runtime.Object {
			s := secretFor(t, testHosts, testStart)
			s.Data = map[string][]byte{"tls.crt": []byte("junk")}
			return []runtime.Object{webhookConfiguration(nil), s}
		}, now: testStart, renewed: true},
		{name: "no webhook configuration: the certificate is served all the same", objects: func(t *testing.T) []runtime.Object {
			return nil
		}, now: testStart, noHook: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objects := tt.objects(t)
			var before *corev1.Secret
			for _, o := range objects {
				if s, ok := o.(*corev1.Secret); ok {
					before = s.DeepCopy()
				}
			}
			client := fake.NewClientset(objects...)
			certs, err := NewCerts(CertsOptions{Secrets: client.CoreV1(), Webhooks: client.AdmissionregistrationV1(),
				Secret: "cps-system/cps-extender-webhook-tls", Configuration: "cps-extender-turn-gate", Hosts: testHosts,
				Clock: clocktesting.NewFakeClock(tt.now)})
			if err != nil {
				t.Fatal(err)
			}
			if err := certs.Ensure(context.Background()); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			secret, err := client.CoreV1().Secrets("cps-system").Get(context.Background(), "cps-extender-webhook-tls", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if secret.Type != corev1.SecretTypeTLS {
				t.Errorf("Secret type %q", secret.Type)
			}
			sameCert := before != nil && bytes.Equal(secret.Data["tls.crt"], before.Data["tls.crt"])
			if sameCert != tt.kept {
				t.Errorf("Secret's certificate kept = %v, want %v", sameCert, tt.kept)
			}
			if tt.renewed {
				if old := firstCert(before.Data[secretCA]); !bytes.HasSuffix(secret.Data[secretCA], old) || bytes.Equal(secret.Data[secretCA], old) {
					t.Errorf("renewed bundle does not hold the new CA then the previous one:\n%s", secret.Data[secretCA])
				}
			}
			bundle := secret.Data[secretCA]
			if !tt.noHook {
				hook, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "cps-extender-turn-gate", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range hook.Webhooks {
					if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
						t.Errorf("webhook %s caBundle is not the Secret's bundle", w.Name)
					}
				}
			}
			// A caller that trusts the bundle reaches the webhook by the Service's name.
			served := call(t, certs, bundle, "cps-extender.cps-system.svc", tt.now)
			if block, _ := pem.Decode(secret.Data["tls.crt"]); block == nil || !bytes.Equal(served, block.Bytes) {
				t.Errorf("served certificate is not the Secret's")
			}
		})
	}
}

// call makes an HTTPS request to a server with certs' TLSConfig, trusting bundle and
// expecting name, and returns the served certificate (DER).
func call(t *testing.T, certs *Certs, bundle []byte, name string, now time.Time) []byte {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	srv.TLS = certs.TLSConfig()
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("bundle holds no certificate")
	}
	var leaf []byte
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: name, Time: func() time.Time { return now },
		VerifyConnection: func(cs tls.ConnectionState) error { leaf = cs.PeerCertificates[0].Raw; return nil },
	}}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("calling the webhook as %s: %v", name, err)
	}
	_ = resp.Body.Close()
	return leaf
}

// TestCertsReplicasRace: two replicas start together; the one whose create finds the Secret
// made meanwhile, and the one whose renewal finds it renewed meanwhile, both use the
// other's certificate.
func TestCertsReplicasRace(t *testing.T) {
	for _, verb := range []string{"create", "update"} {
		t.Run(verb, func(t *testing.T) {
			theirs := secretFor(t, testHosts, testStart)
			var objects []runtime.Object
			if verb == "update" { // ours is about to expire
				objects = append(objects, secretFor(t, testHosts, testStart.Add(-certValidity)))
			}
			client := fake.NewClientset(objects...)
			client.PrependReactor(verb, "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				if err := client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("secrets"), "cps-system", theirs.Name); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				if err := client.Tracker().Add(theirs); err != nil {
					t.Fatal(err)
				}
				if verb == "create" {
					return true, nil, apierrors.NewAlreadyExists(corev1.Resource("secrets"), theirs.Name)
				}
				return true, nil, apierrors.NewConflict(corev1.Resource("secrets"), theirs.Name, nil)
			})
			certs, err := NewCerts(CertsOptions{Secrets: client.CoreV1(), Webhooks: client.AdmissionregistrationV1(),
				Secret: "cps-system/cps-extender-webhook-tls", Configuration: "cps-extender-turn-gate", Hosts: testHosts,
				Clock: clocktesting.NewFakeClock(testStart)})
			if err != nil {
				t.Fatal(err)
			}
			if err := certs.Ensure(context.Background()); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			served := call(t, certs, theirs.Data[secretCA], "cps-extender.cps-system.svc", testStart)
			if block, _ := pem.Decode(theirs.Data["tls.crt"]); !bytes.Equal(served, block.Bytes) {
				t.Error("served certificate is not the other replica's")
			}
		})
	}
}

// TestCertsNoneYet: before a certificate is had, handshakes fail rather than serve one
// the API server does not trust; a bad Secret name is refused at once.
func TestCertsNoneYet(t *testing.T) {
	client := fake.NewClientset()
	certs, err := NewCerts(CertsOptions{Secrets: client.CoreV1(), Webhooks: client.AdmissionregistrationV1(),
		Secret: "cps-system/x", Configuration: "c", Hosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := certs.TLSConfig().GetCertificate(&tls.ClientHelloInfo{}); err == nil {
		t.Error("a certificate was served before Ensure")
	}
	if _, err := NewCerts(CertsOptions{Secret: "x", Hosts: testHosts}); err == nil {
		t.Error("Secret without a namespace accepted")
	}
}
