// Command hiccup measures how often a busy thread on this machine loses its core: it spins
// reading the clock for a while and reports every gap between two reads longer than a
// threshold. On a quiet machine gaps are rare and short; every gap is time a request in
// flight would have waited too. Run it next to a load test to read that test's tail.
//
//	go run ./test/load/hiccup [-for 10s] [-over 200us]
package main

import (
	"flag"
	"fmt"
	"time"
)

func main() {
	span := flag.Duration("for", 10*time.Second, "how long to spin")
	over := flag.Duration("over", 200*time.Microsecond, "report gaps longer than this")
	flag.Parse()

	var gaps []time.Duration
	end := time.Now().Add(*span)
	last := time.Now()
	for last.Before(end) {
		now := time.Now()
		if d := now.Sub(last); d > *over {
			gaps = append(gaps, d)
		}
		last = now
	}
	var lost, longest time.Duration
	overMs := 0
	for _, g := range gaps {
		lost += g
		longest = max(longest, g)
		if g > time.Millisecond {
			overMs++
		}
	}
	fmt.Printf("%d gaps over %v in %v (%d over 1ms), %v lost (%.2f%%), longest %v\n",
		len(gaps), *over, *span, overMs, lost.Round(time.Microsecond), 100*lost.Seconds()/span.Seconds(), longest.Round(time.Microsecond))
}
