package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	adminUser = "admin"

	// KeepDirEnv names the environment variable that, when set, keeps every control plane's
	// scratch folder (logs, kubeconfigs, etcd data) instead of removing it.
	KeepDirEnv = "CPS_E2E_KEEP"

	// startAttempts bounds the retries of a component that lost a race for its port.
	startAttempts = 3

	etcdTimeout      = 30 * time.Second
	apiServerTimeout = 60 * time.Second
	kwokTimeout      = 30 * time.Second

	// slowStop is the stop duration above which the cleanup says how long a process took.
	slowStop = 2 * time.Second
)

// Options shape the control plane that Start runs.
type Options struct {
	// Users are the identities, besides the admin, that kube-apiserver accepts by bearer token;
	// they have no permissions until a test grants some through RBAC. UserKubeconfig returns a
	// kubeconfig for each.
	Users []User
	// FeatureGates is passed to kube-apiserver as --feature-gates when not empty,
	// e.g. "GenericWorkload=true".
	FeatureGates string
	// RuntimeConfig is passed to kube-apiserver as --runtime-config when not empty,
	// e.g. "scheduling.k8s.io/v1beta1=true".
	RuntimeConfig string
	// ExtraAPIServerArgs are appended to kube-apiserver's command line. A single-valued flag
	// given here overrides the one Start sets; a list or map flag (--disable-admission-plugins,
	// --feature-gates) adds to it.
	ExtraAPIServerArgs []string
	// KwokStages replaces DefaultKwokStages when not nil: paths under the binaries'
	// kwok-stages/ folder.
	KwokStages []string
}

// User is an identity that kube-apiserver authenticates by a static bearer token.
type User struct {
	// Name is the user name that RBAC subjects refer to; "admin" is reserved.
	Name string
	// Token is the bearer token; Start generates one when it is empty.
	Token string
	// Groups are the groups the user belongs to, e.g. "system:masters".
	Groups []string
}

// ControlPlane is a running etcd, kube-apiserver and kwok on loopback ports, started by Start
// and stopped by the test's cleanup. Every file it writes is under Dir.
type ControlPlane struct {
	// Dir is the scratch folder: data, keys, kubeconfigs, configuration and process logs.
	Dir string
	// Kubeconfig is the path of an admin (system:masters) kubeconfig.
	Kubeconfig string
	// URL is kube-apiserver's address, https://127.0.0.1:PORT.
	URL string
	// Client is an admin clientset.
	Client kubernetes.Interface
	// RESTConfig is the admin client configuration behind Client and Kubeconfig.
	RESTConfig *rest.Config
	// BinDir is the folder of the control plane binaries (see BinDir).
	BinDir string

	caPEM []byte
	users map[string]User
	// apiServer is the running kube-apiserver and apiServerArgs its command line, for
	// StopAPIServer and StartAPIServerAgain.
	apiServer     *Process
	apiServerArgs []string

	mu    sync.Mutex
	procs []*Process
}

// Start runs a fresh control plane for t, on free loopback ports, in a new scratch folder:
// etcd, kube-apiserver (token authentication, RBAC authorization; see apiServerArgs) and kwok,
// which manages the nodes that carry the annotation kwok.x-k8s.io/node=fake and moves their
// pods through their lifecycle. It returns once kube-apiserver's /readyz is ok and kwok is
// running. Cleanup stops every process started through the control plane in reverse order,
// prints their logs if the test failed, and removes the scratch folder (kept, and named in the
// test log, if the test failed and $CPS_E2E_KEEP is set).
func Start(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	began := time.Now()
	bin := BinDir(t)
	if err := checkUsers(opts.Users); err != nil {
		t.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "cps-e2e-")
	if err != nil {
		t.Fatalf("make scratch folder: %v", err)
	}
	children.addDir(dir)
	cp := &ControlPlane{Dir: dir, BinDir: bin, users: map[string]User{}}
	// Registered first, so it runs last: after every process is stopped.
	t.Cleanup(func() {
		defer children.removeDir(dir)
		if t.Failed() {
			cp.DumpLogs(t)
		}
		if os.Getenv(KeepDirEnv) != "" {
			t.Logf("kept scratch folder %s", dir)
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove scratch folder: %v", err)
		}
	})

	etcdURL := cp.startEtcd(t)
	etcdUp := time.Since(began)
	cp.startAPIServer(t, etcdURL, opts)
	apiUp := time.Since(began)
	cp.startKwok(t, opts.KwokStages)
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	t.Logf("control plane up in %v (etcd healthy after %v, kube-apiserver ready after %v) at %s, scratch folder %s",
		ms(time.Since(began)), ms(etcdUp), ms(apiUp), cp.URL, dir)
	return cp
}

