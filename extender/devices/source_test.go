package devices

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestClaimUpdates: a claim's status update tells of a change only when it changes a node's
// free devices: an allocation reserved for a pod does not (the pod's request counts it), an
// unreserved one does, and so does its release; those change no pod's request (podsToo
// false). A claim a pod may name in its spec changes pods' requests.
func TestClaimUpdates(t *testing.T) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	client := fake.NewClientset(deviceClass("gpu", `device.driver == "gpu.example.com"`, ""),
		slice("gpu.example.com", "n1", 1, map[string]string{"g0": "h100", "g1": "h100"}), claim)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewSource(zap.NewNop(), client, nil)
	var changes, podChanges atomic.Int32
	told := func(podsToo bool) {
		changes.Add(1)
		if podsToo {
			podChanges.Add(1)
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), slices.Collect(maps.Values(s.Start(ctx, told)))...) {
		t.Fatal("not synced")
	}
	gpu := ClassResource("gpu")
	if got := s.NodeCapacity("n1", nil)[gpu]; got != 2 {
		t.Fatalf("free before: %d, want 2", got)
	}
	steps := []struct {
		name        string
		status      resourceapi.ResourceClaimStatus
		wantChanged bool
		wantFree    int64
	}{
		{name: "allocated and reserved: no change", status: allocated("gpu.example.com", "pool-n1", true, "g0").Status, wantFree: 2},
		{name: "the reservation goes: one device fewer", status: allocated("gpu.example.com", "pool-n1", false, "g0").Status, wantChanged: true, wantFree: 1},
		{name: "released: back", status: resourceapi.ResourceClaimStatus{}, wantChanged: true, wantFree: 2},
	}
	for _, st := range steps {
		before, podsBefore := changes.Load(), podChanges.Load()
		c := claim.DeepCopy()
		c.Status = st.status
		if _, err := client.ResourceV1().ResourceClaims("ns").UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The handler runs after the cache has the update: wait for that, then a moment.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			got, err := s.claims.ResourceClaims("ns").Get("c")
			if err == nil && (got.Status.Allocation != nil) == (c.Status.Allocation != nil) && len(got.Status.ReservedFor) == len(c.Status.ReservedFor) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
		if changed := changes.Load() > before; changed != st.wantChanged {
			t.Errorf("%s: change told %v, want %v", st.name, changed, st.wantChanged)
		}
		if podChanges.Load() > podsBefore {
			t.Errorf("%s: told that pods' requests changed", st.name)
		}
		if got := s.NodeCapacity("n1", nil)[gpu]; got != st.wantFree {
			t.Errorf("%s: free %d, want %d", st.name, got, st.wantFree)
		}
	}
	// New claims: one made for a pod from a template tells of no change (pods' requests read
	// the template); one a pod may name in its spec does.
	for i, tt := range []struct {
		name        string
		annotations map[string]string
		wantChanged bool
	}{
		{"made from a template", map[string]string{resourceapi.PodResourceClaimAnnotation: "gpu"}, false},
		{"made for extended resources", map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}, false},
		{"made by a user", nil, true},
	} {
		before := podChanges.Load()
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new-" + strconv.Itoa(i), Annotations: tt.annotations}}
		if _, err := client.ResourceV1().ResourceClaims("ns").Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := s.claims.ResourceClaims("ns").Get(c.Name); err == nil {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
		if changed := podChanges.Load() > before; changed != tt.wantChanged {
			t.Errorf("claim %s: pods' change told %v, want %v", tt.name, changed, tt.wantChanged)
		}
	}
}
