package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/internal/fixture"
	"github.com/cps-extender/cps-extender/priority"
)

// apiServer is a stand-in for kube-apiserver's pods/binding and pod GET in namespace ns,
// over real HTTP, so that the binder meets client-go's own errors: a Binding it commits may
// have its answer dropped (the connection closed before a byte of the answer), and reads
// may fail.
type apiServer struct {
	mu sync.Mutex
	// node is where each pod is bound ("" for nowhere), uid its UID; a pod not in uid does
	// not exist.
	node map[string]string
	uid  map[string]types.UID
	// commit: a Binding is committed (when the pod is not bound yet); drop: the answer to
	// the first Binding of these pods is then lost; status, when set, is every Binding's
	// answer instead (nothing committed).
	commit bool
	drop   map[string]bool
	status int
	// failReads is how many pod reads answer 503 first.
	failReads int
	posts     int
	reads     int
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/namespaces/ns/pods/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	name, sub, _ := strings.Cut(rest, "/")
	switch {
	case r.Method == http.MethodPost && sub == "binding":
		s.posts++
		var b corev1.Binding
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		uid, exists := s.uid[name]
		switch {
		case s.status != 0:
			writeStatus(w, s.status, "refused")
			return
		case !exists:
			writeStatus(w, http.StatusNotFound, `pods "`+name+`" not found`)
			return
		case s.node[name] != "":
			writeStatus(w, http.StatusConflict, "pod "+name+` is already assigned to node "`+s.node[name]+`"`)
			return
		case b.UID != "" && b.UID != uid:
			writeStatus(w, http.StatusConflict, "Precondition failed: UID in precondition")
			return
		}
		if s.commit {
			s.node[name] = b.Target.Name
		}
		if s.drop[name] {
			delete(s.drop, name)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // the answer is lost: client-go sees the connection end
			}
			return
		}
		writeStatus(w, http.StatusCreated, "")
	case r.Method == http.MethodGet && sub == "":
		s.reads++
		if s.failReads > 0 {
			s.failReads--
			writeStatus(w, http.StatusServiceUnavailable, "the API server is starting")
			return
		}
		uid, exists := s.uid[name]
		if !exists {
			writeStatus(w, http.StatusNotFound, `pods "`+name+`" not found`)
			return
		}
		pod := corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}, Spec: corev1.PodSpec{NodeName: s.node[name]}}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&pod)
	default:
		http.NotFound(w, r)
	}
}

// client is a clientset talking to s over HTTP.
func (s *apiServer) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func writeStatus(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Message: msg}
	switch code {
	case http.StatusCreated:
		st.Status = metav1.StatusSuccess
	case http.StatusConflict:
		st.Reason = metav1.StatusReasonConflict
	case http.StatusNotFound:
		st.Reason = metav1.StatusReasonNotFound
	case http.StatusForbidden:
		st.Reason = metav1.StatusReasonForbidden
	}
	_ = json.NewEncoder(w).Encode(&st)
}

