package volcano

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Volcano's scheduler serialises its own API objects (api.TaskInfo, api.JobInfo, ...) with
// encoding/json and no json tags, so their keys are Go field names; encoding/json matches them
// case-insensitively. The structs below are the project's own: they hold only the fields the
// extender reads, and every other key of Volcano's JSON is ignored, so the shapes of Volcano
// v1.12 to v1.15 all decode (TaskRole present or absent, WaitingTime null, Tasks {}).

// Volcano task status bit flags (Volcano's api.TaskStatus).
const (
	TaskPending   = 1 << 0
	TaskAllocated = 1 << 1
	TaskPipelined = 1 << 2
	TaskBinding   = 1 << 3
	TaskBound     = 1 << 4
	TaskRunning   = 1 << 5
	TaskReleasing = 1 << 6
	TaskSucceeded = 1 << 7
	TaskFailed    = 1 << 8
	TaskUnknown   = 1 << 9
)

// volcanoTaskPlaced are the statuses of a task that holds (or is about to hold) its node:
// jobReady counts them, and the affinity verbs treat such a task with a node as placed there.
const volcanoTaskPlaced = TaskAllocated | TaskPipelined | TaskBinding | TaskBound | TaskRunning

// NodeNotReady is the NodeInfo.State.Phase of a node Volcano does not schedule to.
const NodeNotReady = 2

// The PodGroup phases the extender distinguishes (PodGroup status.phase).
const (
	PodGroupPending = "Pending"
	PodGroupInqueue = "Inqueue"
)

// Resource is Volcano's api.Resource: cpu in millicores, memory in bytes, and scalar
// resources (GPUs, hugepages, ...) in milli-units, as Volcano stores them.
type Resource struct {
	MilliCPU        float64
	Memory          float64
	ScalarResources map[string]float64
}

// TaskInfo is Volcano's api.TaskInfo: one pod of a job.
type TaskInfo struct {
	UID string
	// Job is the task's JobID, "namespace/podgroup-name".
	Job       string
	Name      string
	Namespace string
	// TaskRole is the value of volcano.sh/task-spec (Volcano v1.12 and later; absent before).
	TaskRole string
	Resreq   *Resource
	NodeName string
	// Status is a bit flag: TaskPending, TaskAllocated, ...
	Status   int
	Priority int32
	Pod      *PodObject
}

// PodGroup is the part of a PodGroup (scheduling.volcano.sh) that JobInfo carries and
// the extender reads.
type PodGroup struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     PodGroupSpec      `json:"spec"`
	Status   PodGroupStatus    `json:"status"`
}

// PodGroupSpec is a PodGroup's spec: the gang minimum and what it needs in total.
type PodGroupSpec struct {
	MinMember     int32               `json:"minMember"`
	MinTaskMember map[string]int32    `json:"minTaskMember"`
	Queue         string              `json:"queue"`
	MinResources  corev1.ResourceList `json:"minResources"`
	// PriorityClassName makes the job urgent when gang.urgentPriorityClasses lists it.
	PriorityClassName string `json:"priorityClassName"`
}

// PodGroupStatus is a PodGroup's status: Pending, Inqueue, Running, ...
type PodGroupStatus struct {
	Phase string `json:"phase"`
}

// JobInfo is Volcano's api.JobInfo: one PodGroup and its tasks.
type JobInfo struct {
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
	Tasks map[string]*TaskInfo
	// Allocated is the sum of the requests of the job's allocated tasks.
	Allocated         *Resource
	CreationTimestamp metav1.Time
	PodGroup          *PodGroup
}

// ObjectMeta is what the extender reads of the metadata of the pods and nodes Volcano sends
// whole (Kubernetes JSON). Their specs and statuses (containers, volumes, node images and
// conditions) are skipped, not decoded: at 5000 nodes they made most of a body's garbage.
type ObjectMeta struct {
	Name, Namespace   string
	UID               types.UID
	Labels            map[string]string
	Annotations       map[string]string
	CreationTimestamp metav1.Time
}

