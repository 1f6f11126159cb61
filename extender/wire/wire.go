// Package wire is the JSON plumbing every HTTP answer shares: bounded decoding with errors that
// name the problem, and error bodies with their status. It imports only the standard library.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ErrorBody is the JSON body of every error answer: {"error": "..."}.
type ErrorBody struct {
	Error string `json:"error"`
}

// HTTPError is an error with the HTTP status it should be answered with.
type HTTPError struct {
	status int
	msg    string
}

func (e *HTTPError) Error() string { return e.msg }

func BadRequest(format string, a ...any) error {
	return &HTTPError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, a...)}
}

// DecodeJSON reads one JSON value from the request body into v. The body is bounded by
// maxBytes: a larger body is answered 413, malformed JSON 400, each naming the problem.
func DecodeJSON(w http.ResponseWriter, r *http.Request, maxBytes int64, v any) error {
	return DecodeFrom(http.MaxBytesReader(w, r.Body, maxBytes), v)
}

// Unavailable is the error of a request that cannot be served now (503).
func Unavailable(format string, a ...any) error {
	return &HTTPError{status: http.StatusServiceUnavailable, msg: fmt.Sprintf(format, a...)}
}

// TooLarge is the error of a body over the limit.
func TooLarge(limit int64) error {
	return &HTTPError{status: http.StatusRequestEntityTooLarge,
		msg: fmt.Sprintf("request body is larger than the limit of %d bytes", limit)}
}

// DecodeFrom decodes one JSON value from body into v; see DecodeJSON.
func DecodeFrom(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &tooBig):
			return TooLarge(tooBig.Limit)
		case errors.Is(err, io.EOF):
			return BadRequest("request body is empty: want a JSON object")
		case errors.As(err, &syntax):
			return BadRequest("request body is not valid JSON at byte %d: %v", syntax.Offset, err)
		case errors.As(err, &typ):
			return BadRequest("request body field %q has the wrong type: got JSON %s, want %s", typ.Field, typ.Value, typ.Type)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return BadRequest("request body ends in the middle of a JSON value")
		default:
			return BadRequest("request body could not be decoded: %v", err)
		}
	}
	// Drain what is left so that trailing garbage within the limit is an error too.
	if dec.More() {
		return BadRequest("request body has data after the JSON object")
	}
	return nil
}

// WriteJSON answers status with v encoded as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers err as a JSON error body, with the status an HTTPError carries
// (500 for any other error).
func WriteError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var he *HTTPError
	if errors.As(err, &he) {
		status = he.status
	}
	WriteJSON(w, status, ErrorBody{Error: err.Error()})
}

// Note is what a handler decided, for the access log: the pod (or task, or job) it decided
// about and a short summary.
type Note struct {
	Pod      string
	Decision string
}

// Call is what the server tells a handler about its request: the body limit, and whether
// the access log prints successful requests (when not, a handler may skip formatting its
// Note: filter and prioritize answer every pod attempt).
type Call struct {
	MaxBytes int64
	Detailed bool
}

// Handler answers one request and says what it decided.
type Handler func(w http.ResponseWriter, r *http.Request, c Call) Note

// The kinds of routes, which decide who may call them (the server's access check).
const (
	// KindScheduler routes are kube-scheduler's verbs.
	KindScheduler = "scheduler"
	// KindVolcano routes are Volcano's verbs.
	KindVolcano = "volcano"
	// KindWebhook routes are the API server's admission webhook calls.
	KindWebhook = "webhook"
)

// Route is one endpoint a part of the extender serves: POST Path, counted and logged as
// Verb. NeedsView routes answer 503 until the cluster view has synced. Kind says who may
// call it. Held routes may wait long for their answer (bind): they have a larger share
// of the requests served at once.
type Route struct {
	Path      string
	Verb      string
	Handler   Handler
	NeedsView bool
	Kind      string
	Held      bool
}
