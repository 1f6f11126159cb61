package framework

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNativeGang(t *testing.T) {
	c := fake.NewClientset()
	rack := &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: "rack"}}}
	g := NativeGang{Namespace: "ns", Name: "job-1", MinCount: 5, PriorityClassName: "high", Constraints: rack}
	if err := g.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	w, err := c.SchedulingV1beta1().Workloads("ns").Get(context.Background(), "job-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Spec.PodGroupTemplates) != 1 {
		t.Fatalf("Workload templates %+v, want one", w.Spec.PodGroupTemplates)
	}
	tmpl := w.Spec.PodGroupTemplates[0]
	if tmpl.SchedulingPolicy.Gang == nil || tmpl.SchedulingPolicy.Gang.MinCount != 5 || tmpl.PriorityClassName != "high" || !cmp.Equal(tmpl.SchedulingConstraints, rack) {
		t.Errorf("Workload template %+v", tmpl)
	}
	pg, err := c.SchedulingV1beta1().PodGroups("ns").Get(context.Background(), "job-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := pg.Spec
	if s.WorkloadRef == nil || *s.WorkloadRef != (schedv1beta1.WorkloadReference{WorkloadName: "job-1", TemplateName: tmpl.Name}) {
		t.Errorf("PodGroup workloadRef %+v, want the Workload's template %q", s.WorkloadRef, tmpl.Name)
	}
	if s.SchedulingPolicy.Gang == nil || s.SchedulingPolicy.Gang.MinCount != 5 || s.PriorityClassName != "high" || !cmp.Equal(s.SchedulingConstraints, rack) {
		t.Errorf("PodGroup spec %+v", s)
	}
	if err := g.Create(context.Background(), c); err == nil {
		t.Error("creating the same gang twice: no error")
	}

	pod := &corev1.Pod{}
	g.Join(pod)
	if sg := pod.Spec.SchedulingGroup; sg == nil || sg.PodGroupName == nil || *sg.PodGroupName != "job-1" {
		t.Errorf("pod's scheduling group %+v, want job-1", sg)
	}
}
