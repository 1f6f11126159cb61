package priority

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Ordinal writes n as an English ordinal: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st.
func Ordinal(n int) string {
	return strconv.Itoa(n) + ordinalSuffix(n)
}

// ordinalSuffix is n's suffix as an ordinal: "st", "nd", "rd" or "th".
func ordinalSuffix(n int) string {
	if m100 := n % 100; m100 < 11 || m100 > 13 {
		switch n % 10 {
		case 1, -1:
			return "st"
		case 2, -2:
			return "nd"
		case 3, -3:
			return "rd"
		}
	}
	return "th"
}

// writeInt writes n in decimal into b; into a sentence without making a string of it.
func writeInt(b textWriter, n int) {
	if s, ok := b.(*sentence); ok {
		s.buf = strconv.AppendInt(s.buf, int64(n), 10)
		return
	}
	b.WriteString(strconv.Itoa(n))
}

// writeOrdinal writes Ordinal(n) into b; into a sentence without making a string of it.
func writeOrdinal(b textWriter, n int) {
	writeInt(b, n)
	b.WriteString(ordinalSuffix(n))
}

// runningReason: "job ns/a is running (6 of 6 bound)"; the minimum is added when the job
// has more pods than its minimum, so "6 of 8" is not read as a problem.
func runningReason(d *Decision) string {
	var b strings.Builder
	b.WriteString("job ")
	b.WriteString(d.Key)
	if d.Finished != "" {
		b.WriteString(" has finished (")
		b.WriteString(d.Finished)
		b.WriteString("): ")
		b.WriteString(strconv.Itoa(d.Bound))
		b.WriteString(" of its pods ")
		b.WriteString(plural(d.Bound, "is", "are"))
		b.WriteString(" still bound, and it waits for nothing")
		return b.String()
	}
	b.WriteString(" is running (")
	b.WriteString(strconv.Itoa(d.Bound))
	b.WriteString(" of ")
	b.WriteString(strconv.Itoa(d.Pods))
	b.WriteString(" bound")
	if d.MinMember != d.Pods {
		b.WriteString(", minimum ")
		b.WriteString(strconv.Itoa(d.MinMember))
	}
	b.WriteString(")")
	return b.String()
}

// queuedReason is the sentence for a job in the queue, admitted or waiting, with what
// the fit does not count of it (note: mayNotFit), written in b; prev is the job's reason in
// the previous queue, returned when the sentence is the same.
func (m Model) queuedReason(b *sentence, v *jobView, note, prev string) string {
	b.reset()
	m.queuedSentence(b, v)
	b.WriteString(note)
	return b.text(prev)
}

// textWriter is what the sentences are written into: a strings.Builder or a sentence.
type textWriter interface {
	WriteString(s string) (int, error)
	WriteByte(c byte) error
	Write(p []byte) (int, error)
}

// sentence is a buffer the reasons of one queue are written into, job after job. The
// text of a sentence equal to the one the previous queue gave is that string again: a
// recompute that only moved the clock mostly finds them as they were, and a new string
// for each job made 3.8 MB and 20k allocations a recompute at 10k jobs (RecomputeTimeOnly).
type sentence struct{ buf []byte }

func (b *sentence) reset() { b.buf = b.buf[:0] }

// WriteString appends s.
func (b *sentence) WriteString(s string) (int, error) {
	b.buf = append(b.buf, s...)
	return len(s), nil
}

// WriteByte appends c.
func (b *sentence) WriteByte(c byte) error {
	b.buf = append(b.buf, c)
	return nil
}

// Write appends p.
func (b *sentence) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// text is the sentence written: prev when it says the same, else a new string.
func (b *sentence) text(prev string) string {
	if string(b.buf) == prev {
		return prev
	}
	return string(b.buf)
}

