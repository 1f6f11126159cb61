//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

// shownRow is one row of a table of the page: its job and the text of each data-field.
type shownRow struct {
	Job    string            `json:"job"`
	Fields map[string]string `json:"fields"`
}

// shownPage is what the page shows, read from its DOM.
type shownPage struct {
	Status   string              `json:"status"`
	Renders  int                 `json:"renders"`
	Queue    []shownRow          `json:"queue"`
	Never    []shownRow          `json:"never"`
	Running  []shownRow          `json:"running"`
	Domains  map[string][]string `json:"domains"` // domain -> its nodes
	PodsOn   map[string][]string `json:"podsOn"`  // node -> "namespace/pod state"
	Headings []string            `json:"headings"`
}

// readPage reads the tables and the nodes as the page shows them: the text of every
// data-field cell (a bar's number as printed beside it).
const readPage = `(() => {
  const rows = (id) => [...document.querySelectorAll("#" + id + " tbody tr")].map((tr) => {
    const fields = {};
    for (const c of tr.querySelectorAll("[data-field]")) {
      const num = c.querySelector(".num");
      fields[c.dataset.field] = (num || c).textContent.trim();
    }
    return { job: tr.dataset.job, fields };
  });
  const domains = {}, podsOn = {};
  for (const d of document.querySelectorAll("[data-domain]")) {
    domains[d.dataset.domain] = [...d.querySelectorAll("[data-node]")].map((n) => n.dataset.node);
  }
  for (const n of document.querySelectorAll("[data-node]")) {
    podsOn[n.dataset.node] = [...n.querySelectorAll("[data-pod]")].map((p) => p.dataset.pod + " " + p.dataset.state);
  }
  return {
    status: document.getElementById("status").dataset.state,
    renders: Number(document.body.dataset.renders || 0),
    queue: rows("queue"), never: rows("never"), running: rows("running"), domains, podsOn,
    headings: [...document.querySelectorAll("h2")].map((h) => h.textContent.trim()),
  };
})()`

