// Command demo is `make demo`: cps-extender end to end on a laptop, in one command.
//
// It starts a local control plane (etcd, kube-apiserver and kwok, from the end-to-end
// framework) with 8 fake nodes of 8 CPU in 2 racks, builds and starts cps-extender with its
// turn-gate webhook registered as deploy/webhook ships it, and starts kube-scheduler with
// scheduler-config/kube-scheduler.yaml as shipped. It then submits the
// PS/worker jobs of test/demo/workload.yaml at once, each user's in the user's namespace
// (labelled with the user, as tenants are), more than the cluster holds, waits until
// every job is either fully bound or waiting, and prints the extender's admission queue, where
// each job's parameter servers and workers went (and how many workers sit beside a PS), and the
// order in which the jobs became fully bound. Then it finishes the running jobs (deletes their
// pods), shows the waiting jobs taking their turn and how long the handover took, and tears
// everything down.
//
// Run it from the repository root:
//
//	make demo
//	CPS_CONTROLPLANE_BIN=$(test/tools/build-controlplane.sh | tail -n1) go run ./test/demo [-workload FILE]
//
// Process logs go to files, never to the terminal: they live in the control plane's scratch
// folder while the demo runs and are copied, with the framework's messages (demo.log), to a
// folder under $TMPDIR at exit; both are printed. The exit status is 0 on success, 1 on failure
// (with the reason on stderr), and 128+signal when interrupted: Ctrl-C stops every process
// and leaves none behind (a second Ctrl-C kills them at once, skipping the removal of the
// temporary folders).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/test/e2e/framework"
)

const (
	// settleTimeout bounds each wait for the cluster to settle; generous, since the machine
	// may be busy with end-to-end tests.
	settleTimeout = 180 * time.Second
	// deleteTimeout bounds the wait until finished jobs' pods are gone.
	deleteTimeout = 120 * time.Second
	// apiWorkers is how many pods are created or deleted concurrently.
	apiWorkers = 8
)

// main parses the flags and runs the demo.
func main() {
	workloadPath := flag.String("workload", "", "the workload file (default: test/demo/workload.yaml in the repository)")
	flag.Parse()
	os.Exit(runDemo(*workloadPath))
}

// runDemo runs the demo and returns the process exit status.
func runDemo(workloadPath string) int {
	d, err := newDemo(os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	d.handleSignals()
	err = d.runCatching(workloadPath)
	d.teardown()
	if d.cp.Load() == nil {
		_ = os.RemoveAll(d.logsDir) // nothing ran: no logs worth keeping
	}
	if code := d.signalled.Load(); code != 0 {
		return int(code)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo FAILED: %v\n", err)
		if d.cp.Load() != nil {
			fmt.Fprintf(os.Stderr, "process logs and framework messages: %s\n", d.logsDir)
		}
		return 1
	}
	fmt.Fprintf(d.out, "\nDemo OK. Process logs: %s\n", d.logsDir)
	return 0
}

// demo holds one run. The fields the signal handler reads are atomic.
type demo struct {
	t       *runner
	out     io.Writer
	errOut  io.Writer
	root    string // repository root
	logsDir string // where the logs are copied at exit

	cp        atomic.Pointer[framework.ControlPlane]
	recorder  atomic.Pointer[bindRecorder]
	signalled atomic.Int32 // 128+signal once interrupted

	teardownOnce sync.Once
}

// newDemo finds the repository root and makes the logs folder, whose demo.log receives the
// framework's messages.
func newDemo(out, errOut io.Writer) (*demo, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, fmt.Errorf("%w (run the demo from the repository)", err)
	}
	logsDir, err := os.MkdirTemp("", "cps-demo-logs-")
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(logsDir, "demo.log"))
	if err != nil {
		return nil, err
	}
	return &demo{t: newRunner(logFile, errOut), out: out, errOut: errOut, root: root, logsDir: logsDir}, nil
}

