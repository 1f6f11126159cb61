package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/cps-extender/cps-extender/test/e2e/framework"
	"github.com/cps-extender/cps-extender/test/eval"
)

// Options tune a run.
type Options struct {
	// ExtenderBin is the cps-extender binary (BuildExtender), needed by the cps setups.
	ExtenderBin string
	// StuckAfter stops the run early once every job has arrived, none is running and nothing
	// was bound or completed for this long (simulated): nothing can change any more.
	StuckAfter time.Duration
	// Logf, when set, receives a progress line every ProgressEvery (real time).
	Logf func(format string, args ...any)
}

const (
	// sampleEvery is how often (real time) the harness samples the cluster's state.
	sampleEvery = 100 * time.Millisecond
	// progressEvery is how often (real time) Options.Logf hears of the run's progress.
	progressEvery = 10 * time.Second
	// apiWorkers is how many pods are created or deleted concurrently.
	apiWorkers = 4
	// readyTimeout bounds the wait for the extender's /readyz.
	readyTimeout = 60 * time.Second
	// defaultStuckAfter is Options.StuckAfter's default: above the extender's hold timeout
	// (20 real seconds), so a gathering gang is never mistaken for a stuck cluster.
	defaultStuckAfter = 25 * time.Minute
)

// Run replays w under setup s on a fresh control plane and returns what happened. The
// control plane, the extender and the scheduler stop with t's cleanup.
func Run(t testing.TB, s Setup, w eval.Workload, opts Options) eval.Run {
	t.Helper()
	if opts.StuckAfter == 0 {
		opts.StuckAfter = defaultStuckAfter
	}
	fw := framework.Options{}
	var schedArgs []string
	if s.NativeGang {
		gates := framework.NativeGangFeatureGate
		if s.NativeTopology {
			gates += ",TopologyAwareWorkloadScheduling=true" // alpha in 1.37.2: off by default
		}
		fw.FeatureGates, fw.RuntimeConfig = gates, framework.WorkloadAPIRuntimeConfig
		schedArgs = append(schedArgs, "--feature-gates="+gates)
	}
	cp := framework.Start(t, fw)
	specs := nodeSpecs(w.Params)
	cp.AddNodes(t, specs...)
	if err := createPriorityClasses(cp.Client); err != nil {
		t.Fatal(err)
	}
	if err := createNamespaces(cp.Client); err != nil {
		t.Fatal(err)
	}
	var watched []*framework.Process
	extAddr := ""
	if s.Extender() {
		extAddr = framework.FreeAddr(t)
		hookAddr := ""
		if s.TurnGate {
			hookAddr = framework.FreeAddr(t)
			framework.RegisterRepoTurnGateWebhook(t, cp.Client, hookAddr)
		}
		watched = append(watched, startExtender(t, cp, opts.ExtenderBin, extAddr, hookAddr, s))
		if s.TurnGate { // before the workload: idle, so switched off
			framework.WaitTurnGateWebhook(t, cp.Client, hookAddr, false, readyTimeout)
		}
	}
	cfg, err := schedulerConfig(cp.Kubeconfig, extAddr)
	if err != nil {
		t.Fatal(err)
	}
	watched = append(watched, cp.StartScheduler(t, cfg, schedArgs...))

	rec := newRecorder(cp.Client, w, s, rackOf(specs))
	stop := make(chan struct{})
	defer close(stop)
	if err := rec.watch(stop); err != nil {
		t.Fatal(err)
	}
	rec.start()
	go rec.submit()
	run := rec.loop(t, watched, opts)
	run.Setup = s.Name
	run.GPUs = w.Params.Nodes * eval.NodeGPU
	return run
}