// TestQueuePage loads GET /ui from a real extender (over HTTPS, behind the certificate the
// scheduler trusts) in headless Chromium and checks what it shows: the queue in turn order
// with position, phase, P and its four terms, gang progress and what each job waits for, as
// /debug/queue says; the job that never fits; the running jobs; every node in its rack and
// zone with the pods the API server has bound there. The page refreshes by itself (a job
// created later appears without a reload), loads nothing but its own origin and logs no
// error. /metrics has the job metrics of the same jobs. CPS_UI_SCREENSHOT=path keeps a screenshot (docs/queue-page.png is one).
func TestQueuePage(t *testing.T) {
	var nodes []framework.NodeSpec
	for i, spec := range framework.Nodes("node", 4, "8", "16Gi") {
		spec.Labels = map[string]string{rackLabel: fmt.Sprintf("r%d", i/2+1), "topology.kubernetes.io/zone": "z1"}
		nodes = append(nodes, spec)
	}
	e := newEnv(t, nodes...)
	createPriorityClasses(t, e, map[string]int32{"high": 1000000})
	_, caFile, certFile, keyFile := e.extenderCerts(1)
	e.startExtender(fmt.Sprintf(`model:
  userTiers: {alice: gold, bob: silver}
  policy: reserve # the page shows where the head reserves room
affinity:
  topology: [%s, topology.kubernetes.io/zone]
tls: {certFile: %s, keyFile: %s}
`, rackLabel, certFile, keyFile))
	e.startScheduler(true, schedulerOverHTTPS(t, e, caFile))

	// Two jobs run (16 of 32 CPU); two wait, neither fitting the 16 left; one never fits a node.
	train := jobSpec{name: "train", ps: 1, workers: 3, cpu: "2", user: "alice"}
	etl := jobSpec{name: "etl", ps: 1, workers: 1, cpu: "4", user: "bob"}
	e.createJobs(train, etl)
	e.waitJobBound(train, 90*time.Second)
	e.waitJobBound(etl, 90*time.Second)
	tune := jobSpec{name: "tune", ps: 1, workers: 2, cpu: "6", user: "alice", priority: "high"}
	sweep := jobSpec{name: "sweep", ps: 1, workers: 4, cpu: "4"}
	huge := jobSpec{name: "huge", workers: 1, cpu: "12"}
	e.createJobs(tune, sweep, huge)
	e.waitWaiting(tune, sweep)
	e.waitQueued(huge, "Unschedulable", "")

	ctx := startChromium(t, certFile)
	var mu sync.Mutex
	var requested []string
	var console []string
	collect := func(dst *[]string, v string) {
		mu.Lock()
		defer mu.Unlock()
		*dst = append(*dst, v)
	}
	requests, messages := chromedp.Events(ctx, network.RequestWillBeSent), chromedp.Console(ctx)
	go func() {
		for ev, err := range requests {
			if err != nil {
				return
			}
			collect(&requested, ev.Request.URL)
		}
	}()
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				collect(&console, m.String()+" "+m.URL)
			}
		}
	}()
	origin := "https://" + e.extAddr
	if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/ui")); err != nil {
		t.Fatalf("loading %s/ui: %v", origin, err)
	}

	var page shownPage
	var queue map[string]queueJob
	// The queue's P moves with waiting time: compare one rendering with /debug/queue read
	// just after it, then check that nothing moved more than the shown rounding allows.
	framework.WaitFor(t, 60*time.Second, "the page showing the queue as /debug/queue has it", func() (bool, error) {
		var err error
		if page, err = pageState(ctx); err != nil {
			return false, err
		}
		if queue, err = e.queue(); err != nil {
			return false, err
		}
		if page.Status != "ok" {
			return false, fmt.Errorf("page status %q", page.Status)
		}
		return len(page.Queue) == 2 && len(page.Never) == 1 && len(page.Running) == 2, fmt.Errorf("page shows %d queued, %d never fit, %d running", len(page.Queue), len(page.Never), len(page.Running))
	})
	t.Logf("the page shows: %+v", page)

	t.Run("queue", func(t *testing.T) {
		var order []string
		for _, row := range page.Queue {
			order = append(order, row.Job)
			d, ok := queue[row.Job]
			if !ok {
				t.Errorf("the page shows %s, /debug/queue has no such job", row.Job)
				continue
			}
			checkShown(t, row, map[string]string{
				"position": strconv.Itoa(d.Position), "job": d.Job, "phase": d.Phase,
				"gang": fmt.Sprintf("%d/%d bound", d.Bound, d.MinMember), "waits": strings.TrimSpace(d.Blocker),
				"placement": placementShown(d), "locality": localityShown(d),
			}, map[string]float64{"p": d.P, "term-user": d.Terms["user"], "term-job": d.Terms["job"], "term-wait": d.Terms["wait"], "term-parallelism": d.Terms["parallelism"]})
			if d.Blocker == "" {
				t.Errorf("%s waits, and /debug/queue names no blocker to show", row.Job)
			}
		}
		if want := []string{"default/tune", "default/sweep"}; !slices.Equal(order, want) {
			t.Errorf("queue rows %v, want %v (gold and PriorityClass high first)", order, want)
		}
		// tune leads and does not fit: under the reserve policy it sets room aside somewhere.
		if got := page.Queue[0].Fields["placement"]; !strings.HasPrefix(got, "reserved: ") {
			t.Errorf("tune's placement shows %q, want where it reserves room", got)
		}
	})
	t.Run("never fits", func(t *testing.T) {
		row := page.Never[0]
		d := queue[row.Job]
		if row.Job != "default/huge" || d.Phase != "Unschedulable" {
			t.Fatalf("never-fits row %s (phase %q in /debug/queue), want default/huge", row.Job, d.Phase)
		}
		checkShown(t, row, map[string]string{"job": d.Job, "gang": fmt.Sprintf("%d/%d bound", d.Bound, d.MinMember), "waits": d.Wait}, map[string]float64{"p": d.P})
		if !strings.Contains(d.Wait, "needs cpu 12000m") {
			t.Errorf("huge's sentence %q does not say what it needs", d.Wait)
		}
	})
	t.Run("running", func(t *testing.T) {
		var jobs []string
		for _, row := range page.Running {
			jobs = append(jobs, row.Job)
			d := queue[row.Job]
			checkShown(t, row, map[string]string{"job": d.Job, "gang": fmt.Sprintf("%d/%d bound", d.Bound, d.MinMember)}, map[string]float64{"p": d.P})
		}
		slices.Sort(jobs)
		if want := []string{"default/etl", "default/train"}; !slices.Equal(jobs, want) {
			t.Errorf("running rows %v, want %v", jobs, want)
		}
	})
	t.Run("nodes by domain", func(t *testing.T) {
		want := map[string][]string{
			"topology.kubernetes.io/zone=z1 / " + rackLabel + "=r1": {"node-0", "node-1"},
			"topology.kubernetes.io/zone=z1 / " + rackLabel + "=r2": {"node-2", "node-3"},
		}
		if fmt.Sprint(page.Domains) != fmt.Sprint(want) {
			t.Errorf("domains %v, want %v", page.Domains, want)
		}
		bound := map[string][]string{}
		for pod, node := range e.bound("default") {
			bound[node] = append(bound[node], "default/"+pod+" bound")
		}
		for _, node := range []string{"node-0", "node-1", "node-2", "node-3"} {
			got := slices.Sorted(slices.Values(page.PodsOn[node]))
			if want := slices.Sorted(slices.Values(bound[node])); !slices.Equal(got, want) {
				t.Errorf("%s shows pods %v; the API server has %v bound there", node, got, want)
			}
		}
	})

	t.Run("job metrics", func(t *testing.T) {
		defer e.use(t)()
		body := e.extenderBody("/metrics")
		for _, want := range []string{
			`cps_extender_ready 1`,
			// train (alice: gold) and etl (bob: silver) got the turn and were bound once each.
			`cps_extender_job_admission_wait_seconds_count{priority_class="none",tier="gold"} 1`,
			`cps_extender_job_admission_wait_seconds_count{priority_class="none",tier="silver"} 1`,
			`cps_extender_job_bound_wait_seconds_count{priority_class="none",tier="gold"} 1`,
			`cps_extender_job_bound_wait_seconds_count{priority_class="none",tier="silver"} 1`,
			// tune (gold) and sweep (bronze) wait; huge (bronze) never fits.
			`cps_extender_pending_jobs{phase="waiting",tier="gold"} 1`,
			`cps_extender_pending_jobs{phase="waiting",tier="bronze"} 1`,
			`cps_extender_pending_jobs{phase="unschedulable",tier="bronze"} 1`,
			`cps_extender_starved_jobs 0`,
		} {
			if !hasLine(body, want) {
				t.Errorf("/metrics has no line %q", want)
			}
		}
		// Each bound gang gathered at bind once, and once more after each hold timeout.
		want := fmt.Sprintf("cps_extender_gang_gather_seconds_count %d", 2+e.holdTimeouts())
		if !hasLine(body, want) {
			t.Errorf("/metrics has no line %q", want)
		}
	})

	t.Run("refreshes itself", func(t *testing.T) {
		late := jobSpec{name: "late", ps: 1, workers: 1, cpu: "1", user: "bob"}
		e.createJobs(late)
		before := page.Renders
		framework.WaitFor(t, 60*time.Second, "default/late on the page without a reload", func() (bool, error) {
			p, err := pageState(ctx)
			if err != nil {
				return false, err
			}
			for _, row := range slices.Concat(p.Queue, p.Running) {
				if row.Job == "default/late" {
					return p.Renders > before, nil
				}
			}
			return false, fmt.Errorf("not shown yet after %d renders", p.Renders)
		})
	})

	if path := os.Getenv("CPS_UI_SCREENSHOT"); path != "" {
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		checkScreenshot(t, shot)
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", path, len(shot))
	}

	mu.Lock()
	defer mu.Unlock()
	for _, u := range requested {
		if !strings.HasPrefix(u, origin+"/") {
			t.Errorf("the page requested %s: want only its own origin %s", u, origin)
		}
	}
	for _, want := range []string{origin + "/ui", origin + "/ui/app.js", origin + "/ui/app.css", origin + "/debug/queue", origin + "/debug/nodes"} {
		if !slices.Contains(requested, want) {
			t.Errorf("the page never requested %s (requests: %v)", want, requested)
		}
	}
	if len(console) > 0 {
		t.Errorf("the browser's console has errors or warnings: %q", console)
	}
}