// queuedSentence writes queuedReason without the note of what the fit does not count.
//
//	job ns/a has the turn (1st of 3, P=0.74: user 1.00, job 0.50, wait 0.10, parallelism 0.40)
//	job ns/a waits for its turn: 3rd of 7, behind ns/b (P=0.82); it does not fit: worker ...
//	job ns/h can never fit as the cluster is: only 8 of the 10 pods it needs fit even ...
func (m Model) queuedSentence(b textWriter, v *jobView) {
	d := v.d
	b.WriteString("job ")
	b.WriteString(d.Key)
	if d.Phase == PhaseAdmitted {
		b.WriteString(" has the turn (")
		writePlace(b, d)
		b.WriteString(": user ")
		writeFixed2(b, d.Terms.User)
		b.WriteString(", job ")
		writeFixed2(b, d.Terms.Job)
		b.WriteString(", wait ")
		writeFixed2(b, d.Terms.Wait)
		b.WriteString(", parallelism ")
		writeFixed2(b, d.Terms.Parallelism)
		b.WriteString(")")
		switch {
		case d.Repair:
			b.WriteString("; it completes a partial gang (")
			b.WriteString(strconv.Itoa(d.Bound))
			b.WriteString(" of ")
			b.WriteString(strconv.Itoa(d.MinMember))
			b.WriteString(" bound)")
		case d.Held > 0:
			b.WriteString("; ")
			b.WriteString(strconv.Itoa(d.Held))
			b.WriteString(" of ")
			b.WriteString(strconv.Itoa(d.MinMember))
			b.WriteString(" pods are gathering at bind")
		case d.Starved:
			b.WriteString("; it has waited ")
			b.WriteString(v.wait.Round(time.Second).String())
			b.WriteString(", past the starvation bound of ")
			b.WriteString(m.StarvationBound.String())
		}
		return
	}

	if d.Phase == PhaseUnschedulable {
		b.WriteString(" can never fit as the cluster is: ")
		b.WriteString(v.never)
		b.WriteString("; it takes no turn and sets nothing aside until the nodes, or the pods in no job, change")
		return
	}

	if d.Phase == PhasePreempting {
		b.WriteString(" preempts for its turn (")
		writePlace(b, d)
		b.WriteString("): ")
		if len(d.Victims) == 0 {
			b.WriteString("the room it needs frees as the pods being deleted leave")
		} else {
			b.WriteString("it does not fit, and evicting ")
			for i, vc := range d.Victims {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(vc.Key)
				b.WriteString(" (P=")
				writeFixed2(b, vc.P)
				b.WriteString(", ")
				b.WriteString(strconv.Itoa(vc.Pods))
				b.WriteString(plural(vc.Pods, " pod", " pods"))
				b.WriteString(")")
			}
			b.WriteString(plural(len(d.Victims), " whole makes", " whole make"))
			b.WriteString(" room for it")
		}
		if pl := d.Placement.String(); pl != "" {
			b.WriteString("; it runs in ")
			b.WriteString(pl)
		}
		return
	}

	b.WriteString(" waits for its turn: ")
	writeOrdinal(b, d.Position)
	b.WriteString(" of ")
	writeInt(b, d.QueueLen)
	if d.Ahead != "" {
		b.WriteString(", behind ")
		b.WriteString(d.Ahead)
		b.WriteString(" (P=")
		writeFixed2(b, d.AheadP)
		b.WriteString(")")
	}
	b.WriteString("; ")
	switch v.kind {
	case waitNoFit:
		b.WriteString("it does not fit: ")
		b.WriteString(d.Blocker)
		if m.Policy == PolicyBackfill && v.wait < m.ReserveAfter {
			// Under backfill no job ahead reserves when this one waits without blocking:
			// say when it will.
			b.WriteString("; it reserves room once it has waited ")
			b.WriteString(m.ReserveAfter.String())
		}
	case waitReserving:
		b.WriteString("it does not fit: ")
		b.WriteString(d.Blocker)
		if pl := d.Placement; pl.Level != "" && pl.Level != "cluster" && len(pl.Domains) == 1 {
			// A reservation in one domain: the job will run there, and nothing behind it
			// takes the room it waits for.
			b.WriteString("; room for it in " + pl.Level + " " + pl.Domains[0] + " is set aside meanwhile")
		} else {
			b.WriteString("; what fits of it is set aside meanwhile")
		}
	case waitStrictBehind:
		b.WriteString("strict order: ")
		b.WriteString(v.blocking.job.Key)
		b.WriteString(" goes first and does not fit: ")
		b.WriteString(v.blocking.d.Blocker)
	case waitBesideReserve:
		b.WriteString("it ")
		b.WriteString(d.Blocker)
	default:
		b.WriteString(d.Blocker)
	}
}

