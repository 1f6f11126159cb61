package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	gocache "github.com/patrickmn/go-cache"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/cps-extender/cps-extender/extender/wire"
)

// The ways a caller may be let in; see config.AccessConfig.
const (
	WayLoopback          = "loopback"
	WayClientCertificate = "clientCertificate"
	WayToken             = "token"
	WayAnyone            = "anyone"
)

// Access lists, per kind of endpoint, the ways that let a caller in.
type Access struct {
	// Scheduler is for the routes of kind wire.KindScheduler, Volcano for wire.KindVolcano,
	// Admin for /debug/*, /ui and /metrics. Webhook routes are open (they run on a
	// listener of their own and only answer the request they are given).
	Scheduler, Volcano, Admin []string
	// ClientCAs gives the pool a client certificate must chain to (nil: none does).
	ClientCAs func() *x509.CertPool
	// ClientNames, when not empty, are the certificate common names clientCertificate lets
	// in; else any certificate that chains to ClientCAs does.
	ClientNames []string
	// Reviewer checks bearer tokens (the token way); nil lets no token in.
	Reviewer Reviewer
}

// ways are the ways that let a caller into routes of kind.
func (a Access) ways(kind string) []string {
	switch kind {
	case wire.KindScheduler:
		return a.Scheduler
	case wire.KindVolcano:
		return a.Volcano
	case wire.KindWebhook:
		return []string{WayAnyone}
	default:
		return a.Admin
	}
}

// Reviewer tells who a bearer token belongs to and whether they may get a URL path: the
// API server's TokenReview and SubjectAccessReview, as kube-rbac-proxy and the API
// server's own delegated authentication do.
type Reviewer interface {
	// Review answers whether the token's user may get path; reason says why not (or names
	// the user when allowed). An error is a failure to ask, not a refusal.
	Review(ctx context.Context, token, path string) (allowed, authenticated bool, reason string, err error)
}

// allow decides whether r may reach an endpoint of kind. It answers 0 to let it in, else
// the status (401: no credential that could let it in; 403: the credential given does not,
// or the caller is not where it must be; 503: the token could not be checked) and the
// message.
func (a Access) allow(r *http.Request, kind string) (int, string) {
	ways := a.ways(kind)
	var refused []string
	credential := false
	for _, way := range ways {
		switch way {
		case WayAnyone:
			return 0, ""
		case WayLoopback:
			if isLoopback(r.RemoteAddr) {
				return 0, ""
			}
			refused = append(refused, "the call does not come from loopback")
		case WayClientCertificate:
			if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
				refused = append(refused, "no client certificate")
				continue
			}
			credential = true
			if !a.verified(r.TLS.PeerCertificates) {
				refused = append(refused, "the client certificate is not signed by tls.clientCAFile")
				continue
			}
			if cn := r.TLS.PeerCertificates[0].Subject.CommonName; len(a.ClientNames) > 0 && !slices.Contains(a.ClientNames, cn) {
				refused = append(refused, fmt.Sprintf("the client certificate's name %q is not in tls.clientNames", cn))
				continue
			}
			return 0, ""
		case WayToken:
			token, ok := bearer(r)
			if !ok {
				refused = append(refused, "no bearer token")
				continue
			}
			credential = true
			if a.Reviewer == nil {
				refused = append(refused, "tokens are not checked here")
				continue
			}
			allowed, authenticated, reason, err := a.Reviewer.Review(r.Context(), token, r.URL.Path)
			switch {
			case err != nil:
				return http.StatusServiceUnavailable, "the bearer token could not be checked: " + err.Error()
			case allowed:
				return 0, ""
			case !authenticated:
				credential = false // an unknown token is no credential: 401, as the API server answers
				refused = append(refused, "the bearer token is not valid")
			default:
				refused = append(refused, reason)
			}
		}
	}
	status := http.StatusForbidden
	if !credential {
		status = http.StatusUnauthorized
	}
	return status, fmt.Sprintf("%s %s takes callers by %s; refused: %s", r.Method, r.URL.Path, strings.Join(ways, " or "), strings.Join(refused, "; "))
}

