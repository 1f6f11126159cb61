package scheduler

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// referenceArgs decodes body with encoding/json alone, as the extender did before the fast
// path: the behaviour parseExtenderArgs must keep.
func referenceArgs(body []byte) (*extenderv1.ExtenderArgs, error) {
	var args extenderv1.ExtenderArgs
	if err := decodeJSONBytes(body, &args); err != nil {
		return nil, err
	}
	return &args, nil
}

// checkSameAsReference fails t when parseExtenderArgs and encoding/json disagree on body:
// a different request, or a different error.
func checkSameAsReference(t *testing.T, body []byte) {
	t.Helper()
	want, wantErr := referenceArgs(body)
	got, gotErr := parseExtenderArgs(body, nil)
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Fatalf("error %v, encoding/json's %v\nbody %q", gotErr, wantErr, body)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("request differs from encoding/json's (-json +parsed):\n%s\nbody %q", diff, body)
	}
	// Names looked up in a view read the same after the body's memory is reused, and say
	// which the view knows.
	view := nodeTable{"n1": "n1", "a": "a"}
	names := nodeNames{lookup: view, list: []string{"left", "over", "from", "a", "previous", "call"}, known: make([]bool, 6)}
	reused := bytes.Clone(body)
	looked, _ := parseExtenderArgs(reused, &names)
	for i := range reused {
		reused[i] = 'x'
	}
	if diff := cmp.Diff(want, looked); diff != "" {
		t.Fatalf("request with looked-up names differs from encoding/json's (-json +parsed):\n%s\nbody %q", diff, body)
	}
	if looked != nil && looked.NodeNames == &names.list {
		for i, name := range names.list {
			if _, ok := view[name]; names.known[i] != ok {
				t.Fatalf("known[%d] = %t for %q\nbody %q", i, names.known[i], name, body)
			}
		}
	}
}

// nodeTable is a NodeLookup of fixed names, which it answers with its own strings.
type nodeTable map[string]string

func (t nodeTable) NodeName(b []byte) (string, bool) {
	if name, ok := t[string(b)]; ok {
		return name, true
	}
	return string(b), false
}

// TestParseKnownNamesWithoutAllocating: names the view knows cost no allocation, however
// many the request has.
func TestParseKnownNamesWithoutAllocating(t *testing.T) {
	view := nodeTable{}
	for i := range 1000 {
		name := "node-" + strconv.Itoa(i)
		view[name] = name
	}
	allocs := func(n int) float64 {
		quoted := make([]string, 0, n)
		for i := range n {
			quoted = append(quoted, strconv.Quote("node-"+strconv.Itoa(i)))
		}
		body := []byte(`{"pod":{"metadata":{"name":"p"}},"nodenames":[` + strings.Join(quoted, ",") + `]}`)
		names := nodeNames{lookup: view}
		return testing.AllocsPerRun(20, func() {
			if _, err := parseExtenderArgs(body, &names); err != nil || len(names.list) != n {
				t.Fatalf("parsed %d names, error %v", len(names.list), err)
			}
		})
	}
	if few, many := allocs(10), allocs(1000); many != few {
		t.Errorf("%v allocations for 1000 known names, %v for 10", many, few)
	}
}

func TestParseExtenderArgs(t *testing.T) {
	pod := `{"metadata":{"name":"p","namespace":"default","uid":"u1","labels":{"a":"b}]"}},"spec":{"containers":[{"name":"c"}]}}`
	tests := []struct {
		name string
		body string
		fast bool // parsed without encoding/json's whole-body decode
	}{
		{"node names", `{"pod":` + pod + `,"nodes":null,"nodenames":["n1","n2","n3"]}`, true},
		{"whitespace everywhere", " \n{ \"pod\" :\t" + pod + " , \"nodenames\" : [ \"n1\" , \"n2\" ] }\r\n", true},
		{"empty names", `{"pod":` + pod + `,"nodenames":[]}`, true},
		{"null names", `{"pod":` + pod + `,"nodenames":null}`, true},
		{"node list", `{"pod":` + pod + `,"nodes":{"items":[{"metadata":{"name":"n1"}}]}}`, true},
		{"keys in another case", `{"Pod":` + pod + `,"NodeNames":["n1"]}`, true},
		{"null pod", `{"pod":null,"nodenames":["n1"]}`, true},
		{"empty object", `{}`, true},
		{"escaped name", `{"pod":` + pod + `,"nodenames":["n\u00311","n2"]}`, false},
		{"non-ASCII name", `{"pod":` + pod + `,"nodenames":["nö"]}`, false},
		{"repeated key", `{"pod":` + pod + `,"nodenames":["n1"],"nodenames":["n2"]}`, false},
		{"repeated key in another case", `{"pod":` + pod + `,"pod":{"metadata":{"name":"q"}},"nodenames":["n1"]}`, false},
		{"unknown key", `{"pod":` + pod + `,"extra":1,"nodenames":["n1"]}`, false},
		{"name not a string", `{"pod":` + pod + `,"nodenames":[1]}`, false},
		{"pod not an object", `{"pod":"x","nodenames":["n1"]}`, false},
		{"malformed pod", `{"pod":{"metadata":{"name":"p",}},"nodenames":["n1"]}`, false},
		{"trailing comma", `{"pod":` + pod + `,"nodenames":["n1",]}`, false},
		{"data after the object", `{"pod":` + pod + `,"nodenames":["n1"]} {}`, false},
		{"truncated", `{"pod":` + pod + `,"nodenames":["n1"`, false},
		{"not an object", `["n1"]`, false},
		{"empty body", ``, false},
		{"nullish names", `{"pod":` + pod + `,"nodenames":nullx}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args extenderv1.ExtenderArgs
			if got := parseArgsFast([]byte(tt.body), &args, nil); got != tt.fast {
				t.Errorf("fast path taken = %t, want %t", got, tt.fast)
			}
			checkSameAsReference(t, []byte(tt.body))
		})
	}
}

// FuzzParseExtenderArgs: whatever the body, parseExtenderArgs answers what encoding/json
// answers, request or error.
func FuzzParseExtenderArgs(f *testing.F) {
	for _, dir := range []string{"FuzzFilter", "FuzzPrioritize"} {
		files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", dir, "*"))
		for _, file := range files {
			if body, ok := corpusBody(file); ok {
				f.Add(body)
			}
		}
	}
	f.Add([]byte(`{"pod":{"metadata":{"name":"p"}},"nodenames":["a","b"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSameAsReference(t, body)
	})
}

// corpusBody reads the one []byte value of a committed fuzz corpus file.
func corpusBody(file string) ([]byte, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, false
	}
	// The format is "go test fuzz v1" then one Go literal per line: []byte("...").
	const prefix = "[]byte("
	for _, line := range strings.Split(string(data), "\n") {
		if quoted, ok := strings.CutPrefix(line, prefix); ok && strings.HasSuffix(quoted, ")") {
			if s, err := strconv.Unquote(strings.TrimSuffix(quoted, ")")); err == nil {
				return []byte(s), true
			}
		}
	}
	return nil, false
}
