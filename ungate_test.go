package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cps-extender/cps-extender/extender/gang"
)

// TestUngate: the turn gate is lifted from the pods of the namespace asked (every namespace
// with ""), and every other gate stays.
func TestUngate(t *testing.T) {
	pod := func(ns, name string, gates ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)}}
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		return p
	}
	tests := []struct {
		name      string
		namespace string
		want      map[string][]string // pod -> gates after
	}{
		{name: "one namespace", namespace: "ml", want: map[string][]string{
			"ml/a": nil, "ml/b": {"kueue.x-k8s.io/admission"}, "ml/plain": nil, "other/c": {gang.TurnGate},
		}},
		{name: "every namespace", want: map[string][]string{
			"ml/a": nil, "ml/b": {"kueue.x-k8s.io/admission"}, "ml/plain": nil, "other/c": nil,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(pod("ml", "a", gang.TurnGate), pod("ml", "b", "kueue.x-k8s.io/admission", gang.TurnGate),
				pod("ml", "plain"), pod("other", "c", gang.TurnGate))
			var out bytes.Buffer
			if err := ungate(context.Background(), client, tt.namespace, time.Second, &out); err != nil {
				t.Fatal(err)
			}
			for key, want := range tt.want {
				ns, name, _ := strings.Cut(key, "/")
				p, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, g := range p.Spec.SchedulingGates {
					got = append(got, g.Name)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: gates %v, want %v", key, got, want)
				}
			}
			if !strings.Contains(out.String(), "pods lifted, 0 failed") {
				t.Errorf("output %q", out.String())
			}
		})
	}
}

// TestUngateArguments: one of --namespace and --all, never both or neither.
func TestUngateArguments(t *testing.T) {
	for _, args := range [][]string{{}, {"--all", "--namespace=ml"}, {"--all", "extra"}} {
		var out, errOut bytes.Buffer
		if err := runUngate(args, &out, &errOut); err == nil {
			t.Errorf("ungate %v: no error", args)
		}
	}
}
