// Package volcano serves Volcano's scheduler extender verbs (predicate, prioritize, preemptable,
// reclaimable, queueOverused, jobEnqueueable, jobReady, the session calls). It decides from
// Volcano's own payloads and the priority model, with no informers; it imports wire, config,
// gang and the model.
package volcano

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/config"

	gocache "github.com/patrickmn/go-cache"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/cps-extender/cps-extender/extender/wire"
	"github.com/cps-extender/cps-extender/priority"
)

// The verbs of Volcano's scheduler `extender` plugin, served under VolcanoConfig.URLPrefix.
const (
	VerbOnSessionOpen  = "onSessionOpen"
	VerbOnSessionClose = "onSessionClose"
	VerbPredicate      = "predicate"
	VerbPrioritize     = "prioritize"
	VerbPreemptable    = "preemptable"
	VerbReclaimable    = "reclaimable"
	VerbQueueOverused  = "queueOverused"
	VerbJobEnqueueable = "jobEnqueueable"
	VerbJobReady       = "jobReady"
)

// volcanoScoreScale maps the affinity score (0..10) onto Volcano's node-score range (0..100).
const volcanoScoreScale = 10

// volcanoSessionKey is the go-cache key of the latest session snapshot. Volcano runs one
// session at a time, so the latest is the one every call belongs to.
const volcanoSessionKey = "latest"

// Verbs answers Volcano's scheduler through its `extender` plugin
// (protocols.md, section 2). Volcano gangs, queues and binds itself; the extender adds what
// it knows: the combined-priority order of enqueueing, PS-worker affinity, hard PS
// anti-affinity, and no eviction of a job for one that ranks below it. It needs no
// informers: every decision is made from the session snapshot that onSessionOpen sends (kept
// in go-cache for SessionTTL, replaced by the next session, dropped at onSessionClose) and
// from each call's own payload; a call without a snapshot answers from its payload alone.
type Verbs struct {
	log      *zap.Logger
	prefix   string
	tuning   atomic.Pointer[volcanoTuning] // swapped by a config reload
	gang     config.GangConfig
	clock    clock.PassiveClock
	ttl      time.Duration  // SessionTTL, on clock
	sessions *gocache.Cache // volcanoSessionKey -> *volcanoSession
	// big is held while a body of bigBody bytes or more is decoded and answered.
	big chan struct{}
}

