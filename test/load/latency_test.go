//go:build load

package load

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// histograms is the extender's own request-latency histogram, per verb: cumulative counts
// by upper bound in seconds.
type histograms map[string]map[float64]float64

// scrapeLatency reads cps_extender_request_duration_seconds from the extender's /metrics.
func scrapeLatency(addr string) (histograms, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseLatency(resp.Body)
}

func parseLatency(r io.Reader) (histograms, error) {
	out := histograms{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	const prefix = "cps_extender_request_duration_seconds_bucket{"
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(line, "} ")
		if !ok {
			continue
		}
		var verb, le string
		for _, l := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(l, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "verb":
				verb = v
			case "le":
				le = v
			}
		}
		bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		if err != nil {
			return nil, fmt.Errorf("bucket bound %q: %w", le, err)
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("bucket count %q: %w", value, err)
		}
		if out[verb] == nil {
			out[verb] = map[float64]float64{}
		}
		out[verb][bound] = n
	}
	return out, sc.Err()
}

// summary describes the calls of verb between two scrapes: how many, the share answered
// within 2 ms, and the bucket bounds p50 and p99 fall under (the extender's handler time,
// without curl and the network).
func (after histograms) summary(before histograms, verb string) string {
	var bounds []float64
	for b := range after[verb] {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	delta := func(b float64) float64 { return after[verb][b] - before[verb][b] }
	if len(bounds) == 0 || delta(bounds[len(bounds)-1]) == 0 {
		return verb + ": no calls"
	}
	total := delta(bounds[len(bounds)-1])
	under := func(q float64) string {
		for _, b := range bounds {
			if delta(b) >= q*total {
				return fmt.Sprintf("<= %g ms", b*1000)
			}
		}
		return "?"
	}
	return fmt.Sprintf("%s: %.0f calls, %.2f%% within 2 ms, p50 %s, p99 %s (server side)",
		verb, total, 100*delta(0.002)/total, under(0.5), under(0.99))
}

// goMemory is a line on the Go runtime's memory in the process serving addr, read off its
// /metrics (the Go collector): the live heap, the heap in use (garbage not yet swept
// included), what the runtime holds but the heap does not use (idle, less what went back to
// the OS), the next collection's goal, the stacks, the collections so far and the last in
// which the GC's CPU limiter let the heap past GOMEMLIMIT (0: never).
func goMemory(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	v := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "go_") || strings.Contains(name, "{") {
			continue
		}
		if f, err := strconv.ParseFloat(value, 64); err == nil {
			v[name] = f
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if _, ok := v["go_memstats_heap_inuse_bytes"]; !ok {
		return "", fmt.Errorf("no go_memstats_heap_inuse_bytes in /metrics")
	}
	mib := func(name string) float64 { return v[name] / (1 << 20) }
	return fmt.Sprintf("Go heap live %.0f MiB at the last collection, in use %.0f MiB, idle not released %.0f MiB, next GC goal %.0f MiB, stacks %.0f MiB, runtime total %.0f MiB; %.0f collections, the CPU limiter last on in cycle %.0f",
		mib("go_gc_heap_live_bytes"), mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_heap_idle_bytes")-mib("go_memstats_heap_released_bytes"),
		mib("go_memstats_next_gc_bytes"), mib("go_memstats_stack_inuse_bytes"), mib("go_memstats_sys_bytes")-mib("go_memstats_heap_released_bytes"),
		v["go_gc_duration_seconds_count"], v["go_gc_limiter_last_enabled_gc_cycle"]), nil
}
