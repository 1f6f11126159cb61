// Package config is the extender's configuration: its YAML form, defaults, strict decoding that lists
// every problem, validation, and the reloader that applies model changes while running. It
// imports the priority model and the metrics only.
package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/priority"
)

// Config is the extender's whole configuration: a YAML file, overridden by flags.
// Every field has a default (DefaultConfig); Validate lists every problem at once.
type Config struct {
	// Listen is the address the HTTP server listens on.
	Listen string `json:"listen"`
	// URLPrefix is prepended to the kube-scheduler verbs: <urlPrefix>/filter, /prioritize, /bind.
	URLPrefix string `json:"urlPrefix"`
	// Kubeconfig is the path of a kubeconfig file; empty means the in-cluster config.
	Kubeconfig string `json:"kubeconfig"`
	// MaxRequestBytes bounds a request body; larger bodies get 413. A body is read as it
	// arrives, never allocated from its declared length.
	MaxRequestBytes int64 `json:"maxRequestBytes"`
	// MaxInFlight bounds the requests of one verb served at once (filter, prioritize,
	// preempt, each Volcano verb, the webhook); MaxInFlightBinds the bind requests, which the
	// gate holds while their gangs gather. A request past the bound gets 429.
	MaxInFlight      int `json:"maxInFlight"`
	MaxInFlightBinds int `json:"maxInFlightBinds"`
	// ReadTimeout and WriteTimeout bound one HTTP exchange. WriteTimeout must exceed the
	// bind hold timeout, since a held bind answers only when its gang has gathered.
	// ReadHeaderTimeout bounds the headers alone, IdleTimeout a kept-alive connection
	// between requests.
	ReadTimeout       metav1.Duration `json:"readTimeout"`
	WriteTimeout      metav1.Duration `json:"writeTimeout"`
	ReadHeaderTimeout metav1.Duration `json:"readHeaderTimeout"`
	IdleTimeout       metav1.Duration `json:"idleTimeout"`
	// Access says who may call each kind of endpoint (docs/security.md).
	Access AccessConfig `json:"access"`
	// LeaderElection elects the one replica that writes (docs/deploy.md, "Replicas").
	LeaderElection LeaderElectionConfig `json:"leaderElection"`
	// EventClientQPS and EventClientBurst rate-limit the API client of the Events, the turn
	// annotations and the gate lifts: thousands of waiting pods' Events must not delay a
	// gang's Bindings, which have ClientQPS to themselves.
	EventClientQPS   float32 `json:"eventClientQPS"`
	EventClientBurst int     `json:"eventClientBurst"`
	// SchedulerNames are the schedulers whose pods the extender binds: a bind request for
	// a pod of another scheduler is refused (empty: any).
	SchedulerNames []string `json:"schedulerNames"`
	// ShutdownTimeout bounds the graceful shutdown on SIGTERM/SIGINT.
	ShutdownTimeout metav1.Duration `json:"shutdownTimeout"`
	// ResyncPeriod is the informers' resync period (0 disables resync).
	ResyncPeriod metav1.Duration `json:"resyncPeriod"`
	// BindTimeout bounds one Binding call to the API server.
	BindTimeout metav1.Duration `json:"bindTimeout"`
	// ClientQPS and ClientBurst rate-limit the API client: Bindings are posted at the rate
	// kube-scheduler binds (client-go's own default, 5 per second, would cap it).
	ClientQPS   float32 `json:"clientQPS"`
	ClientBurst int     `json:"clientBurst"`
	// Log configures logging.
	Log LogConfig `json:"log"`
	// Gang says how pods are grouped into jobs.
	Gang GangConfig `json:"gang"`
	// Gate configures the bind rendezvous and the queue's recompute.
	Gate GateConfig `json:"gate"`
	// Model is the combined priority and the admission policy (priority/README.md).
	Model ModelConfig `json:"model"`
	// Affinity configures the PS-worker affinity scores of prioritize.
	Affinity priority.Affinity `json:"affinity"`
	// Volcano configures the verbs served to Volcano's scheduler (extender/volcano).
	Volcano VolcanoConfig `json:"volcano"`
	// Events configures the Events on waiting pods.
	Events EventsConfig `json:"events"`
	// Reload configures how changes of the config file and the TLS files are picked up.
	Reload ReloadConfig `json:"reload"`
	// TLS switches HTTPS serving on.
	TLS TLSConfig `json:"tls"`
	// Webhook serves the turn-gate admission webhook on an HTTPS listener of its own.
	Webhook WebhookConfig `json:"webhook"`
}

