package eval

import (
	"reflect"
	"testing"
	"time"
)

func TestGenerateReproducible(t *testing.T) {
	for _, p := range []Params{Small(), Medium(), Large()} {
		a, b := Generate(p), Generate(p)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: the same params gave different workloads", p.Name)
		}
		other := p
		other.Seed++
		if reflect.DeepEqual(a.Jobs, Generate(other).Jobs) {
			t.Errorf("%s: seed %d and %d gave the same workload", p.Name, p.Seed, other.Seed)
		}
	}
}

func TestSeeded(t *testing.T) {
	base := Medium()
	for _, c := range []struct {
		i    int
		want uint64
	}{{0, base.Seed}, {1, base.Seed + 1}, {4, base.Seed + 4}} {
		got := base.Seeded(c.i)
		if got.Seed != c.want {
			t.Errorf("Seeded(%d).Seed = %d, want %d", c.i, got.Seed, c.want)
		}
		// Only the seed moves: every seed draws the same shape of workload.
		got.Seed = base.Seed
		if got != base {
			t.Errorf("Seeded(%d) changed more than the seed: %+v", c.i, got)
		}
	}
}

func TestGenerateWithinRanges(t *testing.T) {
	tiers := UserTiers()
	classes := map[string]int32{UrgentClass.Name: UrgentClass.Value}
	for _, c := range PriorityClasses {
		classes[c.Name] = c.Value
	}
	validWorkers := map[int]bool{2: true, 4: true, 8: true, 16: true, 32: true}
	for _, p := range []Params{Small(), Medium(), Large(), {Name: "big", Seed: 1, Jobs: 2000, Nodes: 8, Racks: 2,
		MeanGap: time.Minute, MeanBatch: 3, MedianDuration: 10 * time.Minute, DurationSigma: 1.2,
		MinDuration: time.Minute, MaxDuration: time.Hour}} {
		w := Generate(p)
		if len(w.Jobs) != p.Jobs {
			t.Fatalf("%s: %d jobs, want %d", p.Name, len(w.Jobs), p.Jobs)
		}
		urgent, names := 0, map[string]bool{}
		for i, j := range w.Jobs {
			if names[j.Name] {
				t.Errorf("%s: job name %s twice", p.Name, j.Name)
			}
			names[j.Name] = true
			if i > 0 && j.Arrival < w.Jobs[i-1].Arrival {
				t.Errorf("%s: %s arrives before the job ahead of it", p.Name, j.Name)
			}
			if i < p.OpeningBurst && (j.Arrival != 0 || j.Workers != 32) {
				t.Errorf("%s: opening burst job %s: arrival %v, %d workers; want 0 and 32", p.Name, j.Name, j.Arrival, j.Workers)
			}
			if !validWorkers[j.Workers] || j.PS < 1 || j.PS > 4 || j.PS > max(1, j.Workers/2) {
				t.Errorf("%s: %s has %d PS and %d workers", p.Name, j.Name, j.PS, j.Workers)
			}
			if j.Base < p.MinDuration || j.Base > p.MaxDuration {
				t.Errorf("%s: %s base %v outside [%v, %v]", p.Name, j.Name, j.Base, p.MinDuration, p.MaxDuration)
			}
			if tiers[j.User] != j.Tier || j.Tier == "" {
				t.Errorf("%s: %s user %s tier %q", p.Name, j.Name, j.User, j.Tier)
			}
			if v, ok := classes[j.PriorityClass]; !ok || v != j.Priority || j.Urgent != (j.PriorityClass == UrgentClass.Name) {
				t.Errorf("%s: %s class %s priority %d urgent %v", p.Name, j.Name, j.PriorityClass, j.Priority, j.Urgent)
			}
			if j.Urgent {
				urgent++
			}
		}
		if p.Jobs >= 1000 {
			if share := float64(urgent) / float64(p.Jobs); share < UrgentShare/2 || share > UrgentShare*2 {
				t.Errorf("%s: urgent share %.3f, want about %.2f", p.Name, share, UrgentShare)
			}
		}
	}
}

func TestSizeBucket(t *testing.T) {
	for _, c := range []struct {
		ps, workers int
		want        string
	}{{1, 2, "gang 3-5"}, {1, 4, "gang 3-5"}, {2, 4, "gang 6-12"}, {4, 8, "gang 6-12"}, {1, 16, "gang 13-36"}, {4, 32, "gang 13-36"}} {
		if got := (Job{PS: c.ps, Workers: c.workers}).SizeBucket(); got != c.want {
			t.Errorf("%d PS + %d workers: %s, want %s", c.ps, c.workers, got, c.want)
		}
	}
}

func TestTimeScale(t *testing.T) {
	if got := Real(time.Minute); got != time.Second {
		t.Errorf("Real(1m) = %v, want 1s", got)
	}
	if got := Sim(1500 * time.Millisecond); got != 90*time.Second {
		t.Errorf("Sim(1.5s) = %v, want 1m30s", got)
	}
}

func TestSized(t *testing.T) {
	for _, c := range []struct {
		name string
		want Params
		ok   bool
	}{{"small", Small(), true}, {"medium", Medium(), true}, {"large", Large(), true}, {"huge", Params{}, false}, {"", Params{}, false}} {
		got, err := Sized(c.name)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Sized(%q) = %v, %v; want %v, ok %v", c.name, got.Name, err, c.want.Name, c.ok)
		}
	}
}