// handleSignals tears the demo down on SIGINT or SIGTERM and exits with 128+signal. A second
// signal meanwhile kills every child process at once (framework.KillAllOnSignal).
func (d *demo) handleSignals() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		framework.KillAllOnSignal()
		signal.Stop(sigs)
		code := 1
		if s, ok := sig.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		d.signalled.Store(int32(code))
		d.t.silence()
		fmt.Fprintf(d.errOut, "\n%v: stopping the demo (Ctrl-C again kills every process at once, leaving its temporary folders behind)\n", sig)
		d.teardown()
		os.Exit(code)
	}()
}

// runCatching runs the demo, turning a fatal error reported through the runner (or any
// panic) into an error, so that teardown always follows.
func (d *demo) runCatching(workloadPath string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if f, ok := v.(fatalError); ok {
				err = f
				return
			}
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	return d.run(workloadPath)
}

// run is the demo's story, step by step.
func (d *demo) run(workloadPath string) error {
	if workloadPath == "" {
		workloadPath = filepath.Join(d.root, "test", "demo", "workload.yaml")
	}
	work, err := loadWorkload(workloadPath)
	if err != nil {
		return err
	}
	d.step("Workload (%s)", d.relative(workloadPath))
	printWorkload(d.out, work)

	build := buildExtender(d.t.TempDir()) // compiles while the control plane starts
	nodes := demoNodes()
	cp, err := d.startControlPlane(nodes, work)
	if err != nil {
		return err
	}
	ext, extAddr, err := d.startExtender(cp, build, work)
	if err != nil {
		return err
	}
	sched, err := d.startScheduler(cp, extAddr)
	if err != nil {
		return err
	}
	rec, err := recordBindings(cp.Client, work.namespaces())
	if err != nil {
		return err
	}
	d.recorder.Store(rec)

	r := &round{
		demo: d, work: work, nodes: nodes, rec: rec, plane: cp,
		ext: newExtenderClient(extAddr), procs: []*framework.Process{ext, sched},
	}
	return r.play()
}

// startControlPlane starts etcd, kube-apiserver and kwok, adds the nodes, and creates the
// workload's PriorityClasses and its users' namespaces.
func (d *demo) startControlPlane(nodes []framework.NodeSpec, work workload) (*framework.ControlPlane, error) {
	d.step("Control plane: etcd, kube-apiserver, kwok")
	began := time.Now()
	cp := framework.Start(d.t, framework.Options{})
	d.cp.Store(cp)
	cp.AddNodes(d.t, nodes...)
	if err := createPriorityClasses(cp.Client, work.PriorityClasses); err != nil {
		return nil, err
	}
	if err := createUserNamespaces(cp.Client, work); err != nil {
		return nil, err
	}
	fmt.Fprintf(d.out, "  up in %s at %s\n", seconds(time.Since(began)), cp.URL)
	printNodes(d.out, nodes)
	fmt.Fprintf(d.out, "  PriorityClasses (non-preempting): %s\n", strings.Join(sortedKeys(work.PriorityClasses), ", "))
	fmt.Fprintf(d.out, "  a namespace per user, labelled %s=<user>: %s\n", labelUser, userNamespaces(work))
	fmt.Fprintf(d.out, "  Process logs: %s/*.log (copied to %s at exit)\n", cp.Dir, d.logsDir)
	return cp, nil
}

