package view

import "testing"

// TestNextIsClosedByThePublicationAfterIt pins what the filter's catch-up relies on: the
// channel Next gives is closed by the next publication, not before, and a new one is given
// after it.
func TestNextIsClosedByThePublicationAfterIt(t *testing.T) {
	c := &Cluster{}
	first := c.Next()
	if c.Next() != first {
		t.Fatal("two calls before a publication gave different channels")
	}
	if isClosed(first) {
		t.Fatal("closed before any publication")
	}
	snap := &Snapshot{}
	c.publish(snap)
	if !isClosed(first) {
		t.Fatal("not closed by the publication")
	}
	if c.Snapshot() != snap {
		t.Fatal("the published snapshot is not the current one")
	}
	if second := c.Next(); isClosed(second) {
		t.Fatal("the channel after the publication is closed already")
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestSmallerNonEmpty: the topology level a job's pods ask for does not depend on the order
// the pods came in.
func TestSmallerNonEmpty(t *testing.T) {
	for _, tt := range []struct{ a, b, want string }{
		{"", "", ""}, {"rack", "", "rack"}, {"", "rack", "rack"}, {"zone", "rack", "rack"}, {"rack", "zone", "rack"},
	} {
		if got := smallerNonEmpty(tt.a, tt.b); got != tt.want {
			t.Errorf("smallerNonEmpty(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}
