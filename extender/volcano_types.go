package extender

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Volcano's scheduler serialises its own API objects (api.TaskInfo, api.JobInfo, ...) with
// encoding/json and no json tags, so their keys are Go field names; encoding/json matches them
// case-insensitively. The structs below are the project's own: they hold only the fields the
// extender reads, and every other key of Volcano's JSON is ignored, so the shapes of Volcano
// v1.12 to v1.15 all decode (TaskRole present or absent, WaitingTime null, Tasks {}).

// Volcano task status bit flags (Volcano's api.TaskStatus).
const (
	VolcanoTaskPending   = 1 << 0
	VolcanoTaskAllocated = 1 << 1
	VolcanoTaskPipelined = 1 << 2
	VolcanoTaskBinding   = 1 << 3
	VolcanoTaskBound     = 1 << 4
	VolcanoTaskRunning   = 1 << 5
	VolcanoTaskReleasing = 1 << 6
	VolcanoTaskSucceeded = 1 << 7
	VolcanoTaskFailed    = 1 << 8
	VolcanoTaskUnknown   = 1 << 9
)

// volcanoTaskPlaced are the statuses of a task that holds (or is about to hold) its node:
// jobReady counts them, and the affinity verbs treat such a task with a node as placed there.
const volcanoTaskPlaced = VolcanoTaskAllocated | VolcanoTaskPipelined | VolcanoTaskBinding | VolcanoTaskBound | VolcanoTaskRunning

// VolcanoNodeNotReady is the NodeInfo.State.Phase of a node Volcano does not schedule to.
const VolcanoNodeNotReady = 2

// The PodGroup phases the extender distinguishes (PodGroup status.phase).
const (
	VolcanoPodGroupPending = "Pending"
	VolcanoPodGroupInqueue = "Inqueue"
)

// VolcanoResource is Volcano's api.Resource: cpu in millicores, memory in bytes, and scalar
// resources (GPUs, hugepages, ...) in milli-units, as Volcano stores them.
type VolcanoResource struct {
	MilliCPU        float64
	Memory          float64
	ScalarResources map[string]float64
}

// VolcanoTaskInfo is Volcano's api.TaskInfo: one pod of a job.
type VolcanoTaskInfo struct {
	UID string
	// Job is the task's JobID, "namespace/podgroup-name".
	Job       string
	Name      string
	Namespace string
	// TaskRole is the value of volcano.sh/task-spec (Volcano v1.12 and later; absent before).
	TaskRole string
	Resreq   *VolcanoResource
	NodeName string
	// Status is a bit flag: VolcanoTaskPending, VolcanoTaskAllocated, ...
	Status   int
	Priority int32
	Pod      *corev1.Pod
}

// VolcanoPodGroup is the part of a PodGroup (scheduling.volcano.sh) that JobInfo carries and
// the extender reads.
type VolcanoPodGroup struct {
	Metadata metav1.ObjectMeta     `json:"metadata"`
	Spec     VolcanoPodGroupSpec   `json:"spec"`
	Status   VolcanoPodGroupStatus `json:"status"`
}

// VolcanoPodGroupSpec is a PodGroup's spec: the gang minimum and what it needs in total.
type VolcanoPodGroupSpec struct {
	MinMember     int32               `json:"minMember"`
	MinTaskMember map[string]int32    `json:"minTaskMember"`
	Queue         string              `json:"queue"`
	MinResources  corev1.ResourceList `json:"minResources"`
}

// VolcanoPodGroupStatus is a PodGroup's status: Pending, Inqueue, Running, ...
type VolcanoPodGroupStatus struct {
	Phase string `json:"phase"`
}

// VolcanoJobInfo is Volcano's api.JobInfo: one PodGroup and its tasks.
type VolcanoJobInfo struct {
	// UID is the JobID, "namespace/podgroup-name".
	UID       string
	Name      string
	Namespace string
	Queue     string
	// Priority is the PodGroup's PriorityClass value.
	Priority     int32
	MinAvailable int32
	// TaskMinAvailable is the minimum per task (role) name, e.g. {"ps": 1, "worker": 2}.
	TaskMinAvailable map[string]int32
	// Tasks maps a pod UID to its task; {} while a Volcano Job's pods are not created yet.
	Tasks map[string]*VolcanoTaskInfo
	// Allocated is the sum of the requests of the job's allocated tasks.
	Allocated         *VolcanoResource
	CreationTimestamp metav1.Time
	PodGroup          *VolcanoPodGroup
}

