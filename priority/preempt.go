package priority

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// preemption is a preemptor's choice: the running jobs to evict, whole, and where the
// preemptor goes once they have left.
type preemption struct {
	victims []*jobView
	plan    []plannedPod
	level   int
}

// candidateVictim is a running job a preemptor may evict, with its bound pods as the
// capacity table takes them.
type candidateVictim struct {
	v    *jobView
	pods []taken // position and needs of each bound pod on a node of the table
	cost float64 // what its eviction loses: pod-minutes run
	free float64 // what it frees of the preemptor's scarcest resource inside a domain
}

// VictimBar says why running job j may not be evicted for a preemptor of combined priority
// p, urgent or not, at now, or "" when it may be. Urgency is a class: an urgent preemptor may
// evict any job that is not urgent once it has run UrgentMinRunTime, whatever its P; no
// preemptor that is not urgent may evict an urgent job. Otherwise (urgent against urgent,
// or neither urgent) j's P when it started to run must be PreemptionMargin or more below p,
// and it must have run MinRunTime (a job whose start is not known has not). The queue's
// preemption and Volcano's preemptable and reclaimable both ask it; a refused eviction's
// protection is the caller's to add.
func (m Model) VictimBar(j *Job, p float64, urgent bool, now time.Time) string {
	switch m.victimBarAt(j, m.RunningP(j, now), p, urgent, now) {
	case barLeaving:
		return "it is leaving already"
	case barUrgent:
		return "it is urgent, and the job preempting is not"
	case barP:
		return "its P is not " + fixed2(m.PreemptionMargin) + " or more below"
	case barRunTime:
		return "it has not run " + m.MinRunTime.String()
	case barUrgentRunTime:
		return "it has not run " + m.UrgentMinRunTime.String() + " (model.urgentMinRunTime)"
	}
	return ""
}

// The reasons of victimBar, as numbers: the queue asks for every running job on every
// preemption attempt, and needs no sentence.
const (
	barNone = iota
	barLeaving
	barUrgent
	barP
	barRunTime
	barUrgentRunTime
)

// victimBarAt is VictimBar's rule as a number, with j's RunningP known.
func (m Model) victimBarAt(j *Job, runningP, p float64, urgent bool, now time.Time) int {
	switch {
	case j.Leaving > 0:
		return barLeaving
	case j.Urgent && !urgent:
		return barUrgent
	case urgent && !j.Urgent:
		if m.UrgentMinRunTime > 0 && (j.RunningSince.IsZero() || now.Sub(j.RunningSince) < m.UrgentMinRunTime) {
			return barUrgentRunTime
		}
		return barNone
	case runningP+m.PreemptionMargin > p:
		return barP
	case j.RunningSince.IsZero() || now.Sub(j.RunningSince) < m.MinRunTime:
		return barRunTime
	}
	return barNone
}

// victimRule says which running jobs a preemptor, urgent or not, may evict, for the
// sentence of a job that finds none.
func (m Model) victimRule(urgent bool) string {
	within := "P at least " + fixed2(m.PreemptionMargin) + " lower, running " + m.MinRunTime.String() + " or more"
	if !urgent {
		return "jobs not urgent, " + within
	}
	return "jobs not urgent running " + m.UrgentMinRunTime.String() + " or more; urgent ones " + within
}

// RunningP is a running job's P as it was when it started to run (now when that is not
// known): its waiting term stops growing then, or every job that ran long enough would
// outrank every waiting one.
func (m Model) RunningP(j *Job, now time.Time) float64 {
	if !j.RunningSince.IsZero() {
		now = j.RunningSince
	}
	return m.Combined(m.Terms(j, now))
}

// MayPreemptAlone says whether job j may have running jobs evicted for it under the model's
// mode, where there is no queue to name a head (Volcano): urgent or starved jobs under
// urgent, any job under priority.
func (m Model) MayPreemptAlone(j *Job, now time.Time) bool {
	switch m.Preemption {
	case PreemptUrgent:
		return j.Urgent || m.StarvationBound > 0 && j.Waited(now) > m.StarvationBound
	case PreemptPriority:
		return true
	}
	return false
}