// New builds the Volcano verbs from their dependencies, validating them all at
// once. clk is the clock of the waiting term and of the session's SessionTTL; nil means the
// real clock.
func New(log *zap.Logger, cfg config.VolcanoConfig, model priority.Model, affinity priority.Affinity, gang config.GangConfig, clk clock.PassiveClock) (*Verbs, error) {
	var errs []error
	if log == nil {
		errs = append(errs, errors.New("log is required"))
	}
	errs = append(errs, cfg.Validate()...)
	errs = append(errs, model.Validate()...)
	errs = append(errs, affinity.Validate()...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("volcano verbs: %w", errors.Join(errs...))
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	ttl := cfg.SessionTTL.Duration
	// The clock decides a session's expiry; go-cache's own only frees the memory.
	v := &Verbs{log: log, prefix: cfg.URLPrefix, gang: gang, clock: clk, ttl: ttl, sessions: gocache.New(2*ttl, ttl), big: make(chan struct{}, 1)}
	v.SetModel(model, affinity)
	return v, nil
}

// volcanoTuning is the reloadable part of the Volcano verbs' configuration.
type volcanoTuning struct {
	model    priority.Model
	affinity priority.Affinity
}

// SetModel swaps the model and affinity the verbs use (a config reload).
func (v *Verbs) SetModel(model priority.Model, affinity priority.Affinity) {
	v.tuning.Store(&volcanoTuning{model: model, affinity: affinity})
}

func (v *Verbs) tuned() *volcanoTuning { return v.tuning.Load() }

// URLPrefix is the prefix the Volcano verbs are served under.
func (v *Verbs) URLPrefix() string { return v.prefix }

// Routes are the Volcano verbs, served under the Volcano prefix. They decide from
// Volcano's own payloads, not the informers, so they answer from the start (an
// onSessionOpen that fails would switch the extender off for that session).
func (v *Verbs) Routes() []wire.Route {
	var out []wire.Route
	for _, route := range []struct {
		verb    string
		handler wire.Handler
	}{
		{VerbOnSessionOpen, v.onSessionOpen},
		{VerbOnSessionClose, serveVolcano(v, v.decideSessionClose)},
		{VerbPredicate, serveVolcano(v, v.decidePredicate)},
		{VerbPrioritize, serveVolcano(v, v.decidePrioritize)},
		{VerbPreemptable, serveVolcano(v, v.decideEvict)},
		{VerbReclaimable, serveVolcano(v, v.decideEvict)},
		{VerbQueueOverused, serveVolcano(v, v.decideQueueOverused)},
		{VerbJobEnqueueable, serveVolcano(v, v.decideEnqueue)},
		{VerbJobReady, serveVolcano(v, v.decideJobReady)},
	} {
		out = append(out, wire.Route{Path: v.prefix + "/" + route.verb, Verb: "volcano/" + route.verb, Handler: route.handler, Kind: wire.KindVolcano})
	}
	return out
}

// volcanoAnswer is what a Volcano verb decided: the body to answer, and the subject (task or
// job) and a summary for the access log.
type volcanoAnswer struct {
	body     any
	subject  string
	decision string
}

// serveVolcano is every Volcano verb but onSessionOpen: decode the body (an empty body reads
// as {}), make the verb's decision, note it for the access log, answer 200 with JSON.
// Malformed JSON or a field of the wrong type is answered 400, a body over the limit 413.
func serveVolcano[Req any](v *Verbs, decide func(*Req) volcanoAnswer) wire.Handler {
	return func(w http.ResponseWriter, r *http.Request, c wire.Call) wire.Note {
		var req Req
		release, err := v.decode(w, r, c.MaxBytes, &req)
		defer release()
		if err != nil {
			wire.WriteError(w, err)
			return wire.Note{}
		}
		a := decide(&req)
		wire.WriteJSON(w, http.StatusOK, a.body)
		return wire.Note{Pod: a.subject, Decision: a.decision}
	}
}

// bigBody is the size from which a Volcano body is read, decoded and answered only while no
// other such body is: onSessionOpen and prioritize carry every node's NodeInfo (~7 MB at
// 5000 nodes), and four at once took a 100k-pod extender's peak RSS from 503 to 598 MiB
// (`make load`). Predicates, 16 at a time, are small and never wait.
const bigBody = 1 << 20

// decode reads the body into v; an empty (or all-whitespace) body is not an error and
// leaves v at its zero value, as "{}" would (Volcano's onSessionClose sends {}). A body of
// bigBody bytes or more waits until no other is being read, decoded and answered: before it
// is read when its Content-Length says so, else once read. The caller calls release once
// it has answered (it is never nil). A caller that goes away while it waits gets an error.
func (vb *Verbs) decode(w http.ResponseWriter, r *http.Request, maxBytes int64, v any) (release func(), err error) {
	release = func() {}
	if r.Body == nil {
		return release, nil
	}
	held := false
	hold := func() error {
		select {
		case vb.big <- struct{}{}:
			release, held = func() { <-vb.big }, true
			return nil
		case <-r.Context().Done():
			return wire.Unavailable("the request was cancelled while it waited for another large Volcano body to be answered")
		}
	}
	if r.ContentLength >= bigBody {
		if err := hold(); err != nil {
			return release, err
		}
	}
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= maxBytes {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom reads until it sees EOF
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBytes)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return release, wire.TooLarge(tooBig.Limit)
		}
		return release, wire.BadRequest("request body could not be read: %v", err)
	}
	body := buf.Bytes()
	if len(bytes.TrimLeft(body, " \t\r\n")) == 0 {
		return release, nil
	}
	if len(body) >= bigBody && !held {
		if err := hold(); err != nil {
			return release, err
		}
	}
	return release, wire.DecodeFrom(bytes.NewReader(body), v)
}

// --- the session snapshot ----------------------------------------------------------------