// startEtcd runs etcd on free client and peer ports and waits until it reports healthy. It
// returns the client URL.
func (cp *ControlPlane) startEtcd(t testing.TB) string {
	t.Helper()
	var clientURL string
	cp.startWithRetry(t, "etcd", func() (*Process, error) {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		clientURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		dataDir := filepath.Join(cp.Dir, "etcd-data")
		if err := os.RemoveAll(dataDir); err != nil { // left by a failed attempt
			return nil, err
		}
		p, err := cp.startChild(t, "etcd", filepath.Join(cp.BinDir, "etcd"), []string{
			"--name=e2e",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=e2e=" + peerURL,
			"--unsafe-no-fsync", // the data is thrown away with the test
			// A single member elects itself after an election timeout: 100 ms, not 1 s.
			"--heartbeat-interval=10",
			"--election-timeout=100",
		}, nil)
		if err != nil {
			return nil, err
		}
		return p, waitUntil(p, etcdTimeout, func() (bool, error) { return etcdHealthy(clientURL) })
	})
	return clientURL
}

// etcdHealthy asks etcd's /health endpoint.
func etcdHealthy(clientURL string) (bool, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(clientURL + "/health")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var health struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&health); err != nil {
		return false, fmt.Errorf("etcd /health: %w", err)
	}
	return health.Health == "true", nil
}

// startAPIServer writes the service account keys and token file, runs kube-apiserver against
// etcdURL on a free port, waits until /readyz is ok, and fills in URL, RESTConfig, Client and
// the kubeconfigs.
func (cp *ControlPlane) startAPIServer(t testing.TB, etcdURL string, opts Options) {
	t.Helper()
	pubKey, signingKey, err := writeServiceAccountKeys(cp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	users := []User{{Name: adminUser, Token: randomToken(), Groups: []string{"system:masters"}}}
	for _, u := range opts.Users {
		if u.Token == "" {
			u.Token = randomToken()
		}
		users = append(users, u)
	}
	for _, u := range users {
		cp.users[u.Name] = u
	}
	tokenFile := filepath.Join(cp.Dir, "tokens.csv")
	if err := writeTokenFile(tokenFile, users); err != nil {
		t.Fatalf("write token file: %v", err)
	}

	certDir := filepath.Join(cp.Dir, "apiserver-certs")
	cp.startWithRetry(t, "kube-apiserver", func() (*Process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		cp.URL = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		args := apiServerArgs(etcdURL, ports[0], certDir, pubKey, signingKey, tokenFile, opts)
		p, err := cp.startChild(t, "kube-apiserver", filepath.Join(cp.BinDir, "kube-apiserver"), args, nil)
		if err != nil {
			return nil, err
		}
		cp.apiServer, cp.apiServerArgs = p, args
		return p, waitUntil(p, apiServerTimeout, func() (bool, error) {
			// apiserver.crt appears when kube-apiserver has made its self-signed certificate;
			// it bundles the CA that signed it.
			caPEM, err := os.ReadFile(filepath.Join(certDir, "apiserver.crt"))
			if err != nil {
				return false, nil
			}
			cfg := &rest.Config{
				Host:            cp.URL,
				BearerToken:     cp.users[adminUser].Token,
				TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
				QPS:             -1, // no client-side rate limit: tests create objects in bulk
			}
			c, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return false, err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			if err != nil {
				return false, err
			}
			if strings.TrimSpace(string(body)) != "ok" {
				return false, fmt.Errorf("/readyz: %s", body)
			}
			cp.caPEM, cp.RESTConfig = caPEM, cfg
			return true, nil
		})
	})

	cp.Client, err = kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.Kubeconfig, cp.URL, cp.caPEM, adminUser, cp.users[adminUser].Token); err != nil {
		t.Fatal(err)
	}
	for _, u := range opts.Users {
		if err := writeKubeconfig(cp.userKubeconfigPath(u.Name), cp.URL, cp.caPEM, u.Name, cp.users[u.Name].Token); err != nil {
			t.Fatal(err)
		}
	}
}

// StopAPIServer stops kube-apiserver (SIGTERM, as a restart of the control plane would):
// every client's connections and watches break until StartAPIServerAgain.
func (cp *ControlPlane) StopAPIServer(t testing.TB) {
	t.Helper()
	if err := cp.apiServer.Stop(); err != nil {
		t.Logf("stopping kube-apiserver: %v", err)
	}
}

// StartAPIServerAgain starts kube-apiserver again with the same command line (the same
// port, certificates and tokens) and waits until it is ready.
func (cp *ControlPlane) StartAPIServerAgain(t testing.TB) {
	t.Helper()
	p, err := cp.startChild(t, "kube-apiserver", filepath.Join(cp.BinDir, "kube-apiserver"), cp.apiServerArgs, nil)
	if err != nil {
		t.Fatalf("starting kube-apiserver again: %v", err)
	}
	cp.apiServer = p
	if err := waitUntil(p, apiServerTimeout, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		body, err := cp.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		return strings.TrimSpace(string(body)) == "ok", fmt.Errorf("/readyz: %s", body)
	}); err != nil {
		t.Fatalf("kube-apiserver started again is not ready: %v", err)
	}
}

