package integration_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cps-extender/cps-extender/extender/scheduler"

	"github.com/cps-extender/cps-extender/extender/view"

	"github.com/cps-extender/cps-extender/extender/gate"

	"github.com/cps-extender/cps-extender/extender/server"

	"github.com/cps-extender/cps-extender/extender/config"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// newFuzzServer is the real server over the real cluster view (fed by a fake clientset
// with two nodes and a gang pod) and the real gate with a recording binder.
func newFuzzServer(f *testing.F) *server.Server {
	f.Helper()
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "a"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-ps-0", Namespace: "default", UID: "u1",
			Labels: map[string]string{"cps-extender.io/job": "a", "cps-extender.io/role": "ps", "cps-extender.io/min-member": "2"}}},
	)
	cfg := config.DefaultConfig()
	cfg.Gate.HoldTimeout = metav1.Duration{Duration: 10 * time.Millisecond}
	log := zap.NewNop()
	gate := gate.New(gate.Options{Log: log, Binder: noopBinder{}, Config: cfg.Gate})
	cluster := view.NewCluster(view.ClusterOptions{Log: log, Client: client, Config: cfg, Holds: gate})
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(func() { cancel(); cluster.Shutdown() })
	if err := cluster.Start(ctx); err != nil {
		f.Fatal(err)
	}
	verbs, err := scheduler.New(log, decisionsOf(cluster), gate.For(cluster), nil)
	if err != nil {
		f.Fatal(err)
	}
	srv, err := server.New(server.Options{Access: server.OpenAccess, Log: log, MaxRequestBytes: 64 << 10, Ready: cluster, Queue: cluster, Routes: verbs.Routes("/scheduler")})
	if err != nil {
		f.Fatal(err)
	}
	return srv
}

// fuzzVerb drives one verb with arbitrary bodies: the answer is always one of the
// documented statuses, never a panic (which the router would turn into a 500).
func fuzzVerb(f *testing.F, verb string, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	srv := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/scheduler/"+verb, strings.NewReader(string(body)))
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("%s answered %d to %q: %s", verb, rec.Code, body, rec.Body)
		}
	})
}

const fuzzPod = `{"metadata":{"name":"a-ps-0","namespace":"default","uid":"u1","labels":{"cps-extender.io/job":"a","cps-extender.io/role":"ps","cps-extender.io/min-member":"2"}}}`

func FuzzFilter(f *testing.F) {
	fuzzVerb(f, scheduler.VerbFilter,
		`{"Pod":`+fuzzPod+`,"NodeNames":["n1","n2","ghost"]}`,
		`{"Pod":`+fuzzPod+`,"Nodes":{"items":[{"metadata":{"name":"n1"}}]}}`,
		`{"Pod":{"metadata":{"name":"plain"}},"NodeNames":[]}`,
		`{"Pod":null}`, `[]`, `{`)
}

func FuzzPrioritize(f *testing.F) {
	fuzzVerb(f, scheduler.VerbPrioritize,
		`{"Pod":`+fuzzPod+`,"NodeNames":["n1","n2"]}`,
		`{"Pod":`+fuzzPod+`,"Nodes":{"items":[{"metadata":{"name":"n2"}}]}}`,
		`{"Pod":{"metadata":{"name":"x","labels":{"scheduling.x-k8s.io/pod-group":"g"}}},"NodeNames":["n1"]}`)
}

func FuzzBind(f *testing.F) {
	fuzzVerb(f, scheduler.VerbBind,
		`{"PodName":"a-ps-0","PodNamespace":"default","PodUID":"u1","Node":"n1"}`,
		`{"PodName":"gone","PodNamespace":"default","Node":"n1"}`,
		`{"PodName":"","Node":""}`)
}

func FuzzPreempt(f *testing.F) {
	fuzzVerb(f, scheduler.VerbPreempt,
		`{"Pod":`+fuzzPod+`,"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"u1"}]}}}`,
		`{"Pod":`+fuzzPod+`,"NodeNameToVictims":{"n1":{"Pods":[null,{"metadata":{"uid":"u9"}}]},"n2":null}}`)
}
