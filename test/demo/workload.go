package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/priority"
)

// The pod labels that put a plain pod into a job (the extender's defaults, gang.*Label).
const (
	labelJob       = "cps-extender.io/job"
	labelRole      = "cps-extender.io/role"
	labelIndex     = "cps-extender.io/index"
	labelMinMember = "cps-extender.io/min-member"
	// labelUser names a namespace's user (the extender's gang.userLabel); the demo puts it on
	// each user's namespace, never on a pod.
	labelUser = "cps-extender.io/user"

	// schedulerName is the profile of scheduler-config/kube-scheduler.yaml.
	schedulerName = "cps-scheduler"

	defaultPodMemory = "1Gi"
)

// workload is the sample workload file, test/demo/workload.yaml.
type workload struct {
	// NamespacePrefix names each user's namespace, NamespacePrefix + user, which holds the
	// user's jobs. The demo creates it labelled labelUser: user, as a cluster's admins set a
	// tenant up; the extender takes a job's user from there, not from the pods.
	NamespacePrefix string `json:"namespacePrefix"`
	// Users maps each user to a tier of the model's defaults (gold, silver, bronze); it
	// becomes the extender's model.userTiers.
	Users map[string]string `json:"users"`
	// PriorityClasses are created before the pods: name -> value.
	PriorityClasses map[string]int32 `json:"priorityClasses"`
	// UrgentPriorityClasses make the jobs that use them urgent: the extender's
	// gang.urgentPriorityClasses, as an admin grants urgency.
	UrgentPriorityClasses []string `json:"urgentPriorityClasses"`
	// Jobs are submitted together.
	Jobs []jobSpec `json:"jobs"`
}

// jobSpec is one PS/worker job: ps parameter servers and workers workers, every pod
// requesting cpu (and memory).
type jobSpec struct {
	Name string `json:"name"`
	User string `json:"user"`
	// Namespace is the user's namespace, set by loadWorkload (workload.place).
	Namespace     string `json:"-"`
	PriorityClass string `json:"priorityClass"`
	PS            int    `json:"ps"`
	Workers       int    `json:"workers"`
	CPU           string `json:"cpu"`
	Memory        string `json:"memory,omitempty"`
}

// loadWorkload reads and checks a workload file.
func loadWorkload(path string) (workload, error) {
	var w workload
	data, err := os.ReadFile(path)
	if err != nil {
		return w, err
	}
	if err := yaml.UnmarshalStrict(data, &w); err != nil {
		return w, fmt.Errorf("%s: %w", path, err)
	}
	if err := w.validate(); err != nil {
		return w, fmt.Errorf("%s: %w", path, err)
	}
	w.place()
	return w, nil
}

// namespaceOf is the namespace of a user's jobs.
func (w workload) namespaceOf(user string) string { return w.NamespacePrefix + user }

// namespaces lists the users' namespaces, in user order.
func (w workload) namespaces() []string {
	out := make([]string, 0, len(w.Users))
	for _, u := range sortedKeys(w.Users) {
		out = append(out, w.namespaceOf(u))
	}
	return out
}

// place puts every job in its user's namespace.
func (w workload) place() {
	for i := range w.Jobs {
		w.Jobs[i].Namespace = w.namespaceOf(w.Jobs[i].User)
	}
}

// validate reports every problem of the workload at once.
func (w workload) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	tiers := priority.DefaultModel().Tiers
	for _, user := range sortedKeys(w.Users) {
		if _, ok := tiers[w.Users[user]]; !ok {
			bad("users.%s: tier %q is not one of the model's default tiers", user, w.Users[user])
		}
		if msgs := validation.IsValidLabelValue(user); len(msgs) > 0 {
			bad("users.%s: not a label value (it labels the user's namespace): %v", user, msgs)
		}
		if msgs := validation.IsDNS1123Label(w.namespaceOf(user)); len(msgs) > 0 {
			bad("users.%s: namespace %q (namespacePrefix + user): %v", user, w.namespaceOf(user), msgs)
		}
	}
	if len(w.Jobs) == 0 {
		bad("no jobs")
	}
	seen := map[string]bool{}
	for _, name := range w.UrgentPriorityClasses {
		if _, ok := w.PriorityClasses[name]; !ok {
			bad("urgentPriorityClasses: %q is not in priorityClasses", name)
		}
	}
	for i, j := range w.Jobs {
		where := fmt.Sprintf("jobs[%d] (%s)", i, j.Name)
		if msgs := validation.IsDNS1123Label(j.Name); len(msgs) > 0 {
			bad("%s: name: %v", where, msgs)
		}
		if seen[j.Name] {
			bad("%s: name used twice", where)
		}
		seen[j.Name] = true
		if _, ok := w.Users[j.User]; !ok {
			bad("%s: user %q is not in users", where, j.User)
		}
		if _, ok := w.PriorityClasses[j.PriorityClass]; !ok && j.PriorityClass != "" {
			bad("%s: priorityClass %q is not in priorityClasses", where, j.PriorityClass)
		}
		if j.PS < 0 || j.Workers < 1 {
			bad("%s: want ps >= 0 and workers >= 1, got %d and %d", where, j.PS, j.Workers)
		}
		if _, err := resource.ParseQuantity(j.CPU); err != nil || j.CPU == "" {
			bad("%s: cpu %q is not a quantity", where, j.CPU)
		} else if milliCores(j.CPU) > milliCores(nodeCPU) {
			bad("%s: cpu %s per pod is more than a node has (%s)", where, j.CPU, nodeCPU)
		}
		if _, err := resource.ParseQuantity(j.memory()); err != nil {
			bad("%s: memory %q is not a quantity", where, j.Memory)
		}
	}
	return errors.Join(errs...)
}

