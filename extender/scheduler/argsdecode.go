package scheduler

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/cps-extender/cps-extender/extender/wire"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// Filter and prioritize carry, with nodeCacheCapable, the names of up to thousands of
// nodes. encoding/json spends most of a call's time on that array, so the request is read
// whole and the shape kube-scheduler sends (the keys pod, nodes and nodenames, each at
// most once, node names plain ASCII strings) is parsed directly: the names by hand, the
// pod and a node list by encoding/json. Any other input (escapes, unknown or repeated
// keys, anything malformed) goes to encoding/json whole, so that what is accepted, and
// every error message, stays exactly encoding/json's.

// scratch is the memory of one filter or prioritize call that can serve the next: the
// body, the node names parsed from it and the answer's lists. At 5000 nodes that is a few
// hundred KB a call; pooled, a busy scheduler's calls do not keep the garbage collector
// running (and taxing every call) on a heap the size of the cluster's informers.
type scratch struct {
	body   bytes.Buffer
	names  nodeNames
	passed []string
	pass   []bool
	scores extenderv1.HostPriorityList
	pool   *sync.Pool // the pool to give it back to
}

// maxPooledBody is the largest body buffer kept for reuse: an occasional huge body should
// not stay in memory.
const maxPooledBody = 4 << 20

// getScratch takes a scratch from pool.
func getScratch(pool *sync.Pool) *scratch {
	sc, ok := pool.Get().(*scratch)
	if !ok {
		sc = &scratch{}
	}
	sc.pool = pool
	return sc
}

// release gives sc back; nothing of the call may be used after it.
func (sc *scratch) release() {
	if sc.body.Cap() > maxPooledBody {
		return
	}
	sc.body.Reset()
	clear(sc.names.list[:cap(sc.names.list)])
	sc.names.lookup = nil
	clear(sc.passed[:cap(sc.passed)])
	clear(sc.scores[:cap(sc.scores)])
	sc.pool.Put(sc)
}

// trustedLength is how much of a body's declared length readBody allocates ahead: a
// caller that declares 60 MB and sends nothing must not have them allocated. Past it the
// buffer grows as the bytes arrive (and keeps its size in the pool for the next request).
const trustedLength = 64 << 10

// readBody reads the whole request body, at most maxBytes of it, into sc.body.
func readBody(w http.ResponseWriter, r *http.Request, maxBytes int64, sc *scratch) error {
	buf := &sc.body
	buf.Reset()
	if r.ContentLength > 0 && r.ContentLength <= maxBytes {
		buf.Grow(int(min(r.ContentLength, trustedLength)) + 1) // +1: ReadFrom wants room to see EOF
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBytes)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return wire.TooLarge(tooBig.Limit)
		}
		return wire.BadRequest("reading the request body: %v", err)
	}
	return nil
}

// nodeNames receives the node names the fast parser reads, in lists reused call after call.
// Each name is the string lookup gives for the name's bytes: the cluster view's own string
// for a node it knows, so that thousands of names a request cost no allocation, and a copy
// for any other. No name points into the body.
type nodeNames struct {
	lookup NodeLookup
	list   []string
	known  []bool // known[i]: the view knows list[i]
}

// parseExtenderArgs decodes body as encoding/json decodes it into ExtenderArgs. With
// names, node names parsed by hand are names.lookup's strings, in names.list (and
// args.NodeNames is &names.list); otherwise, and on encoding/json's path, they are copies.
func parseExtenderArgs(body []byte, names *nodeNames) (*extenderv1.ExtenderArgs, error) {
	var args extenderv1.ExtenderArgs
	if parseArgsFast(body, &args, names) {
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
func parseArgsFast(b []byte, args *extenderv1.ExtenderArgs, names *nodeNames) bool {
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
		key, next, ok := plainString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		switch {
		case bytes.EqualFold(key, []byte("pod")) && !seenPod:
			seenPod = true
			if i, ok = unmarshalValueAt(b, i, &args.Pod); !ok {
				return false
			}
		case bytes.EqualFold(key, []byte("nodes")) && !seenNodes:
			seenNodes = true
			if i, ok = unmarshalValueAt(b, i, &args.Nodes); !ok {
				return false
			}
		case bytes.EqualFold(key, []byte("nodenames")) && !seenNames:
			seenNames = true
			list, end, ok := plainStringArray(b, i, names)
			if !ok {
				return false
			}
			args.NodeNames, i = list, end
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

// unmarshalValueAt decodes the JSON value at b[i] into v with encoding/json and returns the
// index after it.
func unmarshalValueAt(b []byte, i int, v any) (int, bool) {
	end, ok := valueEnd(b, i)
	if !ok || json.Unmarshal(b[i:end], v) != nil {
		return 0, false
	}
	return end, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at b[i] made of printable ASCII without escapes, and
// returns its contents (a part of b) and the index after its closing quote.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// plainStringArray reads null or an array of plain strings (see plainString) at b[i]. With
// into, the strings are into.lookup's for their bytes, in into.list[:0] (known in
// into.known[:0]); without, copies.
func plainStringArray(b []byte, i int, into *nodeNames) (*[]string, int, bool) {
	if bytes.HasPrefix(b[i:], []byte("null")) {
		return nil, i + len("null"), true
	}
	if i >= len(b) || b[i] != '[' {
		return nil, 0, false
	}
	var names []string
	var known []bool
	if into != nil {
		names, known = into.list[:0], into.known[:0]
	} else {
		// Counting the commas sizes the slice once; a name cannot hold a comma-free quote.
		names = make([]string, 0, bytes.Count(b[i:], []byte{','})+1)
	}
	list := func() *[]string {
		if into != nil {
			into.list, into.known = names, known
			return &into.list
		}
		return &names
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return list(), i + 1, true
	}
	for {
		s, next, ok := plainString(b, i)
		if !ok {
			return nil, 0, false
		}
		if into != nil {
			name, isKnown := into.lookup.NodeName(s)
			names, known = append(names, name), append(known, isKnown)
		} else {
			names = append(names, string(s))
		}
		i = skipSpace(b, next)
		if i >= len(b) {
			return nil, 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return list(), i + 1, true
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
	return wire.DecodeFrom(bytes.NewReader(body), v)
}

// grown returns buf with length n, reusing its array when it is large enough. The elements
// are left as they were: the caller writes each before reading it.
func grown[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}