// mayPreempt says whether job v, which does not fit, may have running jobs evicted for it
// under the model's mode; head is true when no job walked before it failed to fit.
func (m Model) mayPreempt(v *jobView, head bool) bool {
	if v.hasRules { // the victims' choice places by resources alone, not by pod rules
		return false
	}
	switch m.Preemption {
	case PreemptUrgent:
		return v.job.Urgent || v.d.Starved
	case PreemptPriority:
		return v.job.Urgent || v.d.Starved || head
	}
	return false
}

// preempt chooses the running jobs to evict for v so that v fits, or says why none can.
// Victims are whole running jobs that VictimBar lets go for v and that are not protected.
// Among the domains of each level at which v could run (as its requested level allows),
// each domain's victims are added greedily, the one freeing the most of v's scarcest
// resource there first, until v fits there, then pruned of every victim it fits without;
// the choice is the fewest victims, then the least work lost (pod-minutes run), then the
// lowest level. Room of pods being deleted (Node.Leaving) counts as free. c must not be in
// a trial; it is left as it was.
func (m Model) preempt(c *capacity, v *jobView, running []*jobView, dims *dimSet, s *State, now time.Time, budget int) (*preemption, string) {
	nodes := s.Nodes
	var cands []*candidateVictim
	var protected []string
	for _, r := range running {
		if !r.hasRunningP { // the same for every preemptor of this walk
			r.runningP, r.hasRunningP = m.RunningP(r.job, now), true
		}
		switch {
		case m.victimBarAt(r.job, r.runningP, v.d.P, v.job.Urgent, now) != barNone: // a job leaving already: its room is counted below
		case s.Protected[r.job.Key].After(now):
			protected = append(protected, r.job.Key)
		default:
			cands = append(cands, victimOf(c, dims, r, now))
		}
	}
	slices.Sort(protected)
	why := func(s string) string {
		if len(protected) > 0 {
			s += "; " + strings.Join(protected, ", ") + " may not be evicted: an eviction of its pods was refused (a PodDisruptionBudget)"
		}
		return s
	}

	c.begin()
	defer c.rollback()
	leaving := make([]bool, len(c.nodes)) // positions where room is on its way
	for i := range nodes {
		if len(nodes[i].Leaving) == 0 {
			continue
		}
		if at := c.nodeIndex(nodes[i].Name); at >= 0 {
			if needs := dims.needsOf(nodes[i].Leaving, false); len(needs) > 0 {
				c.give(at, needs)
				leaving[at] = true
			}
		}
	}
	// A job losing pods loses them all: a victim's evictions go out one by one, and until
	// the last, the part still bound is no room to choose another victim for.
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.Leaving == 0 || j.Key == v.job.Key {
			// Its own job losing pods (a repair, a user's delete) frees no room for it.
			continue
		}
		for k := range j.Pods {
			if p := &j.Pods[k]; p.State == PodBound {
				if at := c.nodeIndex(p.Node); at >= 0 {
					c.give(at, dims.needsOf(p.Request, true))
					leaving[at] = true
				}
			}
		}
	}
	start := c.mark()
	g := &gangPlacer{}
	fitsIn := func(lo, hi, l int) ([]plannedPod, bool) {
		m := c.mark()
		defer c.rollbackTo(m)
		g.reset(c, v, v.required, v.preferred)
		var ok bool
		switch {
		case l > c.lay.levels():
			ok = g.run()
		default:
			ok = g.placeUnit(g.groups, lo, hi, l, nodeLevel, l)
		}
		if !ok {
			c.rollbackTo(m)
			g.reset(c, v, v.required, v.preferred)
			ok = g.flatIn(g.groups, lo, hi)
		}
		if !ok {
			return nil, false
		}
		return slices.Clone(g.plan), true
	}
	top := c.lay.levels() + 1
	first := nodeLevel
	g.reset(c, v, v.required, v.preferred) // the groups, to count the PS
	if g.psIn(g.groups) > 1 {
		first = 1 // PS apart: one node never holds the gang (as placeUnit)
	}
	// eachDomain calls f for every domain of each level v may run at, lowest level first,
	// that has a node where at is true.
	eachDomain := func(at []bool, f func(lo, hi, l int) bool) {
		for l := first; l <= min(v.required, top); l++ {
			domains := 1
			switch {
			case l == nodeLevel:
				domains = len(c.nodes)
			case l < top:
				domains = len(c.lay.span[l-1])
			}
			for d := range domains {
				lo, hi := 0, len(c.nodes)
				switch {
				case l == nodeLevel:
					lo, hi = d, d+1
				case l < top:
					lo, hi = c.lay.spanOf(l, d)
				}
				if !c.lay.hasDomain(l, lo) || l == nodeLevel && !c.lay.hasDomain(v.required, lo) {
					continue // no domain of the level, or of the one the job requires
				}
				if slices.Contains(at[lo:hi], true) && !f(lo, hi, l) {
					return
				}
			}
		}
	}
	// With the leaving room alone: no victim needed, the job waits for it.
	var waitFor *preemption
	eachDomain(leaving, func(lo, hi, l int) bool {
		if plan, ok := fitsIn(lo, hi, l); ok {
			waitFor = &preemption{plan: plan, level: l}
		}
		return waitFor == nil
	})
	if waitFor != nil {
		return waitFor, ""
	}
	if len(cands) == 0 {
		return nil, why("no running job may be evicted for it (" + m.victimRule(v.job.Urgent) + ")")
	}
	if budget <= 0 {
		return nil, "preemption is paused: " + strconv.Itoa(m.MaxPreemptions) + " jobs were evicted in the last " + m.PreemptionWindow.String() + " (model.maxPreemptions)"
	}

	// The scarcest of v's resources, counted over the whole table: what a victim frees of
	// it orders the greedy choice.
	need := g.totalOf(c, v)
	scarce := need[0].dim
	worst := -1.0
	for _, n := range need {
		if n.dim == c.r-1 && len(need) > 1 {
			continue
		}
		have := float64(0)
		for at := range c.nodes {
			have += float64(max(c.tree[(c.size+at)*c.r+n.dim], 0))
		}
		if r := float64(n.amount) / (have + 1); r > worst {
			worst, scarce = r, n.dim
		}
	}

	var best *preemption
	bestCost := 0.0
	consider := func(lo, hi, l int) {
		var in []*candidateVictim
		for _, cv := range cands {
			cv.free = 0
			for _, p := range cv.pods {
				if p.node >= lo && p.node < hi {
					for _, n := range p.needs {
						if n.dim == scarce {
							cv.free += float64(n.amount)
						}
					}
				}
			}
			if cv.free > 0 || (l > c.lay.levels() && len(cv.pods) > 0) {
				in = append(in, cv)
			}
		}
		if len(in) == 0 {
			return
		}
		slices.SortFunc(in, func(a, b *candidateVictim) int {
			if c := cmp.Compare(b.free, a.free); c != 0 {
				return c
			}
			if c := cmp.Compare(a.cost, b.cost); c != 0 {
				return c
			}
			return strings.Compare(a.v.job.Key, b.v.job.Key)
		})
		free := func(set []*candidateVictim) {
			for _, cv := range set {
				for _, p := range cv.pods {
					c.give(p.node, p.needs)
				}
			}
		}
		var chosen []*candidateVictim
		found := false
		mark := c.mark()
		for _, cv := range in {
			if len(chosen) >= budget {
				break
			}
			chosen = append(chosen, cv)
			free([]*candidateVictim{cv})
			if _, ok := fitsIn(lo, hi, l); ok {
				found = true
				break
			}
		}
		c.rollbackTo(mark)
		if !found {
			return
		}
		// Drop every victim the job fits without, the costliest first.
		slices.SortFunc(chosen, func(a, b *candidateVictim) int { return cmp.Compare(b.cost, a.cost) })
		for i := 0; i < len(chosen); {
			without := slices.Concat(chosen[:i], chosen[i+1:])
			free(without)
			_, ok := fitsIn(lo, hi, l)
			c.rollbackTo(mark)
			if ok {
				chosen = without
				continue
			}
			i++
		}
		free(chosen)
		plan, _ := fitsIn(lo, hi, l)
		c.rollbackTo(mark)
		cost := 0.0
		for _, cv := range chosen {
			cost += cv.cost
		}
		if best == nil || len(chosen) < len(best.victims) || len(chosen) == len(best.victims) && cost < bestCost {
			p := &preemption{plan: plan, level: l}
			for _, cv := range chosen {
				p.victims = append(p.victims, cv.v)
			}
			best, bestCost = p, cost
		}
	}
	c.rollbackTo(start)
	hosting := make([]bool, len(c.nodes)) // positions where a candidate has a pod
	for _, cv := range cands {
		for _, p := range cv.pods {
			hosting[p.node] = true
		}
	}
	eachDomain(hosting, func(lo, hi, l int) bool {
		consider(lo, hi, l)
		return true
	})
	if best == nil {
		return nil, why("evicting the jobs it may evict would not make room for it")
	}
	slices.SortFunc(best.victims, func(a, b *jobView) int { return strings.Compare(a.job.Key, b.job.Key) })
	return best, ""
}