// Size is the number of pods of the job, which is also its gang minimum.
func (j jobSpec) Size() int { return j.PS + j.Workers }

// Key is the job's key in the extender's queue: namespace/name.
func (j jobSpec) Key() string { return j.Namespace + "/" + j.Name }

// TotalCPU is what the whole job requests, in millicores.
func (j jobSpec) TotalCPU() int64 {
	return milliCores(j.CPU) * int64(j.Size())
}

// milliCores parses a cpu quantity that validate has checked, in millicores.
func milliCores(q string) int64 {
	v := resource.MustParse(q)
	return v.MilliValue()
}

// memory is the memory request of each pod of the job.
func (j jobSpec) memory() string {
	if j.Memory == "" {
		return defaultPodMemory
	}
	return j.Memory
}

// podName is the name of the pod of the given role and replica index.
func (j jobSpec) podName(role string, index int) string {
	return fmt.Sprintf("%s-%s-%d", j.Name, role, index)
}

// podKey is the namespace/name of the pod of the given role and replica index.
func (j jobSpec) podKey(role string, index int) string {
	return j.Namespace + "/" + j.podName(role, index)
}

// PodKeys lists the job's pods as namespace/name, PS first.
func (j jobSpec) PodKeys() []string {
	keys := make([]string, 0, j.Size())
	for i := 0; i < j.PS; i++ {
		keys = append(keys, j.podKey("ps", i))
	}
	for i := 0; i < j.Workers; i++ {
		keys = append(keys, j.podKey("worker", i))
	}
	return keys
}

// Pods builds the job's pods, PS first, in its user's namespace, labelled with the
// project's job labels (not the user's: the namespace names it) and handed to the
// cps-scheduler profile.
func (j jobSpec) Pods() []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, j.Size())
	for i := 0; i < j.PS; i++ {
		pods = append(pods, j.pod("ps", i))
	}
	for i := 0; i < j.Workers; i++ {
		pods = append(pods, j.pod("worker", i))
	}
	return pods
}

// pod builds one pod of the job.
func (j jobSpec) pod(role string, index int) *corev1.Pod {
	labels := map[string]string{
		labelJob:       j.Name,
		labelRole:      role,
		labelIndex:     strconv.Itoa(index),
		labelMinMember: strconv.Itoa(j.Size()),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: j.podName(role, index), Namespace: j.Namespace, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName:     schedulerName,
			PriorityClassName: j.PriorityClass,
			Containers: []corev1.Container{{
				Name:  role,
				Image: "registry.example/ml/trainer:demo", // kwok runs no containers
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse(j.CPU),
					corev1.ResourceMemory: resource.MustParse(j.memory()),
				}},
			}},
		},
	}
}

// interleavedPods lists the pods of every job round-robin, aligned at the end: the last
// round holds the last pod of every job, so that all gangs become complete together, within
// a few milliseconds, and the workload arrives as one batch. (Aligned at the start, a small
// job would be complete, and could be admitted, long before a big job of higher priority.)
func interleavedPods(jobs []jobSpec) []*corev1.Pod {
	var lists [][]*corev1.Pod
	longest := 0
	for _, j := range jobs {
		pods := j.Pods()
		lists = append(lists, pods)
		longest = max(longest, len(pods))
	}
	var out []*corev1.Pod
	for round := 0; round < longest; round++ {
		for _, pods := range lists {
			if i := round - (longest - len(pods)); i >= 0 {
				out = append(out, pods[i])
			}
		}
	}
	return out
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