// placementShown is the placement column's first line for d: where the plan puts it (or, for
// a waiting job, where it reserves room), as the page writes it.
func placementShown(d queueJob) string {
	p := d.Placement
	if p.Level == "" {
		return ""
	}
	where := p.Level
	if len(p.Domains) > 0 {
		where += ": " + strings.Join(p.Domains, ", ")
	}
	if d.Phase == "Waiting" || d.Phase == "Preempting" {
		where = "reserved: " + where
	}
	return where
}

// localityShown is the placement column's second line: workers planned near a PS.
func localityShown(d queueJob) string {
	if d.Placement.Workers == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d workers near a PS, %d on its node", d.Placement.NearPSDomain, d.Placement.Workers, d.Placement.NearPSNode)
}

// checkShown compares a row's shown texts with want, and its shown numbers with nums
// (printed with two decimals; the waiting term may have moved by a hundredth since).
func checkShown(t *testing.T, row shownRow, want map[string]string, nums map[string]float64) {
	t.Helper()
	for field, w := range want {
		if got := row.Fields[field]; got != w {
			t.Errorf("%s: %s shows %q, /debug/queue has %q", row.Job, field, got, w)
		}
	}
	for field, w := range nums {
		got, err := strconv.ParseFloat(row.Fields[field], 64)
		if err != nil || math.Abs(got-w) > 0.011 {
			t.Errorf("%s: %s shows %q, /debug/queue has %.3f", row.Job, field, row.Fields[field], w)
		}
	}
}