// victimOf is a running job as a candidate victim: its bound pods' positions and needs
// over the table's resources, and what evicting it loses.
func victimOf(c *capacity, dims *dimSet, r *jobView, now time.Time) *candidateVictim {
	cv := &candidateVictim{v: r}
	for i := range r.job.Pods {
		p := &r.job.Pods[i]
		if p.State != PodBound {
			continue
		}
		at := c.nodeIndex(p.Node)
		if at < 0 {
			continue
		}
		cv.pods = append(cv.pods, taken{node: at, needs: dims.needsOf(p.Request, true)})
	}
	cv.cost = float64(len(cv.pods)) * max(now.Sub(r.job.RunningSince).Minutes(), 0)
	return cv
}

// needsOf is a request over the dimensions of ds (resources no pod of the computation asks
// for are left out), plus one pod slot when slot is set.
func (ds *dimSet) needsOf(r Resources, slot bool) []dimNeed {
	var out []dimNeed
	for d, name := range ds.names {
		if v := r[name]; v > 0 && (name != resourcePods || !slot) {
			out = append(out, dimNeed{d, v})
		}
	}
	if slot {
		out = append(out, dimNeed{len(ds.names) - 1, 1})
	}
	return out
}

// totalOf is what v's pods to fit need together.
func (g *gangPlacer) totalOf(c *capacity, v *jobView) []dimNeed {
	g.reset(c, v, v.required, v.preferred)
	return slices.Clone(g.total(g.groups))
}