// WebhookConfig serves the turn-gate admission webhook (extender/admission) over HTTPS on
// a listener of its own, so the scheduler's calls can stay on plain HTTP. Its certificate
// is CertFile and KeyFile when given (cert-manager, say, then fills the webhook's caBundle);
// else the extender keeps one itself: a CA and a certificate for Service's DNS names in
// Secret (created once, shared by replicas, renewed before it expires), and the CA in the
// caBundle of the MutatingWebhookConfiguration named Configuration.
type WebhookConfig struct {
	// Listen is the webhook's HTTPS address, host:port; empty serves no such listener.
	Listen string `json:"listen"`
	// CertFile and KeyFile are a serving certificate and its key, reloaded when they change.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// Secret (namespace/name) holds the self-kept certificate.
	Secret string `json:"secret"`
	// Service (namespace/name) is how the API server reaches the webhook; the self-kept
	// certificate names <name>.<namespace>.svc (and .svc.cluster.local).
	Service string `json:"service"`
	// Hosts are further DNS names or IP addresses for the self-kept certificate.
	Hosts []string `json:"hosts"`
	// Configuration names the MutatingWebhookConfiguration whose caBundle is kept filled
	// and whose calls the extender switches (OffAfter).
	Configuration string `json:"configuration"`
	// OffAfter is how long no job must have waited before the extender switches the API
	// server's calls of the webhook off (the matchCondition cps-extender-job-waits 'false');
	// a job that waits switches them on. 0 keeps them on: a call on every pod creation. At
	// least 1s: each switch is a write of the configuration.
	OffAfter metav1.Duration `json:"offAfter"`
}

// SelfSigned reports whether the extender keeps the webhook's certificate itself.
func (w WebhookConfig) SelfSigned() bool { return w.Listen != "" && w.CertFile == "" }

// EventsConfig configures the WaitingForTurn Events on pods whose job waits.
type EventsConfig struct {
	// WaitingInterval is the least time between two Events on the same pod; 0 sends none.
	WaitingInterval metav1.Duration `json:"waitingInterval"`
}

// ReloadConfig configures reloading while running.
type ReloadConfig struct {
	// Interval is how often the config file's content (its model and affinity sections)
	// and the TLS certificate and key are checked for changes; 0 turns reloading off.
	Interval metav1.Duration `json:"interval"`
}

// LeaderElectionConfig elects one writer among the extender's replicas with a Lease: only
// the leader evicts preemption victims, nudges and lifts pods, writes the waiting Events and
// switches the webhook's calls; every replica serves the verbs and the webhook.
type LeaderElectionConfig struct {
	// LeaderElect turns the election on; off, the process writes as if it led (one replica).
	LeaderElect bool `json:"leaderElect"`
	// ResourceName and ResourceNamespace name the Lease; an empty namespace is the pod's own
	// (its service account's), else cps-system.
	ResourceName      string `json:"resourceName"`
	ResourceNamespace string `json:"resourceNamespace"`
	// LeaseDuration is how long a leader that is gone keeps the Lease; RenewDeadline how
	// long a leader retries renewing it; RetryPeriod how often candidates try.
	LeaseDuration metav1.Duration `json:"leaseDuration"`
	RenewDeadline metav1.Duration `json:"renewDeadline"`
	RetryPeriod   metav1.Duration `json:"retryPeriod"`
}

// The ways a caller may be let in (AccessConfig).
const (
	// AccessLoopback: the connection comes from this host's loopback address: kube-scheduler
	// in the same pod, or `kubectl port-forward`, which the API server authorizes.
	AccessLoopback = "loopback"
	// AccessClientCertificate: the caller presents a TLS client certificate signed by
	// tls.clientCAFile (kube-scheduler's extender tlsConfig certFile and keyFile).
	AccessClientCertificate = "clientCertificate"
	// AccessToken: the caller's bearer token is one the API server accepts (TokenReview),
	// for a user allowed to get the URL path (a SubjectAccessReview on the non-resource URL).
	AccessToken = "token"
	// AccessAnyone lets every caller in: only where something else guards the port (a
	// NetworkPolicy).
	AccessAnyone = "anyone"
)

// AccessConfig says, per kind of endpoint, which ways let a caller in; a caller that none
// lets in gets 401 (no credential) or 403, with a JSON body. /healthz and /readyz are open
// to all, for probes; the turn-gate webhook is served on its own listener and nothing else.
type AccessConfig struct {
	// Scheduler is for the kube-scheduler verbs under urlPrefix: loopback,
	// clientCertificate, anyone.
	Scheduler []string `json:"scheduler"`
	// Volcano is for the Volcano verbs: loopback or anyone. Volcano's extender plugin
	// (v1.14.1) sends no credential of its own: run the extender as a sidecar of
	// vc-scheduler, or guard the port with a NetworkPolicy.
	Volcano []string `json:"volcano"`
	// Admin is for /debug/*, /ui and /metrics: loopback, token, anyone.
	Admin []string `json:"admin"`
}