// VolcanoNodeState is Volcano's api.NodeState.
type VolcanoNodeState struct {
	Phase  int
	Reason string
}

// VolcanoNodeHead is the part of Volcano's api.NodeInfo that the session snapshot keeps.
type VolcanoNodeHead struct {
	Name  string
	Node  *corev1.Node
	State VolcanoNodeState
	// Idle is allocatable minus what the node's allocated tasks request.
	Idle        *VolcanoResource
	Allocatable *VolcanoResource
}

// VolcanoNodeInfo is Volcano's api.NodeInfo as predicate and prioritize receive it: with the
// tasks on the node, which include those allocated earlier in the same session.
type VolcanoNodeInfo struct {
	VolcanoNodeHead
	Tasks map[string]*VolcanoTaskInfo
}

// VolcanoQueueInfo is Volcano's api.QueueInfo.
type VolcanoQueueInfo struct {
	UID    string
	Name   string
	Weight int32
}

// volcanoSessionRequest is the body of onSessionOpen. Session nodes are read without their
// tasks: the job tasks carry the same pods, and decoding them twice is the largest cost.
type volcanoSessionRequest struct {
	Jobs   map[string]*VolcanoJobInfo
	Nodes  map[string]*VolcanoNodeHead
	Queues map[string]*VolcanoQueueInfo
}

// volcanoEmpty is the body of onSessionClose and of the answers to both session verbs.
type volcanoEmpty struct{}

// volcanoPredicateRequest is the body of predicate.
type volcanoPredicateRequest struct {
	Task *VolcanoTaskInfo `json:"task"`
	Node *VolcanoNodeInfo `json:"node"`
}

// VolcanoPredicateResult answers predicate: an empty Status passes, whatever the code.
type VolcanoPredicateResult struct {
	Status string `json:"status"`
	Code   int    `json:"code"`
}

// The predicate codes (Volcano's api.StatusCode).
const (
	VolcanoPredicateSuccess                      = 0
	VolcanoPredicateUnschedulableAndUnresolvable = 3
)

// volcanoPrioritizeRequest is the body of prioritize.
type volcanoPrioritizeRequest struct {
	Task  *VolcanoTaskInfo   `json:"task"`
	Nodes []*VolcanoNodeInfo `json:"nodes"`
}

// VolcanoPrioritizeResult answers prioritize: a score in 0..100 per node name. NodeScore is
// never null (Volcano reads a null map as an error).
type VolcanoPrioritizeResult struct {
	NodeScore    map[string]float64 `json:"nodeScore"`
	ErrorMessage string             `json:"errorMessage"`
}

// volcanoEvictRequest is the body of preemptable and reclaimable, {"evictor": TaskInfo,
// "evictees": [TaskInfo]}. Its UnmarshalJSON keeps each evictee's raw JSON, so the victims
// echoed back are the very objects Volcano sent.
type volcanoEvictRequest struct {
	Evictor  *VolcanoTaskInfo
	evictees []volcanoEvictee
}

// VolcanoEvictResult answers preemptable and reclaimable: Status 1 permit, 0 abstain, -1
// reject; Victims are full TaskInfo objects, never null.
type VolcanoEvictResult struct {
	Status  int               `json:"status"`
	Victims []json.RawMessage `json:"victims"`
}

// The votes of jobEnqueueable, preemptable and reclaimable.
const (
	VolcanoPermit  = 1
	VolcanoAbstain = 0
	VolcanoReject  = -1
)

// volcanoJobRequest is the body of jobEnqueueable and jobReady.
type volcanoJobRequest struct {
	Job *VolcanoJobInfo `json:"job"`
}

// VolcanoEnqueueResult answers jobEnqueueable: VolcanoPermit, VolcanoAbstain or VolcanoReject.
type VolcanoEnqueueResult struct {
	Status int `json:"status"`
}

// VolcanoJobReadyResult answers jobReady.
type VolcanoJobReadyResult struct {
	Status bool `json:"status"`
}

// volcanoQueueRequest is the body of queueOverused.
type volcanoQueueRequest struct {
	Queue *VolcanoQueueInfo `json:"queue"`
}

// VolcanoQueueOverusedResult answers queueOverused.
type VolcanoQueueOverusedResult struct {
	Overused bool `json:"overused"`
}