// reserveFor sets aside, on each node the plan names, what is free there up to what the
// planned pods need: as the victims leave, the room they free is the preemptor's.
func reserveFor(c *capacity, v *jobView, plan []plannedPod) {
	byUID := make(map[string]int, len(v.toFit))
	for i, p := range v.toFit {
		byUID[p.UID] = i
	}
	for _, pp := range plan {
		i, ok := byUID[pp.uid]
		if !ok {
			continue
		}
		var take []dimNeed
		for _, n := range v.demands[i].needs {
			if have := c.tree[(c.size+pp.node)*c.r+n.dim]; have > 0 {
				take = append(take, dimNeed{n.dim, min(have, n.amount)})
			}
		}
		if len(take) > 0 {
			c.take(pp.node, take)
		}
	}
}

// fixed2 is x with two decimals.
func fixed2(x float64) string {
	var b strings.Builder
	writeFixed2(&b, x)
	return b.String()
}

// preemptBlocker names what a preempting job waits for: "preempting ns/b (P=0.30), ns/c
// (P=0.28)", or the pods already on their way out.
func preemptBlocker(victims []Victim) string {
	if len(victims) == 0 {
		return "waiting for the pods being deleted to leave"
	}
	var b strings.Builder
	b.WriteString("preempting ")
	for i, v := range victims {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v.Key)
		b.WriteString(" (P=")
		writeFixed2(&b, v.P)
		b.WriteString(")")
	}
	return b.String()
}