// TLSConfig switches HTTPS serving on when both files are given (kube-scheduler's
// extender enableHTTPS and tlsConfig). The files are reloaded when they change.
type TLSConfig struct {
	// CertFile is the PEM serving certificate (chain); KeyFile is its private key.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// ClientCAFile is a PEM bundle of the CAs whose client certificates the access mode
	// clientCertificate accepts; reloaded like the pair.
	ClientCAFile string `json:"clientCAFile"`
	// ClientNames, when not empty, are the common names clientCertificate accepts (e.g.
	// system:kube-scheduler where the cluster's CA signs every component's certificate).
	ClientNames []string `json:"clientNames"`
	// SelfKept serves the main listener with the certificate the extender keeps for its
	// webhook (webhook.secret, for webhook.service's names) instead of CertFile and KeyFile.
	SelfKept bool `json:"selfKept"`
}

// Enabled reports whether HTTPS is configured.
func (t TLSConfig) Enabled() bool { return t.CertFile != "" || t.SelfKept }

// VolcanoConfig configures the verbs served to Volcano's scheduler `extender` plugin.
type VolcanoConfig struct {
	// URLPrefix is prepended to the Volcano verbs: <urlPrefix>/onSessionOpen, /predicate, ...
	// It must differ from the kube-scheduler verbs' urlPrefix.
	URLPrefix string `json:"urlPrefix"`
	// SessionTTL bounds how long the snapshot sent by onSessionOpen is used; Volcano opens a
	// session every scheduling period (1 s by default) and closes it within the period.
	SessionTTL metav1.Duration `json:"sessionTTL"`
}

// validate lists the problems of c, with their config keys.
func (c VolcanoConfig) Validate() []error {
	var errs []error
	if p := c.URLPrefix; !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, ":*") || strings.Contains(p, "//") {
		errs = append(errs, fmt.Errorf("volcano.urlPrefix: %q must start with / and not end with /, without : * or // (e.g. /volcano)", p))
	}
	if c.SessionTTL.Duration <= 0 {
		errs = append(errs, fmt.Errorf("volcano.sessionTTL: %v must be positive", c.SessionTTL.Duration))
	}
	return errs
}

// GangConfig names the labels that put plain pods into jobs and switches gang sources.
type GangConfig struct {
	// JobLabel names a plain pod's job (the project's own labels).
	JobLabel string `json:"jobLabel"`
	// RoleLabel gives a plain pod's role: ps, chief/master, worker, evaluator.
	RoleLabel string `json:"roleLabel"`
	// IndexLabel gives a plain pod's replica index within its role.
	IndexLabel string `json:"indexLabel"`
	// MinMemberLabel gives the gang minimum of a plain pod's job (default: all its pods).
	MinMemberLabel string `json:"minMemberLabel"`
	// UserLabel names the user: on the namespace (set by whoever may edit namespaces),
	// else the namespace's name is the user. On a pod it counts only in PodUserNamespaces.
	UserLabel string `json:"userLabel"`
	// PodUserNamespaces are the namespaces whose pods may name their own user with
	// UserLabel ("*": every namespace, as releases before 2026-12 did). A pod elsewhere that
	// names one is ranked as its namespace's user and gets a Warning (LabelIgnored).
	PodUserNamespaces []string `json:"podUserNamespaces"`
	// UrgentLabel marks an urgent job when its value is "true" (label or annotation), but
	// only in a namespace the admin allowed: one of UrgentLabelNamespaces, or a namespace
	// labelled UrgentNamespaceLabel=true. Elsewhere it counts for nothing and earns a
	// Warning (LabelIgnored). model.urgentPriorityClasses make a job urgent anywhere.
	UrgentLabel string `json:"urgentLabel"`
	// UrgentPriorityClasses make a job urgent when one of its pods uses one of them
	// (spec.priorityClassName), in any namespace. Who may use a PriorityClass is the
	// admin's to limit, per namespace, with ResourceQuota scopes (docs/preemption.md).
	UrgentPriorityClasses []string `json:"urgentPriorityClasses"`
	// UrgentLabelNamespaces are the namespaces whose pods may mark their job urgent with
	// UrgentLabel ("*": every namespace, as releases before 2026-12 did).
	UrgentLabelNamespaces []string `json:"urgentLabelNamespaces"`
	// UrgentNamespaceLabel on a namespace, "true", lets its pods mark their job urgent
	// (set by whoever may edit namespaces).
	UrgentNamespaceLabel string `json:"urgentNamespaceLabel"`
	// RequiredTopologyAnnotation on a pod names a node label key (a level of
	// affinity.topology, or kubernetes.io/hostname): its job is placed only inside one
	// domain of it. PreferredTopologyAnnotation names the level the job is preferably kept
	// inside. A Workload API PodGroup's schedulingConstraints.topology key counts as required.
	RequiredTopologyAnnotation  string `json:"requiredTopologyAnnotation"`
	PreferredTopologyAnnotation string `json:"preferredTopologyAnnotation"`
	// Volcano, Coscheduling, Workload and Kubeflow switch those gang sources on. A
	// PodGroup source whose API is not served by the cluster is off anyway.
	Volcano      bool `json:"volcano"`
	Coscheduling bool `json:"coscheduling"`
	Workload     bool `json:"workload"`
	// Kubeflow reads the gang of a pod owned by a Kubeflow training job (kubeflow.org/v1
	// TFJob, PyTorchJob, MPIJob, XGBoostJob, PaddleJob, JAXJob) from that job.
	Kubeflow bool `json:"kubeflow"`
	// JobSet, LeaderWorkerSet, Ray and IndexedJob read the gangs of those workloads' pods
	// from the workload objects; Kueue reads Kueue's plain pod groups from their pods'
	// labels.
	JobSet          bool `json:"jobSet"`
	LeaderWorkerSet bool `json:"leaderWorkerSet"`
	Ray             bool `json:"ray"`
	IndexedJob      bool `json:"indexedJob"`
	Kueue           bool `json:"kueue"`
	// SizeUnknown says what a job whose gang size cannot be known yet does (its workload
	// object not read yet, or its kind not served): "wait" (the default) until the size is
	// known, or "podsSeen" to take the pods that exist as the whole gang, as releases
	// before 2026-12 did. A min-member label always gives the size.
	SizeUnknown string `json:"sizeUnknown"`
	// DiscoveryInterval is how often the extender asks the API server which PodGroup and
	// workload kinds it serves, so that a CRD installed later is read.
	DiscoveryInterval metav1.Duration `json:"discoveryInterval"`
	// ExemptNamespaces are never gated (system pods must not wait for ML jobs): read them
	// through Exempt.
	ExemptNamespaces []string `json:"exemptNamespaces"`
}