// apiServerArgs is kube-apiserver's command line. The flags beyond serving and storage:
//   - authentication by static tokens only (--token-auth-file), authorization by RBAC;
//   - service account keys, required even though no pod uses a service account;
//   - admission plugins ServiceAccount (nothing creates default service accounts) and
//     TaintNodesByCondition (no controller-manager would ever remove its not-ready taint) off.
func apiServerArgs(etcdURL string, port int, certDir, pubKey, signingKey, tokenFile string, opts Options) []string {
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pubKey,
		"--service-account-signing-key-file=" + signingKey,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
	}
	if opts.FeatureGates != "" {
		args = append(args, "--feature-gates="+opts.FeatureGates)
	}
	if opts.RuntimeConfig != "" {
		args = append(args, "--runtime-config="+opts.RuntimeConfig)
	}
	return append(args, opts.ExtraAPIServerArgs...)
}

// UserKubeconfig returns the path of a kubeconfig that authenticates as the user of
// Options.Users with that name. An unknown name is a bug in the test: it panics.
func (cp *ControlPlane) UserKubeconfig(name string) string {
	cp.user(name)
	return cp.userKubeconfigPath(name)
}

// UserConfig returns a client configuration that authenticates as the user of Options.Users
// with that name. An unknown name is a bug in the test: it panics.
func (cp *ControlPlane) UserConfig(name string) *rest.Config {
	cfg := rest.AnonymousClientConfig(cp.RESTConfig)
	cfg.BearerToken = cp.user(name).Token
	return cfg
}

// UserToken returns the bearer token of the user of Options.Users with that name, for a
// client of something other than the API server (the extender's token-checked endpoints).
// An unknown name is a bug in the test: it panics.
func (cp *ControlPlane) UserToken(name string) string { return cp.user(name).Token }

func (cp *ControlPlane) user(name string) User {
	u, ok := cp.users[name]
	if !ok || name == adminUser {
		panic(fmt.Sprintf("framework: no user %q in Options.Users", name))
	}
	return u
}

func (cp *ControlPlane) userKubeconfigPath(name string) string {
	return filepath.Join(cp.Dir, "user-"+name+".kubeconfig")
}

// startWithRetry calls start up to startAttempts times while it fails because the process it
// started lost the race for a free port ("address already in use"); any other failure fails the
// test at once.
func (cp *ControlPlane) startWithRetry(t testing.TB, what string, start func() (*Process, error)) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, err := start()
		if err == nil {
			return
		}
		if p != nil {
			_ = p.Stop()
			if attempt < startAttempts && outputContains(p, "address already in use") {
				t.Logf("%s lost a port race, retrying (attempt %d): %v", what, attempt, err)
				continue
			}
		}
		t.Fatalf("start %s: %v", what, err)
	}
}

// waitUntil polls cond until it holds, failing early if p exits.
func waitUntil(p *Process, timeout time.Duration, cond func() (bool, error)) error {
	return poll(timeout, func() (bool, error) {
		if p.Exited() {
			return false, StopPolling(fmt.Errorf("%s exited: %v (log %s)", p.Name, p.ExitErr(), p.LogPath()))
		}
		return cond()
	})
}

// outputContains reports whether p's output (see Process.Output) contains substr.
func outputContains(p *Process, substr string) bool {
	b, err := p.Output()
	return err == nil && strings.Contains(string(b), substr)
}

// startChild starts a process of this control plane: HOME is the scratch folder (kwok and
// client tools write under $HOME), env is added after, the log is Dir/<name>.log, and the test's
// cleanup stops it.
func (cp *ControlPlane) startChild(t testing.TB, name, path string, args, env []string) (*Process, error) {
	p, err := startProcess(cp.Dir, name, path, args, append([]string{"HOME=" + cp.Dir}, env...))
	if err != nil {
		return nil, err
	}
	cp.mu.Lock()
	cp.procs = append(cp.procs, p)
	cp.mu.Unlock()
	t.Cleanup(func() {
		began := time.Now()
		if err := p.Stop(); err != nil {
			t.Logf("stop: %v", err)
		}
		if took := time.Since(began); took > slowStop {
			t.Logf("stopping %s took %v", p.Name, took.Round(time.Millisecond))
		}
	})
	return p, nil
}

// StartProcess starts the binary at path with args as a child of the control plane, with env
// added to the environment (HOME is the scratch folder unless env sets it) and stdout and stderr
// appended to Dir/<name>.log. The test's cleanup stops it. Starting a binary again under the
// same name (after a Kill, say) continues the same log; Process.Output and WaitForLog see only
// the new run's part.
func (cp *ControlPlane) StartProcess(t testing.TB, name, path string, args, env []string) *Process {
	t.Helper()
	p, err := cp.startChild(t, name, path, args, env)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Processes returns every process started through the control plane so far, in start order,
// including those that have exited.
func (cp *ControlPlane) Processes() []*Process {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]*Process(nil), cp.procs...)
}