// volcanoSession is one onSessionOpen snapshot. It is never changed after it is stored, so
// concurrent calls (predicates arrive 16 at a time) read it without locks; the enqueue plan
// is computed once, on the first jobEnqueueable of the session.
type volcanoSession struct {
	jobs   map[string]*JobInfo  // by JobID
	nodes  map[string]*NodeHead // by name
	queues int

	opened time.Time // when onSessionOpen kept it, on Verbs.clock

	planOnce sync.Once
	plan     *enqueuePlan

	// The session's placement plans, one per job, made on the job's first prioritize over
	// the session's nodes as they were when it opened (see placementPlan).
	placeMu sync.Mutex
	places  map[string]map[string]string // JobID -> pod UID -> node
	free    []priority.Node
	topo    *priority.NodeIndex
}

// placementPlan is where the topology-aware placement puts job's pending tasks on the
// session's nodes (their Idle, in Volcano's terms; pod UID -> node), worked out once per
// job and session so that every task of the job is scored against the same plan; nil when
// the job does not fit them. job is called only the first time.
func (s *volcanoSession) placementPlan(jobID string, topology []string, job func() priority.Job) map[string]string {
	s.placeMu.Lock()
	defer s.placeMu.Unlock()
	if plan, ok := s.places[jobID]; ok {
		return plan
	}
	if s.places == nil {
		names := make([]string, 0, len(s.nodes))
		for name, n := range s.nodes {
			if usableNode(n) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		s.free = make([]priority.Node, len(names))
		for i, name := range names {
			s.free[i] = volcanoNode(s.nodes[name])
		}
		s.topo = priority.NewNodeIndex(s.free, topology, nil)
		s.places = map[string]map[string]string{}
	}
	plan, _ := priority.PlanJob(s.free, s.topo, job())
	s.places[jobID] = plan
	return plan
}

// newVolcanoSession indexes a decoded onSessionOpen body: jobs by UID (the map key when the
// UID is missing), nodes by name (likewise); nil entries are dropped.
func newVolcanoSession(req *volcanoSessionRequest) *volcanoSession {
	s := &volcanoSession{
		jobs:   make(map[string]*JobInfo, len(req.Jobs)),
		nodes:  make(map[string]*NodeHead, len(req.Nodes)),
		queues: len(req.Queues),
	}
	for k, j := range req.Jobs {
		if j == nil {
			continue
		}
		if j.UID == "" {
			j.UID = k
		}
		s.jobs[j.UID] = j
	}
	for k, n := range req.Nodes {
		if n == nil {
			continue
		}
		if n.Name == "" {
			n.Name = k
		}
		s.nodes[n.Name] = n
	}
	return s
}

// session returns the latest session snapshot, or nil when there is none (none opened yet,
// expired, closed, or the last onSessionOpen could not be read).
func (v *Verbs) session() *volcanoSession {
	if x, ok := v.sessions.Get(volcanoSessionKey); ok {
		if s, ok := x.(*volcanoSession); ok && v.clock.Since(s.opened) < v.ttl {
			return s
		}
	}
	return nil
}

// onSessionOpen keeps the session snapshot and always answers 200 {}: if it failed, Volcano
// would register none of the extender's functions for the session and schedule as if the
// extender did not exist. A body that cannot be read (malformed, over the limit) drops the
// previous snapshot, so the session's calls answer from their own payloads, and is logged.
func (v *Verbs) onSessionOpen(w http.ResponseWriter, r *http.Request, c wire.Call) wire.Note {
	var req volcanoSessionRequest
	var decision string
	release, err := v.decode(w, r, c.MaxBytes, &req)
	defer release()
	if err != nil {
		v.sessions.Delete(volcanoSessionKey)
		v.log.Warn("Volcano session snapshot not kept; calls answer from their own payloads until the next session", zap.Error(err))
		decision = "session not kept: " + err.Error()
	} else {
		s := newVolcanoSession(&req)
		s.opened = v.clock.Now()
		v.sessions.SetDefault(volcanoSessionKey, s)
		decision = fmt.Sprintf("session kept: %d jobs, %d nodes, %d queues", len(s.jobs), len(s.nodes), s.queues)
	}
	wire.WriteJSON(w, http.StatusOK, volcanoEmpty{})
	return wire.Note{Decision: decision}
}

// decideSessionClose drops the session snapshot: the session is over.
func (v *Verbs) decideSessionClose(*volcanoEmpty) volcanoAnswer {
	v.sessions.Delete(volcanoSessionKey)
	return volcanoAnswer{body: volcanoEmpty{}, decision: "session closed"}
}

// --- predicate and prioritize ------------------------------------------------------------

// volcanoTaskKey names a task "namespace/name" for the access log.
func volcanoTaskKey(t *TaskInfo) string {
	if t == nil {
		return ""
	}
	name := t.Name
	if name == "" && t.Pod != nil {
		name = t.Pod.Name
	}
	if t.Namespace == "" {
		return name
	}
	return t.Namespace + "/" + name
}

// askingPod is the task Volcano asks about, as a member of its job; a task in a status the
// model does not place (which Volcano does not ask about) still keeps its identity and role.
func (v *Verbs) askingPod(t *TaskInfo) priority.Pod {
	if p, ok := volcanoPod(v.gang, t, ""); ok {
		return p
	}
	return priority.Pod{UID: t.UID, Name: t.Name, Role: volcanoRole(v.gang, t), Index: -1}
}

// affinityJob is the job of task with its members where they stand: the session snapshot's
// tasks of the job, overlaid with the job's tasks that the request's nodes list (fresher:
// they include tasks allocated earlier in this session). Without the job in the snapshot the
// job is the task alone plus what the nodes list.
func (v *Verbs) affinityJob(s *volcanoSession, task *TaskInfo, nodes []*NodeInfo) priority.Job {
	members := map[string]*priority.Pod{}
	put := func(t *TaskInfo, onNode string) {
		key := gang.FirstNonEmpty(t.UID, volcanoTaskKey(t))
		if p, ok := volcanoPod(v.gang, t, onNode); ok {
			members[key] = &p
		} else {
			members[key] = nil // releasing or finished: no longer a member where it stands
		}
	}
	var job priority.Job
	if j := s.job(task.Job); j != nil {
		tasks := sortedTasks(j.Tasks)
		job = volcanoJobHeader(v.gang, j, tasks)
		for _, t := range tasks {
			put(t, "")
		}
	} else {
		job = volcanoTaskJob(v.gang, task)
		put(task, "")
	}
	for _, n := range nodes {
		for _, t := range sortedTasks(n.Tasks) {
			if task.Job != "" && t.Job == task.Job {
				put(t, n.Name)
			}
		}
	}
	keys := make([]string, 0, len(members))
	for k, p := range members {
		if p != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	job.Pods = make([]priority.Pod, len(keys))
	for i, k := range keys {
		job.Pods[i] = *members[k]
	}
	return job
}

// job returns the snapshot's job by JobID; nil without a snapshot or such a job.
func (s *volcanoSession) job(uid string) *JobInfo {
	if s == nil || uid == "" {
		return nil
	}
	return s.jobs[uid]
}

// decidePredicate enforces hard PS anti-affinity (affinity.psAntiAffinity: hard): a PS task
// fails on a node that already hosts another placed PS of its job, as the snapshot or the
// node's own task list shows, with code 3 (UnschedulableAndUnresolvable) and the reason.
// Everything else passes: {"status":"","code":0}.
func (v *Verbs) decidePredicate(req *volcanoPredicateRequest) volcanoAnswer {
	pass := volcanoAnswer{body: PredicateResult{Code: PredicateSuccess}, subject: volcanoTaskKey(req.Task)}
	if req.Task == nil || req.Node == nil {
		pass.decision = "pass: no task or node in the request"
		return pass
	}
	node := volcanoNode(&req.Node.NodeHead).Name
	pass.decision = "pass " + node
	aff := v.tuned().affinity
	if aff.PSAntiAffinity != priority.AntiAffinityHard {
		return pass
	}
	pod := v.askingPod(req.Task)
	if pod.Role != priority.RolePS {
		return pass
	}
	req.Node.Name = node
	job := v.affinityJob(v.session(), req.Task, []*NodeInfo{req.Node})
	if conflict, why := aff.PSConflict(pod, &job, node); conflict {
		return volcanoAnswer{
			body:    PredicateResult{Status: why, Code: PredicateUnschedulableAndUnresolvable},
			subject: pass.subject, decision: "fail: " + why,
		}
	}
	return pass
}

// decidePrioritize scores every node of the request by PS-worker affinity
// (priority.Affinity.Score, 0..10) times 10, onto Volcano's 0..100 node-score range. Free
// capacity is each node's Idle, topology labels are its Node's. For a job in the session
// snapshot the scores follow its placement plan on the session's nodes (the topology-aware
// placement kube-scheduler's path admits by): the node planned for the task scores 100. nodeScore is never null: with
// no nodes it is {}, and a request without a task scores every node 0.
func (v *Verbs) decidePrioritize(req *volcanoPrioritizeRequest) volcanoAnswer {
	res := PrioritizeResult{NodeScore: make(map[string]float64, len(req.Nodes))}
	nodes := make([]*NodeInfo, 0, len(req.Nodes))
	candidates := make([]priority.Node, 0, len(req.Nodes))
	labels := make(map[string]map[string]string, len(req.Nodes))
	for _, n := range req.Nodes {
		if n == nil {
			continue
		}
		c := volcanoNode(&n.NodeHead)
		if c.Name == "" {
			continue
		}
		n.Name = c.Name
		nodes = append(nodes, n)
		candidates = append(candidates, c)
		labels[c.Name] = c.Labels
		res.NodeScore[c.Name] = 0
	}
	a := volcanoAnswer{body: res, subject: volcanoTaskKey(req.Task)}
	if req.Task == nil {
		a.decision = fmt.Sprintf("scored %d nodes 0: no task in the request", len(candidates))
		return a
	}
	s := v.session()
	labelsOf := func(name string) map[string]string {
		if l, ok := labels[name]; ok {
			return l
		}
		if s != nil {
			if n := s.nodes[name]; n != nil && n.Node != nil {
				return n.Node.Labels
			}
		}
		return nil
	}
	job := v.affinityJob(s, req.Task, nodes)
	aff := v.tuned().affinity
	var plan map[string]string
	if s.job(req.Task.Job) != nil {
		plan = s.placementPlan(req.Task.Job, aff.Topology, func() priority.Job { return v.affinityJob(s, req.Task, nil) })
	}
	scores := aff.NewScorer(v.askingPod(req.Task), &job, plan, labelsOf).Scores(candidates)
	best := -1
	for i, sc := range scores {
		res.NodeScore[sc.Node] = float64(sc.Score * volcanoScoreScale)
		if best < 0 || sc.Score > scores[best].Score {
			best = i
		}
	}
	a.decision = fmt.Sprintf("scored %d nodes", len(scores))
	if best >= 0 {
		a.decision += "; best " + scores[best].String()
	}
	return a
}

// --- preemptable and reclaimable ---------------------------------------------------------

// volcanoEvictee is one evictee: the raw object Volcano sent, echoed back as a victim, and
// its decoded fields.
type volcanoEvictee struct {
	raw  json.RawMessage
	task *TaskInfo
}

// UnmarshalJSON decodes an evict request, keeping each evictee's raw JSON next to its decoded
// fields. "evictees": null and null elements are dropped.
func (r *volcanoEvictRequest) UnmarshalJSON(b []byte) error {
	var onWire struct {
		Evictor  *TaskInfo         `json:"evictor"`
		Evictees []json.RawMessage `json:"evictees"`
	}
	if err := json.Unmarshal(b, &onWire); err != nil {
		return err
	}
	r.Evictor, r.evictees = onWire.Evictor, nil
	for i, raw := range onWire.Evictees {
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		t := &TaskInfo{}
		if err := json.Unmarshal(raw, t); err != nil {
			return fmt.Errorf("evictees[%d]: %w", i, err)
		}
		r.evictees = append(r.evictees, volcanoEvictee{raw: raw, task: t})
	}
	return nil
}

// evictJob is the job of a task in an evict request, as the model sees a running job.
func (v *Verbs) evictJob(s *volcanoSession, t *TaskInfo, seen map[string]*priority.Job) *priority.Job {
	if job, ok := seen[t.Job]; ok && t.Job != "" {
		return job
	}
	var job priority.Job
	tasks := []*TaskInfo{t}
	if j := s.job(t.Job); j != nil {
		tasks = sortedTasks(j.Tasks)
		job = volcanoJobHeader(v.gang, j, tasks)
	} else {
		job = volcanoTaskJob(v.gang, t)
	}
	for _, task := range tasks {
		if task.NodeName != "" && task.Pod != nil {
			if at := gang.ScheduledAtIn(task.Pod.Status.Conditions); at.After(job.RunningSince) {
				job.RunningSince = at
			}
		}
	}
	if t.Job != "" {
		seen[t.Job] = &job
	}
	return &job
}

// decideEvict answers preemptable and reclaimable by the rule the queue's preemption
// follows (model.preemption, preemptionMargin, minRunTime: priority.Model.MayPreemptAlone
// and VictimBar). An evictor's job that may not preempt gets -1 (reject) with no victims.
// Otherwise the vote is 1 (permit) with the evictees that may go, echoed whole: those of
// the evictor's own job (Volcano's task order is its own business) and those of jobs whose
// P when they started to run is at least the margin below the evictor's and that have run
// the minimum run time; never a task in no job or in an exempt namespace. None that may go
// is -1. Null evictees, or none, abstain with no victims; a request without an evictor
// abstains and echoes every evictee.
func (v *Verbs) decideEvict(req *volcanoEvictRequest) volcanoAnswer {
	res := EvictResult{Status: Abstain, Victims: make([]json.RawMessage, 0, len(req.evictees))}
	a := volcanoAnswer{subject: volcanoTaskKey(req.Evictor), body: &res}
	if req.Evictor == nil || len(req.evictees) == 0 {
		for _, e := range req.evictees {
			res.Victims = append(res.Victims, e.raw)
		}
		a.decision = "abstain: " + strconv.Itoa(len(res.Victims)) + " victims echoed"
		return a
	}
	s, now, model := v.session(), v.clock.Now(), v.tuned().model
	seen := map[string]*priority.Job{}
	evictor := v.evictJob(s, req.Evictor, seen)
	p := model.Combined(model.Terms(evictor, now))
	if !model.MayPreemptAlone(evictor, now) {
		res.Status = Reject
		a.decision = fmt.Sprintf("reject: job %s (P=%.2f) may not preempt under model.preemption %s", evictor.Key, p, model.Preemption)
		return a
	}
	var kept []string
	for _, e := range req.evictees {
		job := v.evictJob(s, e.task, seen)
		why := ""
		switch { // no job first: such a task's key, namespace/task, could equal the evictor's
		case e.task.Job == "":
			why = "it is in no job"
		case v.gang.Exempt(e.task.Namespace):
			why = "its namespace is exempt"
		case job.Key == evictor.Key:
		default:
			why = model.VictimBar(job, p, evictor.Urgent, now)
		}
		if why != "" {
			kept = append(kept, fmt.Sprintf("%s of job %s (P=%.2f): %s", volcanoTaskKey(e.task), job.Key, model.RunningP(job, now), why))
			continue
		}
		res.Victims = append(res.Victims, e.raw)
	}
	res.Status = Permit
	if len(res.Victims) == 0 {
		res.Status = Reject
	}
	a.decision = fmt.Sprintf("%d of %d evictees may go for job %s (P=%.2f)", len(res.Victims), len(req.evictees), evictor.Key, p)
	if len(kept) > 0 {
		a.decision += "; kept " + strings.Join(kept, "; ")
	}
	return a
}

// --- jobEnqueueable, jobReady, queueOverused ---------------------------------------------

// volcanoPending reports whether a job waits to be enqueued: its PodGroup is Pending (or it
// has no PodGroup phase yet).
func volcanoPending(j *JobInfo) bool {
	return j.PodGroup == nil || j.PodGroup.Status.Phase == "" || j.PodGroup.Status.Phase == PodGroupPending
}

// volcanoInqueue reports whether a job has been enqueued but may not have all it needs yet.
func volcanoInqueue(j *JobInfo) bool {
	return j.PodGroup != nil && j.PodGroup.Status.Phase == PodGroupInqueue
}

// enqueuePlanFor builds the enqueue plan of a session (nil: none) at now. With asked set, the
// asked job is one of the pending jobs whatever the snapshot says of it, with its payload.
func (v *Verbs) enqueuePlanFor(s *volcanoSession, asked *JobInfo, now time.Time) *enqueuePlan {
	var pending []enqueueCandidate
	reserved := priority.Resources{}
	var nodes []*NodeHead
	candidate := func(j *JobInfo) enqueueCandidate {
		tasks := sortedTasks(j.Tasks)
		return enqueueCandidate{uid: j.UID, job: volcanoJobHeader(v.gang, j, tasks), demand: volcanoDemand(v.gang, j, tasks)}
	}
	if s != nil {
		uids := make([]string, 0, len(s.jobs))
		for uid := range s.jobs {
			uids = append(uids, uid)
		}
		slices.Sort(uids)
		for _, uid := range uids {
			j := s.jobs[uid]
			switch {
			case asked != nil && uid == asked.UID:
			case volcanoPending(j):
				pending = append(pending, candidate(j))
			case volcanoInqueue(j):
				addResources(reserved, volcanoReserved(v.gang, j, sortedTasks(j.Tasks)))
			}
		}
		names := make([]string, 0, len(s.nodes))
		for name := range s.nodes {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			nodes = append(nodes, s.nodes[name])
		}
	}
	if asked != nil {
		pending = append(pending, candidate(asked))
	}
	return newEnqueuePlan(v.tuned().model, now, pending, reserved, nodes)
}

// decideEnqueue admits jobs to Inqueue in combined-priority order (see newEnqueuePlan and
// enqueuePlan.decide): permit (1) when the session's free resources cover the job and every
// still-pending job ahead of it, else reject (-1). The session's plan is computed once, on
// its first call; a job the snapshot does not hold as pending (or a call without a
// snapshot) gets a plan of its own with the job's payload. A request without a job abstains.
func (v *Verbs) decideEnqueue(req *volcanoJobRequest) volcanoAnswer {
	j := req.Job
	if j == nil {
		return volcanoAnswer{body: EnqueueResult{Status: Abstain}, decision: "abstain: no job in the request"}
	}
	if j.UID == "" {
		j.UID = volcanoJobKey(j)
	}
	s := v.session()
	var plan *enqueuePlan
	if sj := s.job(j.UID); sj != nil && volcanoPending(sj) {
		s.planOnce.Do(func() { s.plan = v.enqueuePlanFor(s, nil, v.clock.Now()) })
		plan = s.plan
	} else {
		plan = v.enqueuePlanFor(s, j, v.clock.Now())
	}
	a := volcanoAnswer{subject: volcanoJobKey(j)}
	pj := plan.byUID[j.UID]
	if pj == nil { // not reachable: every candidate is in the queue order
		a.body, a.decision = EnqueueResult{Status: Abstain}, "abstain: job not in the enqueue plan"
		return a
	}
	status, reason := plan.decide(pj)
	if s == nil {
		reason = "no session snapshot; " + reason
	}
	a.body, a.decision = EnqueueResult{Status: status}, volcanoVote(status)+": "+reason
	return a
}

// volcanoVote names a vote for the access log.
func volcanoVote(status int) string {
	switch {
	case status > 0:
		return "permit"
	case status < 0:
		return "reject"
	}
	return "abstain"
}

// decideJobReady answers whether the job has its minimum placed (volcanoJobReady). A request
// without a job is ready: the extender never holds a job it was not shown.
func (v *Verbs) decideJobReady(req *volcanoJobRequest) volcanoAnswer {
	ready, placed := volcanoJobReady(req.Job)
	a := volcanoAnswer{body: JobReadyResult{Status: ready}}
	if req.Job == nil {
		a.decision = "ready: no job in the request"
		return a
	}
	a.subject = volcanoJobKey(req.Job)
	verdict := "not ready"
	if ready {
		verdict = "ready"
	}
	a.decision = fmt.Sprintf("%s: %d of minimum %d placed", verdict, placed, req.Job.MinAvailable)
	return a
}

// decideQueueOverused abstains: queues are Volcano's own business, so no queue is overused.
func (v *Verbs) decideQueueOverused(req *volcanoQueueRequest) volcanoAnswer {
	a := volcanoAnswer{body: QueueOverusedResult{Overused: false}, decision: "not overused"}
	if req.Queue != nil {
		a.subject = gang.FirstNonEmpty(req.Queue.Name, req.Queue.UID)
	}
	return a
}
