package priority

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// String returns the role's short name: "ps", "chief", "worker", "other" or "evaluator".
func (r Role) String() string {
	switch r {
	case RolePS:
		return "ps"
	case RoleChief:
		return "chief"
	case RoleWorker:
		return "worker"
	case RoleOther:
		return "other"
	case RoleEvaluator:
		return "evaluator"
	default:
		return "role(" + strconv.Itoa(int(r)) + ")"
	}
}

// intraJobRank is a role's place in the intra-job order. RoleOther and out-of-range values
// rank with workers: an unknown role must neither jump ahead of the PS nor starve.
func intraJobRank(r Role) int {
	switch r {
	case RolePS:
		return 0
	case RoleChief:
		return 1
	case RoleEvaluator:
		return 3
	default:
		return 2
	}
}

// comparePods is the intra-job order: role rank, then replica index with unknown (negative)
// indexes last, then name, then UID, so that any two distinct pods have a fixed order.
func comparePods(a, b *Pod) int {
	if c := cmp.Compare(intraJobRank(a.Role), intraJobRank(b.Role)); c != 0 {
		return c
	}
	if (a.Index < 0) != (b.Index < 0) {
		if a.Index < 0 {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(a.Index, b.Index); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.UID, b.UID)
}

// SortPods puts a job's pods in intra-job order, in place: parameter servers, then the
// chief, then workers (and pods of unknown role), then evaluators; within a role by
// replica index, unknown index (-1) last; then by name and UID. PS pods go first because
// workers are useless without them and prefer to land next to them.
func SortPods(pods []Pod) {
	slices.SortFunc(pods, func(a, b Pod) int { return comparePods(&a, &b) })
}

// MinMembers is the gang minimum: MinMember, or every pod of the job when MinMember <= 0.
// It is kept even when fewer pods exist, so an incomplete gang is seen as incomplete.
func (j *Job) MinMembers() int {
	if j == nil {
		return 0
	}
	if j.MinMember > 0 {
		return j.MinMember
	}
	return len(j.Pods)
}

// GangSize is the size the job will have once complete: max(MinMember, number of pods).
// It is the n of the parallelism term.
func (j *Job) GangSize() int {
	if j == nil {
		return 0
	}
	return max(j.MinMember, len(j.Pods))
}
