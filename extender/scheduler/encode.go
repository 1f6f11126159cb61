package scheduler

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// The answers of filter and prioritize name every candidate node, thousands a call, on
// kube-scheduler's hot path. encoding/json reflects over each element and sorts map keys;
// these encoders append the same JSON (object keys in map order, which JSON leaves free)
// into a pooled buffer instead.

var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// writeAnswer answers 200 with the JSON body appendBody builds.
func writeAnswer(w http.ResponseWriter, appendBody func([]byte) []byte) {
	bp := answerBuffers.Get().(*[]byte)
	body := appendBody((*bp)[:0])
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	// A known length: the answer goes out in one piece, not in chunks (at 5000 nodes a
	// prioritize answer is about 175 KB).
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	if cap(body) <= 4<<20 { // do not keep a huge buffer for the rare huge answer
		*bp = body
		answerBuffers.Put(bp)
	}
}

// plainJSON marks the bytes encoding/json copies into a string as they are: printable
// ASCII but the quote, the backslash and the HTML characters it escapes.
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

// appendJSONString appends s as a JSON string. Plain printable ASCII is copied; anything
// else goes through encoding/json, so the escaping is exactly the standard one.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainJSON[s[i]] {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendHostPriorityList is json.Marshal of a prioritize answer.
func appendHostPriorityList(b []byte, list extenderv1.HostPriorityList) []byte {
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, hp := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Host":`...)
		b = appendJSONString(b, hp.Host)
		b = append(b, `,"Score":`...)
		b = strconv.AppendInt(b, hp.Score, 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendFailedNodes appends a FailedNodesMap; nil is null, as encoding/json writes it.
func appendFailedNodes(b []byte, m extenderv1.FailedNodesMap) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	first := true
	var lastReason string
	var lastQuoted []byte
	for node, reason := range m {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, node)
		b = append(b, ':')
		// A waiting pod's answer repeats one reason for every node: quote it once.
		if lastQuoted == nil || reason != lastReason {
			lastReason, lastQuoted = reason, appendJSONString(nil, reason)
		}
		b = append(b, lastQuoted...)
	}
	return append(b, '}')
}

// appendNamesWithReason writes a FailedNodesMap of names, all for one reason, and the
// entries of more, as one JSON object; names is not empty.
func appendNamesWithReason(b []byte, names []string, reason string, more extenderv1.FailedNodesMap) []byte {
	b = append(b, '{')
	quoted := appendJSONString(nil, reason) // one reason for every node: quoted once
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, n)
		b = append(b, ':')
		b = append(b, quoted...)
	}
	for n, why := range more {
		b = append(b, ',')
		b = appendJSONString(b, n)
		b = append(b, ':')
		b = appendJSONString(b, why)
	}
	return append(b, '}')
}

// appendFilterResult is json.Marshal of a filter answer. Full Node objects (nodeCacheCapable
// false) go through encoding/json: their shape is Kubernetes', not ours.
func appendFilterResult(b []byte, r *extenderv1.ExtenderFilterResult) []byte {
	return appendFilterAnswer(b, &filterAnswer{ExtenderFilterResult: *r})
}

// appendFilterAnswer is json.Marshal of a.result(), without building its map.
func appendFilterAnswer(b []byte, a *filterAnswer) []byte {
	r := &a.ExtenderFilterResult
	b = append(b, `{"Nodes":`...)
	if r.Nodes == nil {
		b = append(b, "null"...)
	} else {
		nodes, err := json.Marshal(r.Nodes)
		if err != nil { // a NodeList that decoded always encodes; keep the answer valid
			nodes = []byte("null")
		}
		b = append(b, nodes...)
	}
	b = append(b, `,"NodeNames":`...)
	if r.NodeNames == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, n := range *r.NodeNames {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, n)
		}
		b = append(b, ']')
	}
	b = append(b, `,"FailedNodes":`...)
	b = appendFailedNodes(b, r.FailedNodes)
	b = append(b, `,"FailedAndUnresolvableNodes":`...)
	if len(a.unresolvable) == 0 {
		b = appendFailedNodes(b, r.FailedAndUnresolvableNodes)
	} else {
		b = appendNamesWithReason(b, a.unresolvable, a.reason, r.FailedAndUnresolvableNodes)
	}
	b = append(b, `,"Error":`...)
	b = appendJSONString(b, r.Error)
	return append(b, '}')
}