// PodObject is a task's pod as the extender reads it.
type PodObject struct {
	ObjectMeta `json:"metadata"`
	Spec       struct {
		Priority          *int32
		PriorityClassName string
	} `json:"spec"`
	Status struct {
		Conditions []corev1.PodCondition
	} `json:"status"`
}

// NodeObject is a node as the extender reads it.
type NodeObject struct {
	ObjectMeta `json:"metadata"`
	Spec       struct {
		Unschedulable bool
	} `json:"spec"`
}

// NodeState is Volcano's api.NodeState.
type NodeState struct {
	Phase  int
	Reason string
}

// NodeHead is the part of Volcano's api.NodeInfo that the session snapshot keeps.
type NodeHead struct {
	Name  string
	Node  *NodeObject
	State NodeState
	// Idle is allocatable minus what the node's allocated tasks request.
	Idle        *Resource
	Allocatable *Resource
}

// NodeInfo is Volcano's api.NodeInfo as predicate and prioritize receive it: with the
// tasks on the node, which include those allocated earlier in the same session.
type NodeInfo struct {
	NodeHead
	Tasks map[string]*TaskInfo
}

// QueueInfo is Volcano's api.QueueInfo.
type QueueInfo struct {
	UID    string
	Name   string
	Weight int32
}

// volcanoSessionRequest is the body of onSessionOpen. Session nodes are read without their
// tasks: the job tasks carry the same pods, and decoding them twice is the largest cost.
type volcanoSessionRequest struct {
	Jobs   map[string]*JobInfo
	Nodes  map[string]*NodeHead
	Queues map[string]*QueueInfo
}

// volcanoEmpty is the body of onSessionClose and of the answers to both session verbs.
type volcanoEmpty struct{}

// volcanoPredicateRequest is the body of predicate.
type volcanoPredicateRequest struct {
	Task *TaskInfo `json:"task"`
	Node *NodeInfo `json:"node"`
}

// PredicateResult answers predicate: an empty Status passes, whatever the code.
type PredicateResult struct {
	Status string `json:"status"`
	Code   int    `json:"code"`
}

// The predicate codes (Volcano's api.StatusCode).
const (
	PredicateSuccess                      = 0
	PredicateUnschedulableAndUnresolvable = 3
)

// volcanoPrioritizeRequest is the body of prioritize.
type volcanoPrioritizeRequest struct {
	Task  *TaskInfo   `json:"task"`
	Nodes []*NodeInfo `json:"nodes"`
}

// PrioritizeResult answers prioritize: a score in 0..100 per node name. NodeScore is
// never null (Volcano reads a null map as an error).
type PrioritizeResult struct {
	NodeScore    map[string]float64 `json:"nodeScore"`
	ErrorMessage string             `json:"errorMessage"`
}

// volcanoEvictRequest is the body of preemptable and reclaimable, {"evictor": TaskInfo,
// "evictees": [TaskInfo]}. Its UnmarshalJSON keeps each evictee's raw JSON, so the victims
// echoed back are the very objects Volcano sent.
type volcanoEvictRequest struct {
	Evictor  *TaskInfo
	evictees []volcanoEvictee
}

// EvictResult answers preemptable and reclaimable: Status 1 permit, 0 abstain, -1
// reject; Victims are full TaskInfo objects, never null.
type EvictResult struct {
	Status  int               `json:"status"`
	Victims []json.RawMessage `json:"victims"`
}

// The votes of jobEnqueueable, preemptable and reclaimable.
const (
	Permit  = 1
	Abstain = 0
	Reject  = -1
)

// volcanoJobRequest is the body of jobEnqueueable and jobReady.
type volcanoJobRequest struct {
	Job *JobInfo `json:"job"`
}

// EnqueueResult answers jobEnqueueable: Permit, Abstain or Reject.
type EnqueueResult struct {
	Status int `json:"status"`
}

// JobReadyResult answers jobReady.
type JobReadyResult struct {
	Status bool `json:"status"`
}

// volcanoQueueRequest is the body of queueOverused.
type volcanoQueueRequest struct {
	Queue *QueueInfo `json:"queue"`
}

// QueueOverusedResult answers queueOverused.
type QueueOverusedResult struct {
	Overused bool `json:"overused"`
}