// verified reports whether a client's certificate chain (leaf first) chains to the client
// CAs and is good for client authentication. The TLS handshake asks for a certificate but
// does not check it: a caller with a wrong one gets a JSON 403 from the access check, not a
// handshake failure it cannot read, and the probes and /metrics need none.
func (a Access) verified(chain []*x509.Certificate) bool {
	if a.ClientCAs == nil || len(chain) == 0 {
		return false
	}
	roots := a.ClientCAs()
	if roots == nil {
		return false
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// guard wraps h with the access check of kind.
func (s *Server) guard(kind string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if status, msg := s.access.allow(r, kind); status != 0 {
			s.metrics.ObserveRefused(kind, status)
			wire.WriteJSON(w, status, wire.ErrorBody{Error: msg})
			return
		}
		h(w, r)
	}
}

// isLoopback reports whether a remote address (host:port) is a loopback address.
func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearer returns the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// ClientCAs loads a PEM bundle of client certificate authorities.
func ClientCAs(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in the client CA bundle")
	}
	return pool, nil
}

// APIReviewer is a Reviewer that asks the API server, and remembers its answers for a
// while: a scrape every 15 s, or a page that refreshes itself, costs two API calls a
// minute, not two a request.
type APIReviewer struct {
	tokens  authenticationclient.TokenReviewInterface
	access  authorizationclient.SubjectAccessReviewInterface
	timeout time.Duration
	// allowTTL and denyTTL are how long an answer is kept: a refusal briefly, so that a
	// newly granted user does not wait long.
	allowTTL, denyTTL time.Duration
	answers           *gocache.Cache // sha256(token) + "\x00" + path -> review
}

type review struct {
	allowed, authenticated bool
	reason                 string
}

// NewAPIReviewer asks through the given clients, each call bounded by timeout.
//
// Not k8s.io/apiserver's delegating authenticator and authorizer: they do the same two
// reviews with caches, but bring 106 more packages (cel-go, gRPC, OpenTelemetry,
// konnectivity) into the binary, which took 3 min 40 s more to build on the development
// machine and would add as much to every cold build of CI.
func NewAPIReviewer(tokens authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface, timeout time.Duration) *APIReviewer {
	return &APIReviewer{tokens: tokens, access: access, timeout: timeout, allowTTL: time.Minute, denyTTL: 10 * time.Second,
		answers: gocache.New(time.Minute, 5*time.Minute)}
}

// Review checks token with a TokenReview, then whether its user may `get` path with a
// SubjectAccessReview on the non-resource URL.
func (a *APIReviewer) Review(ctx context.Context, token, path string) (bool, bool, string, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:]) + "\x00" + path
	if v, ok := a.answers.Get(key); ok {
		rv := v.(review)
		return rv.allowed, rv.authenticated, rv.reason, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	tr, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return false, false, "", fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		a.answers.Set(key, review{}, a.denyTTL)
		return false, false, "", nil
	}
	user := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, true, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	rv := review{allowed: sar.Status.Allowed, authenticated: true}
	ttl := a.allowTTL
	if !rv.allowed {
		rv.reason = fmt.Sprintf("user %q may not get %s", user.Username, path)
		if sar.Status.Reason != "" {
			rv.reason += " (" + sar.Status.Reason + ")"
		}
		ttl = a.denyTTL
	}
	a.answers.Set(key, rv, ttl)
	return rv.allowed, rv.authenticated, rv.reason, nil
}

// OpenAccess lets every caller into every endpoint: for tests that drive the handlers
// through ServeHTTP, where each request comes from a made-up address.
var OpenAccess = Access{Scheduler: []string{WayAnyone}, Volcano: []string{WayAnyone}, Admin: []string{WayAnyone}}