// checkScreenshot checks that the screenshot is a PNG of a page with something on it.
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is no PNG: %v", err)
	}
	colours := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	if b.Dx() < 800 || len(colours) < 20 {
		t.Errorf("screenshot %dx%d with %d colours: want a drawn page", b.Dx(), b.Dy(), len(colours))
	}
}

// pageState reads what the page shows.
func pageState(ctx context.Context) (shownPage, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](readPage))
	if err != nil {
		return shownPage{}, err
	}
	var p shownPage
	err = json.Unmarshal(raw, &p)
	return p, err
}

// startChromium starts Debian's headless Chromium (test/tools/chromium.sh installs it when
// missing) with a fresh profile and everything that would reach the network by itself off,
// trusting exactly the extender's certificate (its public key), and returns its context.
func startChromium(t *testing.T, certFile string) context.Context {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "test", "tools", "chromium.sh")).Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("test/tools/chromium.sh (finds or installs Debian's chromium): %v\n%s", err, stderr)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		t.Fatal("test/tools/chromium.sh printed no path")
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatalf("%s holds no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	browserLog := &lockedWriter{}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(lines[len(lines)-1]),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(browserLog),
	)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		if t.Failed() {
			t.Logf("chromium's output:\n%s", browserLog.String())
		}
	})
	// The first Run starts the browser; it lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v\n%s", err, browserLog.String())
	}
	return ctx
}

// lockedWriter keeps the browser's output, written from its output goroutine.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