// Exempt reports whether the pods of namespace are exempt: never gated, never counted in a
// job, never a victim. It is the one place the rule is decided; the webhook configuration's
// namespaceSelector (deploy/webhook/turn-gate.yaml) leaves out the shipped config's
// exemptNamespaces, which deploy's tests check.
func (g GangConfig) Exempt(namespace string) bool {
	return slices.Contains(g.ExemptNamespaces, namespace)
}

// The values of GangConfig.SizeUnknown.
const (
	SizeUnknownWait     = "wait"
	SizeUnknownPodsSeen = "podsSeen"
)

// GateConfig configures the bind rendezvous.
type GateConfig struct {
	// HoldTimeout is how long a gang may go without a new member reaching bind: then it
	// has failed, every held bind answers an error and the job cools down.
	HoldTimeout metav1.Duration `json:"holdTimeout"`
	// MaxHold bounds how long one bind request is held; it must stay below the scheduler's
	// extender httpTimeout (a forgotten hold must never be bound). A request held that long
	// while its gang still grows answers an error the scheduler retries.
	MaxHold metav1.Duration `json:"maxHold"`
	// CoolDown is how long a job loses the turn after its first hold timeout; it doubles
	// with each further timeout, up to MaxCoolDown.
	CoolDown    metav1.Duration `json:"coolDown"`
	MaxCoolDown metav1.Duration `json:"maxCoolDown"`
	// RecomputeInterval recomputes the queue even without events: waiting time grows,
	// cool-downs end.
	RecomputeInterval metav1.Duration `json:"recomputeInterval"`
}

// ModelConfig is priority.Model as written in the config file.
type ModelConfig struct {
	Weights         priority.Weights   `json:"weights"`
	Tiers           map[string]float64 `json:"tiers"`
	UserTiers       map[string]string  `json:"userTiers"`
	DefaultTier     string             `json:"defaultTier"`
	PriorityFloor   int32              `json:"priorityFloor"`
	PriorityCeiling int32              `json:"priorityCeiling"`
	Tau             metav1.Duration    `json:"tau"`
	MaxGang         int                `json:"maxGang"`
	StarvationBound metav1.Duration    `json:"starvationBound"`
	Policy          priority.Policy    `json:"policy"`
	TurnHold        metav1.Duration    `json:"turnHold"`
	SpreadAfter     metav1.Duration    `json:"spreadAfter"`
	ReserveAfter    metav1.Duration    `json:"reserveAfter"`
	// Preemption: off, urgent (default) or priority; see priority/README.md.
	Preemption       PreemptionSetting `json:"preemption"`
	PreemptionMargin float64           `json:"preemptionMargin"`
	MinRunTime       metav1.Duration   `json:"minRunTime"`
	MaxPreemptions   int               `json:"maxPreemptions"`
	PreemptionWindow metav1.Duration   `json:"preemptionWindow"`
	// UrgentMinRunTime shields a running non-urgent job from an urgent preemptor
	// (MinRunTime shields it from the rest).
	UrgentMinRunTime metav1.Duration `json:"urgentMinRunTime"`
	// ArrivalWindow: an urgent or head-of-queue job whose last pod was created within it
	// keeps the room its whole gang needs while the rest of its pods arrive.
	ArrivalWindow metav1.Duration `json:"arrivalWindow"`
}