// startExtender waits for the build and starts cps-extender on a free loopback port.
func (d *demo) startExtender(cp *framework.ControlPlane, build <-chan buildResult, work workload) (*framework.Process, string, error) {
	d.step("cps-extender")
	began := time.Now()
	b := <-build
	if b.err != nil {
		return nil, "", b.err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	hookAddr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	if err := framework.RegisterTurnGateWebhook(cp.Client, filepath.Join(d.root, framework.TurnGateWebhookManifest), hookAddr); err != nil {
		return nil, "", err
	}
	p, err := startExtender(d.t, cp, b.bin, addr, hookAddr, work.Users, work.UrgentPriorityClasses)
	if err != nil {
		return nil, "", err
	}
	fmt.Fprintf(d.out, "  built and ready in %s at http://%s (config %s, log %s)\n",
		seconds(time.Since(began)), addr, filepath.Join(cp.Dir, "cps-extender.yaml"), p.LogPath())
	fmt.Fprintf(d.out, "  model.userTiers: %s; affinity.topology: [%s]\n", userTiers(work.Users), rackLabel)
	fmt.Fprintf(d.out, "  a job's user is its namespace's %s label (the pods name none; gang.podUserNamespaces unset)\n", labelUser)
	framework.WaitTurnGateWebhook(d.t, cp.Client, hookAddr, false, apiCallTimeout) // idle: switched off
	fmt.Fprintf(d.out, "  turn-gate webhook (%s) at https://%s, its certificate kept by the extender:\n"+
		"  pods of %s created while a job waits get the scheduling gate %s, lifted in their job's turn;\n"+
		"  while none waits the extender switches the API server's calls off (idle now: off)\n",
		framework.TurnGateWebhookManifest, hookAddr, schedulerName, gang.TurnGate)
	return p, addr, nil
}

// startScheduler starts kube-scheduler with the shipped configuration pointed at the
// control plane and the extender.
func (d *demo) startScheduler(cp *framework.ControlPlane, extAddr string) (*framework.Process, error) {
	d.step("kube-scheduler (scheduler-config/kube-scheduler.yaml)")
	began := time.Now()
	cfg, err := schedulerConfig(d.root, cp.Kubeconfig, extAddr)
	if err != nil {
		return nil, err
	}
	p := cp.StartScheduler(d.t, cfg)
	fmt.Fprintf(d.out, "  ready in %s, profile %s, extender http://%s/scheduler (log %s)\n",
		seconds(time.Since(began)), schedulerName, extAddr, p.LogPath())
	return p, nil
}

// teardown stops the bind recorder, then every process in reverse start order, copies the
// logs, and runs the cleanups (which remove the scratch folder and the extender binary). It
// runs once, whether the demo ended, failed or was interrupted.
func (d *demo) teardown() {
	d.teardownOnce.Do(func() {
		if r := d.recorder.Load(); r != nil {
			r.Stop()
		}
		cp := d.cp.Load()
		if cp == nil {
			d.t.runCleanups() // stops whatever framework.Start had started
			if d.signalled.Load() != 0 {
				fmt.Fprintln(d.out, "  stopped the control plane that was starting")
			}
			return
		}
		d.step("Teardown")
		began := time.Now()
		procs := cp.Processes()
		for i := len(procs) - 1; i >= 0; i-- {
			if err := procs[i].Stop(); err != nil {
				d.t.Logf("stop: %v", err)
			}
		}
		if err := copyLogs(cp.Dir, d.logsDir); err != nil {
			fmt.Fprintf(d.errOut, "saving the logs: %v\n", err)
		}
		d.t.runCleanups()
		left := 0
		for _, p := range procs {
			if !p.Exited() {
				left++
			}
		}
		fmt.Fprintf(d.out, "  stopped %d processes (%d still running) and removed the scratch folder in %s\n",
			len(procs), left, seconds(time.Since(began)))
	})
}

// copyLogs copies the process logs and the generated configuration files of the scratch
// folder into dst.
func copyLogs(scratch, dst string) error {
	var errs []error
	for _, pattern := range []string{"*.log", "cps-extender.yaml", "kube-scheduler*.yaml"} {
		matches, err := filepath.Glob(filepath.Join(scratch, pattern))
		if err != nil {
			return err
		}
		for _, src := range matches {
			data, err := os.ReadFile(src)
			if err == nil {
				err = os.WriteFile(filepath.Join(dst, filepath.Base(src)), data, 0o644)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// step prints a section heading.
func (d *demo) step(format string, a ...any) {
	fmt.Fprintf(d.out, "\n==> "+format+"\n", a...)
}

// relative shows path relative to the repository root when it is inside it.
func (d *demo) relative(path string) string {
	if rel, err := filepath.Rel(d.root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// round is the part of the demo that runs the workload: submit, settle, report, hand over.
type round struct {
	*demo
	work  workload
	nodes []framework.NodeSpec
	rec   *bindRecorder
	plane *framework.ControlPlane
	ext   extenderClient
	procs []*framework.Process // the extender and the scheduler: the demo fails if one exits
}

// play submits the workload, reports the first settled state, finishes the running jobs and
// reports the jobs that took their turn.
func (r *round) play() error {
	r.step("Submitting %d jobs at once (%d pods)", len(r.work.Jobs), countPods(r.work.Jobs))
	start := time.Now()
	if err := createPods(r.plane.Client, interleavedPods(r.work.Jobs)); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "  created in %s; job phases as the extender reports them (time since submission):\n", seconds(time.Since(start)))
	watcher := newPhaseWatcher(r.out, start)
	q := r.waitSettled(r.work.Jobs, watcher)
	fmt.Fprintf(r.out, "  settled %s after submission\n", seconds(time.Since(start)))

	s := r.snapshot(q)
	running, waiting := splitJobs(s, r.work.Jobs)
	if err := r.report("Settled", s, r.work.Jobs); err != nil {
		return err
	}
	if gated, err := r.gatedPods(); err == nil && gated > 0 {
		fmt.Fprintf(r.out, "\n  %d pods of the waiting jobs still carry the turn gate (kubectl: SchedulingGated):\n"+
			"  kube-scheduler does not try them until their job's turn.\n", gated)
	}
	r.step("Order in which jobs became fully bound")
	printBindOrder(r.out, s, r.rec.FullyBound(r.work.Jobs), start)
	fmt.Fprintln(r.out, "  (P decides which jobs are admitted, and in what order when they do not all fit; jobs admitted\n"+
		"  side by side bind in whatever order kube-scheduler reaches their pods.)")

	if len(waiting) == 0 {
		fmt.Fprintln(r.out, "\n  Every job fit at once: there is nothing to hand over.")
		return nil
	}
	if len(running) == 0 {
		return fmt.Errorf("no job runs and %d wait: nothing can finish to make room", len(waiting))
	}
	return r.handover(running, waiting, start, watcher)
}

// handover finishes the running jobs, waits until the waiting ones settled, and reports
// them and how long the handover took.
func (r *round) handover(running, waiting []jobSpec, start time.Time, watcher *phaseWatcher) error {
	r.step("Finishing %s (deleting their pods) so that %s take their turn", jobNames(running), jobNames(waiting))
	began, gone, err := r.finish(running)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.out, "  deleted %d pods at %s; the last was gone %s later\n", countPods(running), since(start, began), seconds(gone.Sub(began)))
	q := r.waitSettled(waiting, watcher)
	s := r.snapshot(q)
	if err := r.report("After the handover", s, waiting); err != nil {
		return err
	}
	r.step("Order in which the waiting jobs became fully bound")
	bound := r.rec.FullyBound(waiting)
	printBindOrder(r.out, s, bound, start)
	if len(bound) == 0 {
		return fmt.Errorf("none of %s ran after the running jobs finished", jobNames(waiting))
	}
	first, last := bound[0].first, bound[len(bound)-1].last
	for _, b := range bound {
		if b.first.Before(first) {
			first = b.first
		}
	}
	fmt.Fprintf(r.out, "\n  Handover: the first pod of a waiting job was bound %s after the deletion began, the last %s after (%d of %d waiting jobs fully bound).\n",
		seconds(first.Sub(began)), seconds(last.Sub(began)), len(bound), len(waiting))
	if len(bound) < len(waiting) {
		fmt.Fprintf(r.out, "  Still waiting: %d jobs (see the queue above).\n", len(waiting)-len(bound))
	}
	return nil
}

// report prints the queue table, the per-job placement summary and the node map.
func (r *round) report(title string, s snapshot, jobs []jobSpec) error {
	table, err := r.ext.QueueTable()
	if err != nil {
		return err
	}
	r.step("%s: the admission queue (GET /debug/queue?format=table)", title)
	printQueueTable(r.out, table)
	r.step("%s: where the jobs went", title)
	printPlacements(r.out, s, jobs)
	fmt.Fprintln(r.out)
	printNodeMap(r.out, s, r.nodes)
	return nil
}

// snapshot reads the pods' placements from the API server, in every user's namespace, and
// pairs them with the queue.
func (r *round) snapshot(q queueReport) snapshot {
	placements := map[string]string{}
	for _, ns := range r.work.namespaces() {
		for name, node := range framework.PodPlacements(r.t, r.plane.Client, ns) {
			placements[ns+"/"+name] = node
		}
	}
	return snapshot{
		work:       r.work,
		decisions:  q.byKey(),
		placements: placements,
		rackOf:     rackOf(r.nodes),
	}
}

// waitSettled polls the extender's queue until every job of jobs has settled (see jobState)
// for settleFor, printing phase changes meanwhile, and returns the last queue. It fails the
// demo if the extender or the scheduler exits, or after settleTimeout.
func (r *round) waitSettled(jobs []jobSpec, watcher *phaseWatcher) queueReport {
	var q queueReport
	var stableSince time.Time
	framework.WaitFor(r.t, settleTimeout, "every job fully bound or waiting", func() (bool, error) {
		if err := r.checkAlive(); err != nil {
			return false, framework.StopPolling(err)
		}
		if err := r.checkPodsExist(jobs); err != nil {
			return false, framework.StopPolling(err)
		}
		var err error
		if q, err = r.ext.Queue(); err != nil {
			stableSince = time.Time{}
			return false, err
		}
		if unsettled := r.unsettled(q, jobs, watcher); len(unsettled) > 0 {
			stableSince = time.Time{}
			return false, fmt.Errorf("not settled: %s", strings.Join(unsettled, "; "))
		}
		if stableSince.IsZero() {
			stableSince = time.Now()
		}
		return time.Since(stableSince) >= settleFor, nil
	})
	return q
}

// unsettled reports each job of jobs that has not settled in q, and prints phase changes.
func (r *round) unsettled(q queueReport, jobs []jobSpec, watcher *phaseWatcher) []string {
	decisions := q.byKey()
	var out []string
	for _, j := range jobs {
		d := decisions[j.Key()]
		watcher.observe(j.Name, d)
		if jobState(d, r.rec.BoundCount(j.PodKeys()), j.Size()) {
			continue
		}
		if d == nil {
			out = append(out, j.Name+" not in the queue yet")
		} else {
			out = append(out, fmt.Sprintf("%s %s (%d/%d bound, %d held) %s", j.Name, d.Phase, d.Bound, d.Pods, d.Held, d.Blocker))
		}
	}
	return out
}

// checkAlive reports a watched process that has exited.
func (r *round) checkAlive() error {
	for _, p := range r.procs {
		if p.Exited() {
			return fmt.Errorf("%s exited: %v (log %s)", p.Name, p.ExitErr(), p.LogPath())
		}
	}
	return nil
}

// checkPodsExist reports a pod of jobs that someone else deleted: its gang can never be
// complete again (the demo's pods have no controller to recreate them).
func (r *round) checkPodsExist(jobs []jobSpec) error {
	for _, j := range jobs {
		if key := r.rec.FirstGone(j.PodKeys()); key != "" {
			return fmt.Errorf("pod %s of job %s was deleted behind the demo's back (kube-scheduler preemption? see kube-scheduler.log)",
				key, j.Name)
		}
	}
	return nil
}

// finish deletes the pods of jobs and returns when it began and when the bind recorder saw
// the last one go.
func (r *round) finish(jobs []jobSpec) (began, gone time.Time, err error) {
	var names []string
	for _, j := range jobs {
		names = append(names, j.PodKeys()...)
	}
	began = time.Now()
	if err := deletePods(r.plane.Client, names); err != nil {
		return began, time.Time{}, err
	}
	framework.WaitFor(r.t, deleteTimeout, "the finished jobs' pods to be gone", func() (bool, error) {
		if r.rec.Gone(names) {
			gone = time.Now()
			return true, nil
		}
		return false, nil
	})
	return began, gone, nil
}

// gatedPods counts the workload's pods, in every user's namespace, that still carry the
// turn gate.
func (r *round) gatedPods() (int, error) {
	n := 0
	for _, ns := range r.work.namespaces() {
		ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
		pods, err := r.plane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		cancel()
		if err != nil {
			return 0, err
		}
		for i := range pods.Items {
			if turn, _ := gang.SchedulingGates(&pods.Items[i]); turn {
				n++
			}
		}
	}
	return n, nil
}

// splitJobs divides jobs into those fully bound and the rest.
func splitJobs(s snapshot, jobs []jobSpec) (running, waiting []jobSpec) {
	for _, j := range jobs {
		ps, workers := s.nodesOf(j)
		if len(ps)+len(workers) == j.Size() {
			running = append(running, j)
		} else {
			waiting = append(waiting, j)
		}
	}
	return running, waiting
}

// createPods creates pods, apiWorkers at a time, and returns the first error.
func createPods(c kubernetes.Interface, pods []*corev1.Pod) error {
	return concurrently(pods, func(ctx context.Context, pod *corev1.Pod) error {
		if _, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		return nil
	})
}

// deletePods deletes the pods named namespace/name with grace period 0 (the jobs finish
// together), apiWorkers at a time, and returns the first error.
func deletePods(c kubernetes.Interface, keys []string) error {
	zero := int64(0)
	return concurrently(keys, func(ctx context.Context, key string) error {
		namespace, name, _ := strings.Cut(key, "/")
		if err := c.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			return fmt.Errorf("delete pod %s: %w", key, err)
		}
		return nil
	})
}

// concurrently calls fn for every item, apiWorkers at a time, each call bounded by
// apiCallTimeout, and returns the first error.
func concurrently[T any](items []T, fn func(context.Context, T) error) error {
	work := make(chan T)
	errs := make(chan error, len(items))
	var wg sync.WaitGroup
	for range apiWorkers {
		wg.Go(func() {
			for item := range work {
				ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
				if err := fn(ctx, item); err != nil {
					errs <- err
				}
				cancel()
			}
		})
	}
	for _, item := range items {
		work <- item
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs // nil when no call failed
}

// countPods counts the pods of jobs.
func countPods(jobs []jobSpec) int {
	n := 0
	for _, j := range jobs {
		n += j.Size()
	}
	return n
}

// jobNames renders job names as "a, b and c".
func jobNames(jobs []jobSpec) string {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
	}
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// userTiers renders the user -> tier map in user order: "alice=gold, bob=silver".
func userTiers(users map[string]string) string {
	parts := make([]string, 0, len(users))
	for _, u := range sortedKeys(users) {
		parts = append(parts, u+"="+users[u])
	}
	return strings.Join(parts, ", ")
}

// userNamespaces renders each user's namespace in user order: "team-alice (alice), ...".
func userNamespaces(work workload) string {
	parts := make([]string, 0, len(work.Users))
	for _, u := range sortedKeys(work.Users) {
		parts = append(parts, fmt.Sprintf("%s (%s)", work.namespaceOf(u), u))
	}
	return strings.Join(parts, ", ")
}

// seconds renders a duration in seconds with one decimal.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}
