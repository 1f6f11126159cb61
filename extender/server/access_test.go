package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cps-extender/cps-extender/extender/wire"
	"github.com/cps-extender/cps-extender/internal/testcerts"
)

// fakeReviewer lets in the token "good" for every path, knows the token "nosy" as a user
// who may get nothing, and fails on "broken".
type fakeReviewer struct{}

func (fakeReviewer) Review(_ context.Context, token, path string) (bool, bool, string, error) {
	switch token {
	case "good":
		return true, true, "", nil
	case "nosy":
		return false, true, `user "nosy" may not get ` + path, nil
	case "broken":
		return false, false, "", errors.New("TokenReview: connection refused")
	}
	return false, false, "", nil
}

// TestAccessAllow: each way lets in what it should and nothing else; a caller without a
// credential that could let it in gets 401, one whose credential or address does not 403.
func TestAccessAllow(t *testing.T) {
	ca, other := testcerts.NewCA(t), testcerts.NewCA(t)
	state := func(certPEM []byte) *tls.ConnectionState {
		block, _ := pem.Decode(certPEM)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
	}
	cert := func(cn string, ours bool) *tls.ConnectionState {
		signer := other
		if ours {
			signer = ca
		}
		certPEM, _ := signer.IssueClient(t, 7, cn)
		return state(certPEM)
	}
	serving, _ := ca.Issue(t, 8) // good for server authentication only
	cas := func() *x509.CertPool { return ca.Pool() }
	tests := []struct {
		name   string
		access Access
		kind   string
		remote string
		tls    *tls.ConnectionState
		token  string
		status int
		msg    string
	}{
		{name: "loopback, from loopback", access: Access{Scheduler: []string{WayLoopback}}, kind: wire.KindScheduler, remote: "127.0.0.1:5000"},
		{name: "loopback, from IPv6 loopback", access: Access{Scheduler: []string{WayLoopback}}, kind: wire.KindScheduler, remote: "[::1]:5000"},
		{name: "loopback, from the pod network", access: Access{Scheduler: []string{WayLoopback}}, kind: wire.KindScheduler, remote: "10.0.0.7:5000",
			status: http.StatusUnauthorized, msg: "POST /x takes callers by loopback; refused: the call does not come from loopback"},
		{name: "client certificate verified", access: Access{Scheduler: []string{WayClientCertificate}, ClientCAs: cas}, kind: wire.KindScheduler, remote: "10.0.0.7:5000",
			tls: cert("system:kube-scheduler", true)},
		{name: "a serving certificate of our CA is no client certificate", access: Access{Scheduler: []string{WayClientCertificate}, ClientCAs: cas}, kind: wire.KindScheduler,
			remote: "10.0.0.7:5000", tls: state(serving), status: http.StatusForbidden, msg: "not signed by tls.clientCAFile"},
		{name: "no client CA configured", access: Access{Scheduler: []string{WayClientCertificate}}, kind: wire.KindScheduler, remote: "10.0.0.7:5000",
			tls: cert("system:kube-scheduler", true), status: http.StatusForbidden, msg: "not signed by tls.clientCAFile"},
		{name: "no client certificate", access: Access{Scheduler: []string{WayClientCertificate}, ClientCAs: cas}, kind: wire.KindScheduler, remote: "10.0.0.7:5000",
			tls: &tls.ConnectionState{}, status: http.StatusUnauthorized, msg: "refused: no client certificate"},
		{name: "a client certificate no CA of ours signed", access: Access{Scheduler: []string{WayClientCertificate}, ClientCAs: cas}, kind: wire.KindScheduler, remote: "10.0.0.7:5000",
			tls: cert("mallory", false), status: http.StatusForbidden, msg: "not signed by tls.clientCAFile"},
		{name: "a verified certificate of a name not allowed", access: Access{Scheduler: []string{WayClientCertificate}, ClientCAs: cas, ClientNames: []string{"system:kube-scheduler"}},
			kind: wire.KindScheduler, remote: "10.0.0.7:5000", tls: cert("system:node:n1", true), status: http.StatusForbidden, msg: `name "system:node:n1" is not in tls.clientNames`},
		{name: "either way: certificate or loopback", access: Access{Scheduler: []string{WayClientCertificate, WayLoopback}}, kind: wire.KindScheduler, remote: "127.0.0.1:1"},
		{name: "Volcano anyone", access: Access{Volcano: []string{WayAnyone}}, kind: wire.KindVolcano, remote: "10.0.0.7:5000"},
		{name: "the webhook is open", access: Access{}, kind: wire.KindWebhook, remote: "10.0.0.7:5000"},
		{name: "admin: an allowed token", access: Access{Admin: []string{WayLoopback, WayToken}, Reviewer: fakeReviewer{}}, kind: "admin", remote: "10.0.0.7:5000", token: "good"},
		{name: "admin: no token", access: Access{Admin: []string{WayLoopback, WayToken}, Reviewer: fakeReviewer{}}, kind: "admin", remote: "10.0.0.7:5000",
			status: http.StatusUnauthorized, msg: "takes callers by loopback or token; refused: the call does not come from loopback; no bearer token"},
		{name: "admin: an unknown token", access: Access{Admin: []string{WayToken}, Reviewer: fakeReviewer{}}, kind: "admin", remote: "10.0.0.7:5000", token: "forged",
			status: http.StatusUnauthorized, msg: "the bearer token is not valid"},
		{name: "admin: a known user without the right", access: Access{Admin: []string{WayToken}, Reviewer: fakeReviewer{}}, kind: "admin", remote: "10.0.0.7:5000", token: "nosy",
			status: http.StatusForbidden, msg: `user "nosy" may not get /x`},
		{name: "admin: the review fails", access: Access{Admin: []string{WayToken}, Reviewer: fakeReviewer{}}, kind: "admin", remote: "10.0.0.7:5000", token: "broken",
			status: http.StatusServiceUnavailable, msg: "could not be checked"},
		{name: "admin: tokens without a reviewer", access: Access{Admin: []string{WayToken}}, kind: "admin", remote: "10.0.0.7:5000", token: "good",
			status: http.StatusForbidden, msg: "tokens are not checked here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/x", nil)
			r.RemoteAddr, r.TLS = tt.remote, tt.tls
			if tt.token != "" {
				r.Header.Set("Authorization", "Bearer "+tt.token)
			}
			status, msg := tt.access.allow(r, tt.kind)
			if status != tt.status || !strings.Contains(msg, tt.msg) {
				t.Errorf("allow = %d %q, want %d containing %q", status, msg, tt.status, tt.msg)
			}
		})
	}
}