// PriorityModel converts the config block to the model.
func (m ModelConfig) PriorityModel() priority.Model {
	return priority.Model{
		Weights: m.Weights, Tiers: m.Tiers, UserTiers: m.UserTiers, DefaultTier: m.DefaultTier,
		PriorityFloor: m.PriorityFloor, PriorityCeiling: m.PriorityCeiling, Tau: m.Tau.Duration,
		MaxGang: m.MaxGang, StarvationBound: m.StarvationBound.Duration, Policy: m.Policy,
		TurnHold: m.TurnHold.Duration, SpreadAfter: m.SpreadAfter.Duration, ReserveAfter: m.ReserveAfter.Duration,
		Preemption: priority.PreemptionMode(m.Preemption), PreemptionMargin: m.PreemptionMargin, MinRunTime: m.MinRunTime.Duration,
		MaxPreemptions: m.MaxPreemptions, PreemptionWindow: m.PreemptionWindow.Duration,
		UrgentMinRunTime: m.UrgentMinRunTime.Duration, ArrivalWindow: m.ArrivalWindow.Duration,
	}
}

func modelConfigOf(m priority.Model) ModelConfig {
	return ModelConfig{
		Weights: m.Weights, Tiers: m.Tiers, UserTiers: m.UserTiers, DefaultTier: m.DefaultTier,
		PriorityFloor: m.PriorityFloor, PriorityCeiling: m.PriorityCeiling, Tau: metav1.Duration{Duration: m.Tau},
		MaxGang: m.MaxGang, StarvationBound: metav1.Duration{Duration: m.StarvationBound}, Policy: m.Policy,
		TurnHold: metav1.Duration{Duration: m.TurnHold}, SpreadAfter: metav1.Duration{Duration: m.SpreadAfter},
		ReserveAfter: metav1.Duration{Duration: m.ReserveAfter},
		Preemption:   PreemptionSetting(m.Preemption), PreemptionMargin: m.PreemptionMargin, MinRunTime: metav1.Duration{Duration: m.MinRunTime},
		MaxPreemptions: m.MaxPreemptions, PreemptionWindow: metav1.Duration{Duration: m.PreemptionWindow},
		UrgentMinRunTime: metav1.Duration{Duration: m.UrgentMinRunTime}, ArrivalWindow: metav1.Duration{Duration: m.ArrivalWindow},
	}
}

// PreemptionSetting is model.preemption as written. YAML 1.1 reads a bare off as false, so
// false means off too; true names no mode.
type PreemptionSetting priority.PreemptionMode

// UnmarshalJSON reads a mode name, or false for off; null (a key left empty) keeps the
// default, as it does for the plain string keys.
func (p *PreemptionSetting) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if string(b) == "false" {
		*p = PreemptionSetting(priority.PreemptOff)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("model.preemption: %s, want off, urgent or priority", b)
	}
	*p = PreemptionSetting(s)
	return nil
}

// LogConfig selects the log encoding and level.
type LogConfig struct {
	// Format is "json" (production) or "console" (humans, the demo).
	Format string `json:"format"`
	// Level is one of debug, info, warn, error.
	Level string `json:"level"`
}

