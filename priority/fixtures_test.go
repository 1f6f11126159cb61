package priority_test

import (
	"strconv"
	"strings"
	"time"

	"github.com/cps-extender/cps-extender/priority"
)

// t0 is the fixed "now" of the tests.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	gi = int64(1) << 30
	mi = int64(1) << 20
)

// res builds a request or free capacity: res(cpuMillis, memoryBytes, "name", n, ...).
func res(cpu, mem int64, extra ...any) priority.Resources {
	r := priority.Resources{}
	if cpu != 0 {
		r["cpu"] = cpu
	}
	if mem != 0 {
		r["memory"] = mem
	}
	for i := 0; i+1 < len(extra); i += 2 {
		r[extra[i].(string)] = int64(extra[i+1].(int))
	}
	return r
}

// podB builds a pod; its UID is "uid-" + name.
type podB struct{ p priority.Pod }

func mkPod(name string, role priority.Role, index int) *podB {
	return &podB{priority.Pod{UID: "uid-" + name, Name: name, Role: role, Index: index}}
}

func (b *podB) req(r priority.Resources) *podB { b.p.Request = r; return b }
func (b *podB) bound(node string) *podB {
	b.p.State, b.p.Node = priority.PodBound, node
	return b
}
func (b *podB) held(node string) *podB {
	b.p.State, b.p.Node = priority.PodHeld, node
	return b
}
func (b *podB) gated() *podB                    { b.p.Gated = true; return b }
func (b *podB) mayNotFit(ps ...string) *podB    { b.p.MayNotFit = ps; return b }
func (b *podB) obj() priority.Pod               { return b.p }
func (b *podB) uid(u string) *podB              { b.p.UID = u; return b }
func (b *podB) state(s priority.PodState) *podB { b.p.State = s; return b }

// jobB builds a job created at t0 by user "bob".
type jobB struct{ j priority.Job }

func mkJob(key string) *jobB {
	return &jobB{priority.Job{Key: key, User: "bob", Created: t0}}
}

func (b *jobB) user(u string) *jobB       { b.j.User = u; return b }
func (b *jobB) prio(p int32) *jobB        { b.j.Priority = p; return b }
func (b *jobB) urgent() *jobB             { b.j.Urgent = true; return b }
func (b *jobB) min(n int) *jobB           { b.j.MinMember = n; return b }
func (b *jobB) unknown(why string) *jobB  { b.j.SizeUnknown = why; return b }
func (b *jobB) finished(how string) *jobB { b.j.Finished = how; return b }
func (b *jobB) created(t time.Time) *jobB { b.j.Created = t; return b }
func (b *jobB) pods(ps ...*podB) *jobB {
	for _, p := range ps {
		b.j.Pods = append(b.j.Pods, p.obj())
	}
	return b
}
func (b *jobB) obj() priority.Job { return b.j }
func (b *jobB) required(key string) *jobB {
	b.j.Topology.Required = key
	return b
}
func (b *jobB) preferred(key string) *jobB {
	b.j.Topology.Preferred = key
	return b
}

// gang adds ps parameter servers and workers workers named <name>-ps-i and <name>-w-i,
// with the given requests, all pending.
func (b *jobB) gang(ps int, psReq priority.Resources, workers int, wReq priority.Resources) *jobB {
	_, name, _ := strings.Cut(b.j.Key, "/")
	for i := 0; i < ps; i++ {
		b.pods(mkPod(name+"-ps-"+strconv.Itoa(i), priority.RolePS, i).req(psReq))
	}
	for i := 0; i < workers; i++ {
		b.pods(mkPod(name+"-w-"+strconv.Itoa(i), priority.RoleWorker, i).req(wReq))
	}
	return b
}

func node(name string, free priority.Resources) priority.Node {
	return priority.Node{Name: name, Free: free}
}