// writePlace writes the job's place in the queue and its P: "2nd of 5, P=0.44".
func writePlace(b textWriter, d *Decision) {
	writeOrdinal(b, d.Position)
	b.WriteString(" of ")
	writeInt(b, d.QueueLen)
	b.WriteString(", P=")
	writeFixed2(b, d.P)
}

// waitSentence is Decision.Wait: what a waiting job waits for, in words that change only
// when the wait changes, with what the fit does not count of it (note: mayNotFit); "" for
// a job that waits for nothing. Written in b; prev as for queuedReason.
func waitSentence(b *sentence, v *jobView, note, prev string) string {
	b.reset()
	if !waitWords(b, v) {
		return ""
	}
	b.WriteString(note)
	return b.text(prev)
}

// waitWords writes waitSentence without the note of what the fit does not count, and
// reports whether there is one.
//
//	job ns/b waits for its turn: it does not fit yet: its 3 pods need cpu 4500m in all
//	job ns/c waits for its turn: strict order, ns/b goes first
//	job ns/h can never fit as the cluster is: only 8 of the 10 pods it needs fit ...
func waitWords(b textWriter, v *jobView) bool {
	d := v.d
	if v.kind == waitNone {
		return false
	}
	b.WriteString("job ")
	b.WriteString(d.Key)
	if v.kind == waitNeverFits {
		b.WriteString(" can never fit as the cluster is: ")
		b.WriteString(v.never)
		return true
	}
	if v.kind == waitIneligible && v.job.SizeUnknown != "" {
		b.WriteString(" waits for its gang size to be known: ")
		b.WriteString(v.job.SizeUnknown)
		return true
	}
	if v.kind == waitPreempting {
		b.WriteString(" waits while the jobs evicted for it leave")
		return true
	}
	b.WriteString(" waits for its turn: ")
	switch v.kind {
	case waitNoFit:
		b.WriteString("it does not fit yet: ")
		b.WriteString(v.need)
	case waitReserving:
		b.WriteString("it does not fit yet: ")
		b.WriteString(v.need)
		b.WriteString("; what fits of it is set aside meanwhile")
	case waitStrictBehind:
		b.WriteString("strict order, ")
		b.WriteString(v.blocking.job.Key)
		b.WriteString(" goes first")
	case waitBesideReserve:
		b.WriteString("it does not fit beside the reservation of ")
		b.WriteString(v.blocking.job.Key)
		b.WriteString(": ")
		b.WriteString(v.need)
	case waitCannotGather:
		b.WriteString("its gang cannot gather now: ")
		b.WriteString(v.need)
	case waitYieldTo:
		b.WriteString("it gives its held room to ")
		b.WriteString(v.blocking.job.Key)
		b.WriteString(", which goes first")
	default:
		b.WriteString(d.Blocker)
	}
	return true
}

// writeFixed2 writes x with two decimals, as the reasons show terms and P. Values in
// [0,1], the usual case, are written with integer arithmetic, which is several times
// cheaper than the general float formatting and gives the same digits.
func writeFixed2(b textWriter, x float64) {
	// Near a half the product x*100 may round either way; leave those to strconv.
	if f := x * 100; x >= 0 && x <= 1 && math.Abs(f-math.Floor(f)-0.5) > 1e-6 {
		c := int(math.Round(f)) // 0..100
		b.WriteByte(byte('0' + c/100))
		b.WriteByte('.')
		b.WriteByte(byte('0' + c/10%10))
		b.WriteByte(byte('0' + c%10))
		return
	}
	var buf [32]byte
	b.Write(strconv.AppendFloat(buf[:0], x, 'f', 2, 64))
}

// mayNotFit is the note a job's sentences end with when its pods ask for what the fit
// does not count (Pod.MayNotFit): "; may not fit: DRA constraints between requests, which
// the fit does not count". The phrases of all its pods, each once, in sorted order; "" when
// none has any.
func mayNotFit(job *Job) string {
	var phrases []string
	for i := range job.Pods {
		for _, p := range job.Pods[i].MayNotFit {
			if !slices.Contains(phrases, p) {
				phrases = append(phrases, p)
			}
		}
	}
	if len(phrases) == 0 {
		return ""
	}
	slices.Sort(phrases)
	return "; may not fit: " + strings.Join(phrases, ", ") + ", which the fit does not count"
}
