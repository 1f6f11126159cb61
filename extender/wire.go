package extender

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// errorBody is the JSON body of every error answer: {"error": "..."}.
type errorBody struct {
	Error string `json:"error"`
}

// httpError is an error with the HTTP status it should be answered with.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, a...)}
}

// decodeJSON reads one JSON value from the request body into v. The body is bounded by
// maxBytes: a larger body is answered 413, malformed JSON 400, each naming the problem.
func decodeJSON(w http.ResponseWriter, r *http.Request, maxBytes int64, v any) error {
	return decodeFrom(http.MaxBytesReader(w, r.Body, maxBytes), v)
}

// tooLarge is the error of a body over the limit.
func tooLarge(limit int64) error {
	return &httpError{status: http.StatusRequestEntityTooLarge,
		msg: fmt.Sprintf("request body is larger than the limit of %d bytes", limit)}
}

// decodeFrom decodes one JSON value from body into v; see decodeJSON.
func decodeFrom(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &tooBig):
			return tooLarge(tooBig.Limit)
		case errors.Is(err, io.EOF):
			return badRequest("request body is empty: want a JSON object")
		case errors.As(err, &syntax):
			return badRequest("request body is not valid JSON at byte %d: %v", syntax.Offset, err)
		case errors.As(err, &typ):
			return badRequest("request body field %q has the wrong type: got JSON %s, want %s", typ.Field, typ.Value, typ.Type)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest("request body ends in the middle of a JSON value")
		default:
			return badRequest("request body could not be decoded: %v", err)
		}
	}
	// Drain what is left so that trailing garbage within the limit is an error too.
	if dec.More() {
		return badRequest("request body has data after the JSON object")
	}
	return nil
}

// writeJSON answers status with v encoded as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err as a JSON error body, with the status an httpError carries
// (500 for any other error).
func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var he *httpError
	if errors.As(err, &he) {
		status = he.status
	}
	writeJSON(w, status, errorBody{Error: err.Error()})
}