// DefaultConfig returns the configuration used where the file and flags are silent.
func DefaultConfig() Config {
	return Config{
		Listen:    ":8888",
		URLPrefix: "/scheduler",
		// 5000 full Node objects (nodeCacheCapable: false) are ~18 MB; their names ~0.1 MB.
		MaxRequestBytes:   32 << 20,
		MaxInFlight:       64,
		MaxInFlightBinds:  20000,
		ReadTimeout:       metav1.Duration{Duration: 30 * time.Second},
		ReadHeaderTimeout: metav1.Duration{Duration: 10 * time.Second},
		IdleTimeout:       metav1.Duration{Duration: 120 * time.Second},
		SchedulerNames:    []string{"cps-scheduler"},
		Access: AccessConfig{
			Scheduler: []string{AccessLoopback},
			Volcano:   []string{AccessLoopback},
			Admin:     []string{AccessLoopback, AccessToken},
		},
		WriteTimeout:     metav1.Duration{Duration: 90 * time.Second},
		ShutdownTimeout:  metav1.Duration{Duration: 10 * time.Second},
		ResyncPeriod:     metav1.Duration{Duration: 0},
		BindTimeout:      metav1.Duration{Duration: 10 * time.Second},
		ClientQPS:        200,
		EventClientQPS:   100,
		EventClientBurst: 200,
		LeaderElection: LeaderElectionConfig{LeaderElect: true, ResourceName: "cps-extender",
			LeaseDuration: metav1.Duration{Duration: 15 * time.Second}, RenewDeadline: metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod: metav1.Duration{Duration: 2 * time.Second}},
		ClientBurst: 400,
		Log:         LogConfig{Format: "json", Level: "info"},
		Webhook: WebhookConfig{
			Secret:        "cps-system/cps-extender-webhook-tls",
			Service:       "cps-system/cps-extender",
			Configuration: "cps-extender-turn-gate",
			OffAfter:      metav1.Duration{Duration: 10 * time.Second},
		},
		Gang: GangConfig{
			JobLabel:                    "cps-extender.io/job",
			RoleLabel:                   "cps-extender.io/role",
			IndexLabel:                  "cps-extender.io/index",
			MinMemberLabel:              "cps-extender.io/min-member",
			UserLabel:                   "cps-extender.io/user",
			UrgentLabel:                 "cps-extender.io/urgent",
			UrgentNamespaceLabel:        "cps-extender.io/urgent-allowed",
			RequiredTopologyAnnotation:  "cps-extender.io/topology-required",
			PreferredTopologyAnnotation: "cps-extender.io/topology-preferred",
			Volcano:                     true,
			Coscheduling:                true,
			Workload:                    true,
			Kubeflow:                    true,
			JobSet:                      true,
			LeaderWorkerSet:             true,
			Ray:                         true,
			IndexedJob:                  true,
			Kueue:                       true,
			SizeUnknown:                 SizeUnknownWait,
			DiscoveryInterval:           metav1.Duration{Duration: 30 * time.Second},
			ExemptNamespaces:            []string{"kube-system"},
		},
		Gate: GateConfig{
			HoldTimeout:       metav1.Duration{Duration: 20 * time.Second},
			MaxHold:           metav1.Duration{Duration: 50 * time.Second},
			CoolDown:          metav1.Duration{Duration: 5 * time.Second},
			MaxCoolDown:       metav1.Duration{Duration: 2 * time.Minute},
			RecomputeInterval: metav1.Duration{Duration: time.Second},
		},
		Model:    modelConfigOf(priority.DefaultModel()),
		Affinity: priority.DefaultAffinity(),
		Volcano:  VolcanoConfig{URLPrefix: "/volcano", SessionTTL: metav1.Duration{Duration: 30 * time.Second}},
		Events:   EventsConfig{WaitingInterval: metav1.Duration{Duration: time.Minute}},
		Reload:   ReloadConfig{Interval: metav1.Duration{Duration: 5 * time.Second}},
	}
}

// LoadConfig reads a YAML config file over the defaults. It returns every problem it
// finds, each unknown key and each value that cannot be decoded, so they can be reported
// together with Validate's.
func LoadConfig(path string) (Config, []error) {
	cfg := DefaultConfig()
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, []error{fmt.Errorf("reading config: %w", err)}
	}
	return cfg, decodeConfig(data, &cfg)
}