// TestAccessOnRoutes: the server checks access on the verbs and the admin endpoints, not
// on the probes, and answers a refusal with a JSON error.
func TestAccessOnRoutes(t *testing.T) {
	called := false
	route := wire.Route{Path: "/scheduler/filter", Verb: "filter", Kind: wire.KindScheduler, Handler: func(w http.ResponseWriter, _ *http.Request, _ wire.Call) wire.Note {
		called = true
		wire.WriteJSON(w, http.StatusOK, map[string]string{})
		return wire.Note{}
	}}
	srv, err := New(Options{Log: zap.NewNop(), MaxRequestBytes: 1 << 20, Ready: readyFlag(true), Queue: queueJobs(t), Routes: []wire.Route{route},
		Access: Access{Scheduler: []string{WayLoopback}, Admin: []string{WayLoopback}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, remote string
		status               int
	}{
		{"POST", "/scheduler/filter", "10.0.0.7:1", http.StatusUnauthorized},
		{"POST", "/scheduler/filter", "127.0.0.1:1", http.StatusOK},
		{"GET", "/debug/queue", "10.0.0.7:1", http.StatusUnauthorized},
		{"GET", "/debug/queue", "127.0.0.1:1", http.StatusOK},
		{"GET", "/healthz", "10.0.0.7:1", http.StatusOK},
		{"GET", "/readyz", "10.0.0.7:1", http.StatusOK},
	} {
		called = false
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(`{}`))
		r.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		if rec.Code != tc.status {
			t.Errorf("%s %s from %s: %d %s, want %d", tc.method, tc.path, tc.remote, rec.Code, rec.Body, tc.status)
		}
		if tc.status != http.StatusOK && (called || !strings.HasPrefix(rec.Body.String(), `{"error":`)) {
			t.Errorf("%s %s from %s: handler called %v, body %s", tc.method, tc.path, tc.remote, called, rec.Body)
		}
	}
}

// TestInFlightBound: past MaxInFlight a route answers 429, and a slot frees when a request
// ends.
func TestInFlightBound(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	route := wire.Route{Path: "/scheduler/bind", Verb: "bind", Kind: wire.KindScheduler, Handler: func(w http.ResponseWriter, _ *http.Request, _ wire.Call) wire.Note {
		entered <- struct{}{}
		<-release
		wire.WriteJSON(w, http.StatusOK, map[string]string{})
		return wire.Note{}
	}}
	srv, err := New(Options{Log: zap.NewNop(), MaxRequestBytes: 1 << 20, Ready: readyFlag(true), Routes: []wire.Route{route}, MaxInFlight: 1, Access: OpenAccess})
	if err != nil {
		t.Fatal(err)
	}
	post := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/scheduler/bind", strings.NewReader(`{}`)))
		return rec
	}
	first := make(chan int)
	go func() { first <- post().Code }()
	<-entered
	if rec := post(); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("second request while the first is served: %d %s, want 429 with Retry-After", rec.Code, rec.Body)
	}
	close(release)
	if code := <-first; code != http.StatusOK {
		t.Errorf("first request: %d", code)
	}
	if rec := post(); rec.Code != http.StatusOK {
		t.Errorf("a request after the first ended: %d %s", rec.Code, rec.Body)
	}
}

// TestAPIReviewer: a TokenReview, then a SubjectAccessReview on the non-resource URL for
// the token's user; answers are remembered, refusals too but briefly.
func TestAPIReviewer(t *testing.T) {
	client := fake.NewClientset()
	reviews := 0
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == "alice-token" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"ops"}}}
		}
		return true, tr, nil
	})
	var asked []string
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		attrs := sar.Spec.NonResourceAttributes
		asked = append(asked, sar.Spec.User+" "+attrs.Verb+" "+attrs.Path)
		sar.Status.Allowed = attrs.Path == "/debug/queue" && sar.Spec.User == "alice" && sar.Spec.Groups[0] == "ops"
		return true, sar, nil
	})
	r := NewAPIReviewer(client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews(), time.Second)
	check := func(token, path string, allowed, authenticated bool) {
		t.Helper()
		a, au, reason, err := r.Review(context.Background(), token, path)
		if err != nil || a != allowed || au != authenticated {
			t.Errorf("Review(%s, %s) = %v %v %q %v, want %v %v", token, path, a, au, reason, err, allowed, authenticated)
		}
	}
	check("alice-token", "/debug/queue", true, true)
	check("alice-token", "/debug/queue", true, true) // remembered
	check("alice-token", "/metrics", false, true)
	check("forged", "/debug/queue", false, false)
	if reviews != 3 {
		t.Errorf("%d TokenReviews, want 3 (the second ask was remembered)", reviews)
	}
	if want := "alice get /debug/queue|alice get /metrics"; strings.Join(asked, "|") != want {
		t.Errorf("SubjectAccessReviews %q, want %q", strings.Join(asked, "|"), want)
	}
}