// TestAPIBinderSettlesAmbiguousBindings: a Binding whose answer is lost, or that is refused
// as a conflict, is settled by reading the pod: bound is bound, whatever the answer; a
// Binding the API server refused for good is not read about.
func TestAPIBinderSettlesAmbiguousBindings(t *testing.T) {
	// pod is the one pod "p" a test's server has, and how it answers.
	type pod struct {
		uid          types.UID
		node         string
		commit, drop bool
		status       int
		failReads    int
	}
	tests := []struct {
		name   string
		server pod
		ref    gang.PodRef
		// wantErr is a part of the error ("" for none); reads, when >= 0, how many reads.
		wantErr  string
		wantNode string
		reads    int
	}{
		{name: "answered", server: pod{uid: "u1", commit: true}, ref: podRef("u1"), wantNode: "n1", reads: 0},
		{name: "committed, answer lost: bound", server: pod{uid: "u1", commit: true, drop: true}, ref: podRef("u1"), wantNode: "n1", reads: 1},
		{name: "committed, answer lost, the API server answers reads only later: bound",
			server: pod{uid: "u1", commit: true, drop: true, failReads: 3}, ref: podRef("u1"), wantNode: "n1", reads: 4},
		{name: "not committed, answer lost: not bound", server: pod{uid: "u1", drop: true}, ref: podRef("u1"),
			wantErr: "the pod is not bound", reads: 1},
		{name: "a conflict because it is bound already (a retry of a Binding whose answer was lost)",
			server: pod{uid: "u1", node: "n1"}, ref: podRef("u1"), wantNode: "n1", reads: 1},
		{name: "bound to another node by someone else: bound", server: pod{uid: "u1", node: "n2"}, ref: podRef("u1"), wantNode: "n2", reads: 1},
		{name: "a conflict because the pod was replaced", server: pod{uid: "u2", commit: true}, ref: podRef("u1"),
			wantErr: "replaced by another of the same name", reads: 1},
		{name: "gone", server: pod{status: http.StatusNotFound}, ref: podRef("u1"), wantErr: "no longer exists", reads: 0},
		{name: "forbidden: refused for good, not read about", server: pod{uid: "u1", status: http.StatusForbidden}, ref: podRef("u1"),
			wantErr: "refused", reads: 0},
		{name: "answer lost and no read answers: not known", server: pod{uid: "u1", commit: true, drop: true, failReads: 1 << 20}, ref: podRef("u1"),
			wantErr: "whether it is bound is not known", reads: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &apiServer{uid: map[string]types.UID{}, node: map[string]string{"p": tt.server.node},
				commit: tt.server.commit, drop: map[string]bool{"p": tt.server.drop}, status: tt.server.status, failReads: tt.server.failReads}
			if tt.server.uid != "" {
				srv.uid["p"] = tt.server.uid
			}
			b := NewAPIBinder(srv.client(t), time.Second)
			b.settleEvery = 10 * time.Millisecond
			err := b.Bind(context.Background(), tt.ref, "n1")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Bind: %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Bind: %v, want an error with %q", err, tt.wantErr)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if tt.wantNode != "" && srv.node["p"] != tt.wantNode {
				t.Errorf("pod on %q, want %q", srv.node["p"], tt.wantNode)
			}
			if tt.reads >= 0 && srv.reads != tt.reads {
				t.Errorf("%d reads of the pod, want %d", srv.reads, tt.reads)
			}
			if srv.posts != 1 {
				t.Errorf("%d Bindings posted, want 1", srv.posts)
			}
		})
	}
}

func podRef(uid types.UID) gang.PodRef { return gang.PodRef{Namespace: "ns", Name: "p", UID: uid} }

// TestGateBindsAGangWhosePSBindingAnswerIsLost: a 12-pod gang is released; its PS's Binding
// is committed and the answer lost (the connection closed, as when the API server is
// killed mid-answer). The binder settles it by reading the pod, the PS is bound, and so the
// workers are bound too: the gang is not called failed (seen: the gate refused all 11
// workers, and the job stayed 1 of 12 bound until crash repair).
func TestGateBindsAGangWhosePSBindingAnswerIsLost(t *testing.T) {
	job := priority.Job{Key: "ns/big", MinMember: 12, Created: time.Unix(1_600_000_000, 0)}
	srv := &apiServer{uid: map[string]types.UID{}, node: map[string]string{}, commit: true, drop: map[string]bool{"big-ps-0": true}}
	names := []string{"big-ps-0"}
	job.Pods = append(job.Pods, fixture.GangPod("big-ps-0", priority.RolePS, 0, priority.PodPending, ""))
	for i := range 11 {
		name := fmt.Sprintf("big-w-%d", i)
		names = append(names, name)
		job.Pods = append(job.Pods, fixture.GangPod(name, priority.RoleWorker, i, priority.PodPending, ""))
	}
	for i := range job.Pods {
		job.Pods[i].Request = priority.Resources{"cpu": 100}
	}
	for _, n := range names {
		srv.uid[n] = types.UID("uid-" + n)
	}
	view := newFakeJobView(t, []priority.Job{job}, fixture.BigNodes())
	binder := NewAPIBinder(srv.client(t), 5*time.Second)
	binder.settleEvery = 10 * time.Millisecond
	g := newTestGate(view, binder, time.Minute)
	for pod, e := range bindConcurrently(context.Background(), g, names...) {
		if e != "" {
			t.Errorf("%s: %s", pod, e)
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, n := range names {
		if srv.node[n] != "n1" {
			t.Errorf("%s bound to %q, want n1", n, srv.node[n])
		}
	}
	if srv.reads != 1 {
		t.Errorf("%d pod reads, want 1 (the PS's, to settle its Binding)", srv.reads)
	}
}
