package scheduler

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// The hand-written encoders must say exactly what encoding/json says: the same value
// decodes from both.
func TestAnswerEncodersMatchEncodingJSON(t *testing.T) {
	odd := []string{"", "n1", `quo"te`, `back\slash`, "tab\tnew\nline", "<html>&", "naïve-ñode", "bad\xffutf8", "\u2028"}
	names := append([]string{}, odd...)
	failed := extenderv1.FailedNodesMap{}
	for i, n := range odd {
		failed[n] = odd[(i+1)%len(odd)]
	}
	filters := map[string]*extenderv1.ExtenderFilterResult{
		"empty":      {},
		"node names": {NodeNames: &names, FailedNodes: failed, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}},
		"one reason": {NodeNames: &[]string{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{"a": "job x waits", "b": "job x waits", "c": "other"}},
		"full nodes": {Nodes: &corev1.NodeList{Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "<b>"}}}}}, Error: "oops\n"},
	}
	for name, r := range filters {
		t.Run("filter/"+name, func(t *testing.T) {
			assertSameJSON(t, appendFilterResult(nil, r), r, &extenderv1.ExtenderFilterResult{}, &extenderv1.ExtenderFilterResult{})
		})
	}
	answers := map[string]*filterAnswer{
		"waiting, node names": {ExtenderFilterResult: extenderv1.ExtenderFilterResult{NodeNames: &[]string{}, FailedNodes: extenderv1.FailedNodesMap{}},
			unresolvable: names, reason: "job x waits \"for\" its turn"},
		"waiting, full nodes": {ExtenderFilterResult: extenderv1.ExtenderFilterResult{Nodes: &corev1.NodeList{Items: []corev1.Node{}}, FailedNodes: extenderv1.FailedNodesMap{},
			FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{"m": "also"}}, unresolvable: []string{"x1", "x2"}, reason: "waits"},
		"no list": {ExtenderFilterResult: extenderv1.ExtenderFilterResult{NodeNames: &names, FailedNodes: failed}},
	}
	for name, a := range answers {
		t.Run("filter answer/"+name, func(t *testing.T) {
			assertSameJSON(t, appendFilterAnswer(nil, a), a.result(), &extenderv1.ExtenderFilterResult{}, &extenderv1.ExtenderFilterResult{})
		})
	}
	lists := map[string]extenderv1.HostPriorityList{
		"nil":   nil,
		"empty": {},
		"odd":   {{Host: odd[3], Score: 10}, {Host: odd[7], Score: -3}, {Host: "n", Score: 0}},
	}
	for name, l := range lists {
		t.Run("prioritize/"+name, func(t *testing.T) {
			assertSameJSON(t, appendHostPriorityList(nil, l), l, &extenderv1.HostPriorityList{}, &extenderv1.HostPriorityList{})
		})
	}
}

// assertSameJSON checks that got is valid JSON and decodes to what json.Marshal(v) decodes to.
func assertSameJSON[T any](t *testing.T, got []byte, v any, fromGot, fromStd *T) {
	t.Helper()
	if !json.Valid(got) {
		t.Fatalf("not valid JSON: %s", got)
	}
	std, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, fromGot); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(std, fromStd); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromStd, fromGot); diff != "" {
		t.Errorf("decoded (-encoding/json +ours):\n%s\nours: %s\nstd:  %s", diff, got, std)
	}
}

// TestAppendJSONStringIsEncodingJSON: byte for byte what json.Marshal writes, for every
// byte value alone and inside a name.
func TestAppendJSONStringIsEncodingJSON(t *testing.T) {
	var inputs []string
	for c := range 256 {
		inputs = append(inputs, string([]byte{byte(c)}), "node-"+string([]byte{byte(c)})+"-1")
	}
	inputs = append(inputs, "", "node-00001", "naïve", "\u2028", "a<b>&c")
	for _, s := range inputs {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("appendJSONString(%q) = %s, want x%s", s, got, want)
		}
	}
}
