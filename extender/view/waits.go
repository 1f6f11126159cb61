package view

import (
	"strings"

	"github.com/cps-extender/cps-extender/priority"
)

// priorityClassOf names the PriorityClass of a job's first pod ("" for none, or a pod no
// longer in the cache), for the job metrics (metrics.JobWaits).
func (c *Cluster) priorityClassOf(job *priority.Job) string {
	if len(job.Pods) == 0 || c.pods == nil {
		return ""
	}
	ns, name, _ := strings.Cut(job.Pods[0].Name, "/")
	pod, err := c.pods.Pods(ns).Get(name)
	if err != nil {
		return ""
	}
	return pod.Spec.PriorityClassName
}