// decodeConfig decodes YAML into cfg strictly and lists every problem: each unknown and
// each duplicate key by its dotted path, and each value that cannot be decoded, named by
// its top-level key. The sections are decoded one at a time because a value that cannot be
// decoded ends the decoding, and with it the strict errors of the keys after it.
func decodeConfig(data []byte, cfg *Config) []error {
	asJSON, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return []error{fmt.Errorf("not valid YAML: %w", err)}
	}
	var sections map[string]json.RawMessage
	if err := json.Unmarshal(asJSON, &sections); err != nil {
		return []error{fmt.Errorf("want a mapping of config keys: %w", err)}
	}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(sections)) {
		one, err := json.Marshal(map[string]json.RawMessage{key: sections[key]})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		strict, err := kjson.UnmarshalStrict(one, cfg)
		errs = append(errs, strict...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	return errs
}

// Validate returns every problem of the configuration, one error per problem.
func (c Config) Validate() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen: %q is not host:port: %v", c.Listen, err)
	}
	if c.URLPrefix != "" && (!strings.HasPrefix(c.URLPrefix, "/") || strings.HasSuffix(c.URLPrefix, "/")) {
		bad("urlPrefix: %q must be empty or start with / and not end with / (e.g. /scheduler)", c.URLPrefix)
	}
	if c.MaxRequestBytes < 1024 {
		bad("maxRequestBytes: %d is below 1024", c.MaxRequestBytes)
	}
	if c.MaxInFlight < 1 || c.MaxInFlightBinds < 1 {
		bad("maxInFlight (%d) and maxInFlightBinds (%d) must be at least 1", c.MaxInFlight, c.MaxInFlightBinds)
	}
	errs = append(errs, c.Access.validate(c.TLS)...)
	for _, d := range []struct {
		key string
		v   metav1.Duration
	}{{"readTimeout", c.ReadTimeout}, {"writeTimeout", c.WriteTimeout}, {"readHeaderTimeout", c.ReadHeaderTimeout}, {"idleTimeout", c.IdleTimeout},
		{"shutdownTimeout", c.ShutdownTimeout}, {"bindTimeout", c.BindTimeout}} {
		if d.v.Duration <= 0 {
			bad("%s: %v must be positive", d.key, d.v.Duration)
		}
	}
	if c.ClientQPS <= 0 || c.ClientBurst <= 0 {
		bad("clientQPS (%v) and clientBurst (%d) must be positive", c.ClientQPS, c.ClientBurst)
	}
	if c.EventClientQPS <= 0 || c.EventClientBurst <= 0 {
		bad("eventClientQPS (%v) and eventClientBurst (%d) must be positive", c.EventClientQPS, c.EventClientBurst)
	}
	if le := c.LeaderElection; le.LeaderElect {
		if le.ResourceName == "" {
			bad("leaderElection.resourceName: must not be empty")
		}
		if le.RetryPeriod.Duration <= 0 || le.RenewDeadline.Duration <= le.RetryPeriod.Duration || le.LeaseDuration.Duration <= le.RenewDeadline.Duration {
			bad("leaderElection: want 0 < retryPeriod (%v) < renewDeadline (%v) < leaseDuration (%v)", le.RetryPeriod.Duration, le.RenewDeadline.Duration, le.LeaseDuration.Duration)
		}
	}
	if c.ResyncPeriod.Duration < 0 {
		bad("resyncPeriod: %v must not be negative", c.ResyncPeriod.Duration)
	}
	for _, l := range []struct{ key, v string }{
		{"gang.jobLabel", c.Gang.JobLabel}, {"gang.roleLabel", c.Gang.RoleLabel}, {"gang.indexLabel", c.Gang.IndexLabel},
		{"gang.minMemberLabel", c.Gang.MinMemberLabel}, {"gang.userLabel", c.Gang.UserLabel}, {"gang.urgentLabel", c.Gang.UrgentLabel},
		{"gang.urgentNamespaceLabel", c.Gang.UrgentNamespaceLabel},
		{"gang.requiredTopologyAnnotation", c.Gang.RequiredTopologyAnnotation}, {"gang.preferredTopologyAnnotation", c.Gang.PreferredTopologyAnnotation},
	} {
		if l.v == "" {
			bad("%s: must not be empty", l.key)
		}
	}
	for i, pc := range c.Gang.UrgentPriorityClasses {
		if pc == "" {
			bad("gang.urgentPriorityClasses[%d]: must not be empty", i)
		}
	}
	if c.Gang.SizeUnknown != SizeUnknownWait && c.Gang.SizeUnknown != SizeUnknownPodsSeen {
		bad("gang.sizeUnknown: %q is not %s or %s", c.Gang.SizeUnknown, SizeUnknownWait, SizeUnknownPodsSeen)
	}
	if c.Gang.DiscoveryInterval.Duration < time.Second {
		bad("gang.discoveryInterval: %v is below 1s", c.Gang.DiscoveryInterval.Duration)
	}
	for _, d := range []struct {
		key string
		v   metav1.Duration
	}{{"gate.holdTimeout", c.Gate.HoldTimeout}, {"gate.maxHold", c.Gate.MaxHold}, {"gate.coolDown", c.Gate.CoolDown}, {"gate.maxCoolDown", c.Gate.MaxCoolDown}, {"gate.recomputeInterval", c.Gate.RecomputeInterval}} {
		if d.v.Duration <= 0 {
			bad("%s: %v must be positive", d.key, d.v.Duration)
		}
	}
	if c.Gate.MaxCoolDown.Duration < c.Gate.CoolDown.Duration {
		bad("gate.maxCoolDown: %v is below gate.coolDown %v", c.Gate.MaxCoolDown.Duration, c.Gate.CoolDown.Duration)
	}
	if c.Gate.MaxHold.Duration < c.Gate.HoldTimeout.Duration {
		bad("gate.maxHold: %v is below gate.holdTimeout %v", c.Gate.MaxHold.Duration, c.Gate.HoldTimeout.Duration)
	}
	if c.Gate.MaxHold.Duration >= c.WriteTimeout.Duration {
		bad("gate.maxHold: %v must be below writeTimeout %v, or held binds could never answer", c.Gate.MaxHold.Duration, c.WriteTimeout.Duration)
	}
	errs = append(errs, c.Model.PriorityModel().Validate()...)
	errs = append(errs, c.Affinity.Validate()...)
	errs = append(errs, c.Volcano.Validate()...)
	if c.Volcano.URLPrefix == c.URLPrefix {
		bad("volcano.urlPrefix: %q is also urlPrefix; the Volcano verbs need a prefix of their own", c.Volcano.URLPrefix)
	}
	if c.Events.WaitingInterval.Duration < 0 {
		bad("events.waitingInterval: %v must not be negative (0 sends no events)", c.Events.WaitingInterval.Duration)
	}
	if c.Reload.Interval.Duration < 0 {
		bad("reload.interval: %v must not be negative (0 turns reloading off)", c.Reload.Interval.Duration)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("tls: certFile %q and keyFile %q must be given both or neither", c.TLS.CertFile, c.TLS.KeyFile)
	}
	if c.TLS.ClientCAFile != "" && !c.TLS.Enabled() {
		bad("tls.clientCAFile: client certificates need TLS: set tls.certFile and tls.keyFile, or tls.selfKept")
	}
	if c.TLS.SelfKept && (c.TLS.CertFile != "" || !c.Webhook.SelfSigned() || c.Webhook.Secret == "") {
		bad("tls.selfKept: serves the webhook's self-kept certificate: leave tls.certFile empty and set webhook.secret and webhook.service, without webhook.certFile")
	}
	errs = append(errs, c.Webhook.validate()...)
	switch c.Log.Format {
	case "json", "console":
	default:
		bad("log.format: %q is not json or console", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level: %q is not debug, info, warn or error", c.Log.Level)
	}
	return errs
}