// startExtender writes the setup's extender configuration and runs cps-extender as a child
// of the control plane, returning once /readyz answers 200.
func startExtender(t testing.TB, cp *framework.ControlPlane, bin, addr, hookAddr string, s Setup) *framework.Process {
	t.Helper()
	if bin == "" {
		t.Fatal("harness: Options.ExtenderBin is empty")
	}
	path := filepath.Join(cp.Dir, "cps-extender.yaml")
	if err := os.WriteFile(path, []byte(extenderConfig(addr, hookAddr, cp.Kubeconfig, s)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := cp.StartProcess(t, "cps-extender", bin, []string{"--config=" + path}, nil)
	framework.WaitExtenderReady(t, p, readyTimeout, framework.HTTPGet("http://"+addr+"/readyz"))
	return p
}

// recorder replays the workload and records, from a pod informer, every bind, start,
// completion and preemption. It is the job runner: a job whose pods all run counts down its
// run time (base duration x the placement's RunFactor, scaled to real time), then its pods
// are deleted; a pod deleted by anyone else (preemption) is recreated, as a training
// operator would, and the job's run starts over once all its pods run again.
type recorder struct {
	c      kubernetes.Interface
	work   eval.Workload
	setup  Setup
	rackOf map[string]string
	errs   chan error

	mu           sync.Mutex
	t0           time.Time
	jobs         []*jobState
	pods         map[string]*podState // by namespace/name
	binds        int
	completions  int
	lastProgress time.Time
	arrived      int
	samples      []eval.Sample
}

type jobState struct {
	rec     eval.JobRecord
	pods    []*podState
	arrived bool
	done    bool
	runGen  int         // bumped when a run is cut short, so its timer's completion is ignored
	timer   *time.Timer // set while the job counts down its run time
}

type podState struct {
	job      *jobState
	template *corev1.Pod
	worker   bool
	cpuMilli int64
	gpu      int64
	span     int // index of the open span in job.rec.Spans; -1 when not bound
	running  bool
	deleting bool // the harness deleted it (the job completed)
}

func newRecorder(c kubernetes.Interface, w eval.Workload, s Setup, racks map[string]string) *recorder {
	r := &recorder{c: c, work: w, setup: s, rackOf: racks, errs: make(chan error, 64), pods: map[string]*podState{}}
	for _, j := range w.Jobs {
		js := &jobState{rec: eval.JobRecord{Job: j, AllBound: eval.Never, Completed: eval.Never}}
		for _, pod := range jobPods(j, s) {
			ps := &podState{job: js, template: pod, span: -1, worker: pod.Labels["cps-extender.io/role"] == "worker"}
			ps.cpuMilli = pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
			if q, ok := pod.Spec.Containers[0].Resources.Requests[gpuResource]; ok {
				ps.gpu = q.Value()
			}
			js.pods = append(js.pods, ps)
			r.pods[podKey(pod)] = ps
		}
		r.jobs = append(r.jobs, js)
	}
	return r
}

// watch starts the pod informer and waits for its cache to sync. It watches every
// namespace (the workload's are one per user); observe ignores pods not of the workload.
func (r *recorder) watch(stop <-chan struct{}) error {
	f := informers.NewSharedInformerFactory(r.c, 0)
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj, false) },
		UpdateFunc: func(_, obj any) { r.observe(obj, false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			r.observe(obj, true)
		},
	})
	if err != nil {
		return err
	}
	f.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		return fmt.Errorf("pod informer did not sync")
	}
	return nil
}

func (r *recorder) start() {
	r.mu.Lock()
	r.t0, r.lastProgress = time.Now(), time.Now()
	r.mu.Unlock()
}

// now is the simulated time since the run's start; call with mu held.
func (r *recorder) now() time.Duration { return eval.Sim(time.Since(r.t0)) }

// submit creates the jobs at their arrival times; jobs arriving together have their pods
// created interleaved, as concurrent submissions would be.
func (r *recorder) submit() {
	jobs := r.work.Jobs
	for i := 0; i < len(jobs); {
		k := i
		for k < len(jobs) && jobs[k].Arrival == jobs[i].Arrival {
			k++
		}
		time.Sleep(time.Until(r.t0.Add(eval.Real(jobs[i].Arrival))))
		var lists [][]*corev1.Pod
		for _, j := range jobs[i:k] {
			if r.setup.NativeGang {
				if err := createGang(r.c, j, r.setup.NativeTopology); err != nil {
					r.errs <- err
					return
				}
			}
			lists = append(lists, jobPods(j, r.setup))
		}
		r.mu.Lock()
		for _, js := range r.jobs[i:k] {
			js.arrived = true
		}
		r.arrived = k
		r.mu.Unlock()
		if err := concurrently(interleave(lists), func(p *corev1.Pod) error { return createPod(r.c, p) }); err != nil {
			r.errs <- err
			return
		}
		i = k
	}
}

// interleave lists the pods of several jobs round-robin.
func interleave(lists [][]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for round := 0; ; round++ {
		added := false
		for _, l := range lists {
			if round < len(l) {
				out, added = append(out, l[round]), true
			}
		}
		if !added {
			return out
		}
	}
}

