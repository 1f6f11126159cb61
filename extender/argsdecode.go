package extender

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"unsafe"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// Filter and prioritize carry, with nodeCacheCapable, the names of up to thousands of
// nodes. encoding/json spends most of a call's time on that array, so the request is read
// whole and the shape kube-scheduler sends (the keys pod, nodes and nodenames, each at
// most once, node names plain ASCII strings) is parsed directly: the names by hand, the
// pod and a node list by encoding/json. Any other input (escapes, unknown or repeated
// keys, anything malformed) goes to encoding/json whole, so that what is accepted, and
// every error message, stays exactly encoding/json's.

// bodyBuffers pools the buffers request bodies are read into.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody is the largest buffer put back into the pool: an occasional huge body
// should not stay in memory.
const maxPooledBody = 4 << 20

// readBody reads the whole request body, at most maxBytes of it, into a pooled buffer; the
// caller gives the buffer back with putBody once nothing refers to its bytes.
func readBody(w http.ResponseWriter, r *http.Request, maxBytes int64) (*bytes.Buffer, error) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	if r.ContentLength > 0 && r.ContentLength <= maxBytes {
		buf.Grow(int(r.ContentLength) + 1) // +1: ReadFrom wants room to see EOF
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBytes)); err != nil {
		putBody(buf)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, tooLarge(tooBig.Limit)
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	return buf, nil
}

func putBody(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBody {
		bodyBuffers.Put(buf)
	}
}

// parseExtenderArgs decodes body as encoding/json decodes it into ExtenderArgs. With
// aliasNames, node names parsed by hand point into body instead of being copied (thousands
// of small allocations a request); the caller must then keep body unchanged while the
// request is served, and nothing may keep a name past it.
func parseExtenderArgs(body []byte, aliasNames bool) (*extenderv1.ExtenderArgs, error) {
	var args extenderv1.ExtenderArgs
	if parseArgsFast(body, &args, aliasNames) {
		return &args, nil
	}
	args = extenderv1.ExtenderArgs{}
	if err := decodeJSONBytes(body, &args); err != nil {
		return nil, err
	}
	return &args, nil
}

// parseArgsFast parses the common shape of body into args and reports whether it could;
// when it could not, args may hold part of the request and must be discarded.
func parseArgsFast(b []byte, args *extenderv1.ExtenderArgs, aliasNames bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	var seenPod, seenNodes, seenNames bool
	for {
		key, next, ok := plainString(b, i, false)
		if !ok {
			return false
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		switch {
		case strings.EqualFold(key, "pod") && !seenPod:
			seenPod = true
			end, ok := valueEnd(b, i)
			if !ok || json.Unmarshal(b[i:end], &args.Pod) != nil {
				return false
			}
			i = end
		case strings.EqualFold(key, "nodes") && !seenNodes:
			seenNodes = true
			end, ok := valueEnd(b, i)
			if !ok || json.Unmarshal(b[i:end], &args.Nodes) != nil {
				return false
			}
			i = end
		case strings.EqualFold(key, "nodenames") && !seenNames:
			seenNames = true
			names, end, ok := plainStringArray(b, i, aliasNames)
			if !ok {
				return false
			}
			args.NodeNames, i = names, end
		default:
			return false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at b[i] made of printable ASCII without escapes, and
// returns it (pointing into b with alias) and the index after its closing quote.
func plainString(b []byte, i int, alias bool) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if alias && j > i+1 {
				return unsafe.String(&b[i+1], j-i-1), j + 1, true
			}
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", 0, false
		}
	}
	return "", 0, false
}

// plainStringArray reads null or an array of plain strings (see plainString) at b[i].
func plainStringArray(b []byte, i int, alias bool) (*[]string, int, bool) {
	if bytes.HasPrefix(b[i:], []byte("null")) {
		return nil, i + len("null"), true
	}
	if i >= len(b) || b[i] != '[' {
		return nil, 0, false
	}
	// Counting the commas sizes the slice once; a name cannot hold a comma-free quote.
	names := make([]string, 0, bytes.Count(b[i:], []byte{','})+1)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return &names, i + 1, true
	}
	for {
		name, next, ok := plainString(b, i, alias)
		if !ok {
			return nil, 0, false
		}
		names = append(names, name)
		i = skipSpace(b, next)
		if i >= len(b) {
			return nil, 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return &names, i + 1, true
		default:
			return nil, 0, false
		}
	}
}

// valueEnd returns the index just after the JSON value that starts at b[i]. It only
// finds the extent (strings, nesting); encoding/json validates what is inside.
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			case '"':
				end, ok := stringEnd(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			}
		}
		return 0, false
	case '"':
		return stringEnd(b, i)
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' &&
			b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		return j, j > i
	}
}

// stringEnd returns the index after the JSON string that starts at b[i].
func stringEnd(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// decodeJSONBytes decodes one JSON value from body into v, with decodeJSON's errors.
func decodeJSONBytes(body []byte, v any) error {
	return decodeFrom(bytes.NewReader(body), v)
}