// validate lists the problems of the webhook section, with their config keys.
func (w WebhookConfig) validate() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if w.Listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(w.Listen); err != nil {
		bad("webhook.listen: %q is not host:port: %v", w.Listen, err)
	}
	if (w.CertFile == "") != (w.KeyFile == "") {
		bad("webhook: certFile %q and keyFile %q must be given both or neither", w.CertFile, w.KeyFile)
	}
	if d := w.OffAfter.Duration; d < 0 || d > 0 && d < time.Second {
		bad("webhook.offAfter: %v is neither 0 (calls always on) nor at least 1s", d)
	}
	if w.Configuration == "" && (w.SelfSigned() || w.OffAfter.Duration > 0) {
		bad("webhook.configuration: must name the MutatingWebhookConfiguration whose caBundle the extender fills and whose calls it switches")
	}
	if !w.SelfSigned() {
		return errs
	}
	for _, r := range []struct{ key, v string }{{"webhook.secret", w.Secret}, {"webhook.service", w.Service}} {
		if ns, name, ok := strings.Cut(r.v, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			bad("%s: %q is not namespace/name", r.key, r.v)
		}
	}
	for _, h := range w.Hosts {
		if h == "" || strings.ContainsAny(h, "/: ") && net.ParseIP(h) == nil {
			bad("webhook.hosts: %q is neither a DNS name nor an IP address", h)
		}
	}
	return errs
}

// validate lists the problems of the access modes: unknown ways, an empty list (nobody at
// all could call), and clientCertificate without a CA to check certificates against.
func (a AccessConfig) validate(t TLSConfig) []error {
	var errs []error
	for _, kind := range []struct {
		key     string
		ways    []string
		allowed []string
	}{
		{"access.scheduler", a.Scheduler, []string{AccessLoopback, AccessClientCertificate, AccessAnyone}},
		{"access.volcano", a.Volcano, []string{AccessLoopback, AccessAnyone}},
		{"access.admin", a.Admin, []string{AccessLoopback, AccessToken, AccessAnyone}},
	} {
		if len(kind.ways) == 0 {
			errs = append(errs, fmt.Errorf("%s: empty: nobody could call these endpoints (give one of %s)", kind.key, strings.Join(kind.allowed, ", ")))
		}
		for _, w := range kind.ways {
			if !slices.Contains(kind.allowed, w) {
				errs = append(errs, fmt.Errorf("%s: %q is not one of %s", kind.key, w, strings.Join(kind.allowed, ", ")))
				continue
			}
			if w == AccessClientCertificate && t.ClientCAFile == "" {
				errs = append(errs, fmt.Errorf("%s: clientCertificate needs tls.clientCAFile (the CA that signs the scheduler's client certificate)", kind.key))
			}
		}
	}
	return errs
}

// UrgencyOf says whether a job's pod makes its job urgent, and where that comes from: its
// PriorityClass is one of UrgentPriorityClasses, or it carries UrgentLabel (labelled) in a
// namespace allowed to (one of UrgentLabelNamespaces, or namespaceAllowed: the caller read
// the namespace's UrgentNamespaceLabel as "true"). ignored: the pod is labelled urgent
// where that counts for nothing; from is then empty, unless its PriorityClass made it
// urgent anyway, in which case the label does not matter and ignored is false.
func (g GangConfig) UrgencyOf(namespace, priorityClass string, labelled, namespaceAllowed bool) (from string, ignored bool) {
	switch {
	case priorityClass != "" && slices.Contains(g.UrgentPriorityClasses, priorityClass):
		return "PriorityClass " + priorityClass + " (gang.urgentPriorityClasses)", false
	case !labelled:
		return "", false
	case slices.Contains(g.UrgentLabelNamespaces, namespace) || slices.Contains(g.UrgentLabelNamespaces, "*"):
		return "label " + g.UrgentLabel + " in namespace " + namespace + " (gang.urgentLabelNamespaces)", false
	case namespaceAllowed:
		return "label " + g.UrgentLabel + " in namespace " + namespace + " (namespace label " + g.UrgentNamespaceLabel + "=true)", false
	}
	return "", true
}