// concurrently calls fn for every item, apiWorkers at a time, and returns the first error.
func concurrently[T any](items []T, fn func(T) error) error {
	work := make(chan T)
	errs := make(chan error, len(items))
	var wg sync.WaitGroup
	for range apiWorkers {
		wg.Go(func() {
			for item := range work {
				if err := fn(item); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, item := range items {
		work <- item
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// observe records a pod's new state (or its removal, gone).
func (r *recorder) observe(obj any, gone bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.pods[podKey(pod)]
	if ps == nil {
		return
	}
	j := ps.job
	now := r.now()
	if gone {
		if ps.span >= 0 {
			j.rec.Spans[ps.span].End = now
			ps.span = -1
		}
		ps.running = false
		if !ps.deleting && !j.done {
			// Preempted: the run, if any, is lost; a controller would recreate the pod.
			if j.timer != nil {
				j.timer.Stop()
				j.timer = nil
				j.runGen++
				j.rec.Restarts++
			}
			go func() {
				if err := createPod(r.c, ps.template); err != nil {
					r.errs <- err
				}
			}()
		}
		ps.deleting = false
		return
	}
	if pod.Spec.NodeName != "" && ps.span < 0 {
		j.rec.Spans = append(j.rec.Spans, eval.PodSpan{Pod: podKey(pod), Node: pod.Spec.NodeName, Bound: now, End: eval.Never, CPUMilli: ps.cpuMilli, GPU: ps.gpu})
		ps.span = len(j.rec.Spans) - 1
		r.binds++
		r.lastProgress = time.Now()
		if j.rec.AllBound == eval.Never && j.boundCount() == len(j.pods) {
			j.rec.AllBound = now
		}
	}
	ps.running = pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil
	if !j.done && j.timer == nil && j.allRunning() {
		r.startRun(j)
	}
}

func (j *jobState) boundCount() int {
	n := 0
	for _, p := range j.pods {
		if p.span >= 0 {
			n++
		}
	}
	return n
}

func (j *jobState) allRunning() bool {
	for _, p := range j.pods {
		if !p.running {
			return false
		}
	}
	return true
}

// placement is where the job's pods are now.
func (r *recorder) placement(j *jobState) eval.Placement {
	pl := eval.Placement{RackOf: r.rackOf}
	for _, p := range j.pods {
		if p.span < 0 {
			continue
		}
		node := j.rec.Spans[p.span].Node
		if p.worker {
			pl.Workers = append(pl.Workers, node)
		} else {
			pl.PS = append(pl.PS, node)
		}
	}
	return pl
}

// startRun starts the job's countdown; call with mu held.
func (r *recorder) startRun(j *jobState) {
	j.rec.Placement = r.placement(j)
	gen := j.runGen
	j.timer = time.AfterFunc(eval.Real(j.rec.Placement.RunTime(j.rec.Job.Base)), func() { r.complete(j, gen) })
}

// complete finishes a job whose run time is over: it records the completion and deletes the
// job's pods.
func (r *recorder) complete(j *jobState, gen int) {
	r.mu.Lock()
	if j.done || j.runGen != gen {
		r.mu.Unlock()
		return
	}
	j.done, j.timer = true, nil
	j.rec.Completed = r.now()
	r.completions++
	r.lastProgress = time.Now()
	pods := make([]*corev1.Pod, len(j.pods))
	for i, p := range j.pods {
		p.deleting = true
		pods[i] = p.template
	}
	r.mu.Unlock()
	go func() {
		if err := concurrently(pods, func(p *corev1.Pod) error { return deletePod(r.c, p) }); err != nil {
			r.errs <- err
		}
	}()
}

// sample records the cluster's state now and returns it with whether every job arrived and
// how long ago (real time) the last progress was.
func (r *recorder) sample() (s eval.Sample, unfinished int, allArrived bool, idle time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s = eval.Sample{At: r.now(), Binds: r.binds, Completions: r.completions}
	for _, j := range r.jobs {
		if !j.arrived || j.done {
			continue
		}
		unfinished++
		bound, gpu := 0, 0
		for _, p := range j.pods {
			if p.span >= 0 {
				bound++
				gpu += int(p.gpu)
			}
		}
		s.UsedGPU += gpu
		switch {
		case bound == 0:
			s.Pending++
		case bound < len(j.pods):
			s.Partial++
		default:
			s.Running++
			s.UsefulGPU += gpu
		}
	}
	r.samples = append(r.samples, s)
	return s, unfinished, r.arrived == len(r.jobs), time.Since(r.lastProgress)
}

// loop samples until every job is done, the deadline passes or the cluster is stuck, and
// returns the record. A watched process that exits, or an API error, fails t.
func (r *recorder) loop(t testing.TB, watched []*framework.Process, opts Options) eval.Run {
	t.Helper()
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	lastLog := time.Now()
	run := eval.Run{}
	for range tick.C {
		select {
		case err := <-r.errs:
			t.Fatal(err)
		default:
		}
		for _, p := range watched {
			if p.Exited() {
				t.Fatalf("%s exited: %v (log %s)", p.Name, p.ExitErr(), p.LogPath())
			}
		}
		s, unfinished, allArrived, idle := r.sample()
		if opts.Logf != nil && time.Since(lastLog) >= progressEvery {
			lastLog = time.Now()
			opts.Logf("%s t=%.0fmin: %d binds, %d done, %d running, %d partial, %d pending",
				r.setup.Name, eval.Minutes(s.At), s.Binds, s.Completions, s.Running, s.Partial, s.Pending)
		}
		switch {
		case allArrived && unfinished == 0:
		case s.At >= r.work.Params.Deadline:
			run.TimedOut = true
		case allArrived && s.Running == 0 && idle >= eval.Real(opts.StuckAfter):
			run.Stuck = true
		default:
			continue
		}
		break
	}
	return r.finish(run)
}

// finish stops the countdowns and returns the record; a job that never ran gets its
// placement as it stands, so that locality covers every bound worker.
func (r *recorder) finish(run eval.Run) eval.Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	run.End = r.now()
	for _, j := range r.jobs {
		if j.timer != nil {
			j.timer.Stop()
			j.timer = nil
		}
		j.done = true
		if len(j.rec.Placement.PS)+len(j.rec.Placement.Workers) == 0 {
			j.rec.Placement = r.placement(j)
		}
		rec := j.rec
		rec.Spans = append([]eval.PodSpan(nil), j.rec.Spans...)
		run.Jobs = append(run.Jobs, rec)
	}
	run.Samples = append([]eval.Sample(nil), r.samples...)
	return run
}
