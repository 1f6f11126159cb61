// Command cps-extender is a Kubernetes scheduler extender that schedules distributed
// machine-learning jobs (parameter servers + workers) by a combined priority.
//
//	cps-extender --config=/etc/cps-extender/config.yaml [--kubeconfig=...] [--listen=:8888] [--url-prefix=/scheduler]
//	cps-extender explain [--url=http://127.0.0.1:8888] [--json] [--ca-file=...] [--token-file=...]
//	cps-extender ungate [--kubeconfig=...] (--namespace=NS | --all)
//	cps-extender version
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/cps-extender/cps-extender/extender/admission"
	"github.com/cps-extender/cps-extender/extender/config"
	"github.com/cps-extender/cps-extender/extender/devices"
	"github.com/cps-extender/cps-extender/extender/gate"
	"github.com/cps-extender/cps-extender/extender/leader"
	"github.com/cps-extender/cps-extender/extender/server"
	"github.com/cps-extender/cps-extender/extender/volcano"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/cps-extender/cps-extender/extender/metrics"
	"github.com/cps-extender/cps-extender/extender/preempt"
	"github.com/cps-extender/cps-extender/extender/scheduler"
	"github.com/cps-extender/cps-extender/extender/turns"
	"github.com/cps-extender/cps-extender/extender/view"
	"github.com/cps-extender/cps-extender/extender/wire"
)

// version and revision name the build; `make image` sets them (-ldflags -X).
var version, revision = "dev", "unknown"

func main() {
	var err error
	switch args := os.Args[1:]; {
	case len(args) > 0 && args[0] == "explain":
		err = runExplain(args[1:], os.Stdout, os.Stderr)
	case len(args) > 0 && args[0] == "ungate":
		err = runUngate(args[1:], os.Stdout, os.Stderr)
	case len(args) == 1 && args[0] == "version":
		fmt.Printf("cps-extender %s (revision %s, %s %s/%s)\n", version, revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	default:
		err = run(args, os.Stderr)
	}
	if errors.Is(err, flag.ErrHelp) { // --help: the usage is printed, and asking is no failure
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cps-extender:", err)
		os.Exit(1)
	}
}

// run parses the configuration, wires the parts, and serves until SIGTERM or SIGINT.
func run(args []string, stderr io.Writer) error {
	cfg, src, err := loadConfig(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.Log)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	restCfg, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	// client-go's default (5 QPS, burst 10) would post a 33-pod gang's Bindings over ~5 s,
	// leaving it partly bound meanwhile (clientQPS/clientBurst, see extender/config).
	restCfg.QPS, restCfg.Burst = cfg.ClientQPS, cfg.ClientBurst
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("building the API client: %w", err)
	}

	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("building the dynamic API client: %w", err)
	}
	// Events, turn annotations and gate lifts go through a client of their own: thousands of
	// waiting pods' Events must not queue behind, or ahead of, a gang's Bindings.
	eventCfg := rest.CopyConfig(restCfg)
	eventCfg.QPS, eventCfg.Burst = cfg.EventClientQPS, cfg.EventClientBurst
	eventClient, err := kubernetes.NewForConfig(eventCfg)
	if err != nil {
		return fmt.Errorf("building the API client of the Events: %w", err)
	}
	meters := newMetrics()
	leaseNS, err := leaseNamespace(ctx, client, cfg.LeaderElection)
	if err != nil {
		return err
	}
	// The elector is built once the preemptor is (it restores the preemptor's ledger on
	// leading); until then, and without an election, this process leads (a nil Elector).
	var elector *leader.Elector
	leading := func() bool { return elector.Leading() }
	recorder, stopEvents := scheduler.NewAPIEventRecorder(eventClient, "cps-extender")
	defer stopEvents()
	var waiting scheduler.WaitingNotifier
	if interval := cfg.Events.WaitingInterval.Duration; interval > 0 {
		waiting = scheduler.NewWaitingEvents(recorder, interval, meters, nil)
	}
	apiNudger := turns.NewAPINudger(eventClient, cfg.BindTimeout.Duration)
	podTurns := turns.New(turns.Options{Log: log, Nudger: apiNudger, Ungater: apiNudger, Waiting: waiting, Metrics: meters,
		Delay: 200 * time.Millisecond, Leading: leading})
	go podTurns.Run(ctx, 4)
	// The budgets a victim gang is checked against as a whole; until the informer has
	// synced, the Eviction API's own checks, one pod at a time, stand alone.
	budgetInformers := informers.NewSharedInformerFactory(client, 0)
	budgetLister := budgetInformers.Policy().V1().PodDisruptionBudgets().Lister()
	budgetInformers.Start(ctx.Done())
	defer budgetInformers.Shutdown()
	var cluster *view.Cluster // built below; evictions begin only once it publishes
	budgets := preempt.NewListedBudgets(budgetLister, func(namespace, name string) (*corev1.Pod, bool) {
		return cluster.Pod(namespace, name)
	})
	preemptor, err := preempt.New(ctx, preempt.Options{Log: log, Evictor: preempt.NewAPIEvictor(client, cfg.BindTimeout.Duration),
		Events: recorder, Metrics: meters, Budgets: budgets, Leading: leading,
		Ledger: preempt.NewConfigMapLedger(client.CoreV1(), leaseNS, cfg.LeaderElection.ResourceName+"-preemptions")})
	if err != nil {
		return err
	}
	if le := cfg.LeaderElection; le.LeaderElect {
		elector, err = leader.New(leader.Options{Log: log, Client: client, Namespace: leaseNS, Name: le.ResourceName,
			LeaseDuration: le.LeaseDuration.Duration, RenewDeadline: le.RenewDeadline.Duration, RetryPeriod: le.RetryPeriod.Duration,
			Metrics: meters, OnStarted: func(lctx context.Context) {
				if err := preemptor.Restore(lctx); err != nil {
					log.Warn("restoring the preemption ledger; recent evictions of another replica may be counted anew", zap.Error(err))
				}
			}})
		if err != nil {
			return err
		}
	} else {
		meters.Leader(true)
	}
	// Evictions under way finish (and record their Events) before the recorder stops.
	defer preemptor.Wait()
	gangGate := gate.New(gate.Options{
		Log: log, Binder: gate.NewAPIBinder(client, cfg.BindTimeout.Duration), Config: cfg.Gate, Metrics: meters,
		Victims: victimsSeen{preemptor: preemptor, leaving: func(job string) bool { return cluster.Leaving(job) }},
	})
	// DRA devices join the fit where resource.k8s.io/v1 is served; elsewhere the view runs
	// without them.
	var devs view.DeviceSource
	if served, err := devices.Served(client); err != nil {
		log.Warn("DRA devices left out of the fit", zap.Error(err))
	} else if served {
		devs = devices.NewSource(log, client, nil)
	}
	cluster = view.NewCluster(view.ClusterOptions{Log: log, Client: client, Dynamic: dyn, Config: cfg, Metrics: meters,
		Turns: podTurns, Holds: gangGate, Preemptor: preemptor, Devices: devs})
	meters.WatchInformers(cluster)
	meters.WatchReady(cluster)
	verbs, err := scheduler.New(log, func() scheduler.Decisions { return cluster.Decisions() }, gangGate.For(cluster), podTurns)
	if err != nil {
		return err
	}
	verbs.Observe(meters, waiting)
	verbs.AwaitView(cluster.Next, scheduler.ViewCatchUp, clock.RealClock{})
	// queueContended reports whether a job of the published queue waits for room or its
	// turn; known is false until the first snapshot.
	queueContended := func() (contended, known bool) {
		snap := cluster.Snapshot()
		if snap == nil {
			return false, false
		}
		return snap.Queue.Contended(), true
	}
	vc, err := volcano.New(log, cfg.Volcano, cfg.Model.PriorityModel(), cfg.Affinity, cfg.Gang, nil)
	if err != nil {
		return err
	}
	// The webhook has a listener of its own when webhook.listen is set, and it serves the
	// webhook alone; else the main listener serves it too.
	webhookRoute := admission.New(cfg.Gang.Exempt, func() bool {
		// Until the first snapshot, a backlog may wait: gate (the lift follows it).
		contended, known := queueContended()
		return contended || !known
	}).Route(admission.Path)
	routes := slices.Concat(verbs.Routes(cfg.URLPrefix), vc.Routes())
	if cfg.Webhook.Listen == "" {
		routes = append(routes, webhookRoute)
	}
	access := server.Access{Scheduler: cfg.Access.Scheduler, Volcano: cfg.Access.Volcano, Admin: cfg.Access.Admin, ClientNames: cfg.TLS.ClientNames}
	if cfg.TLS.ClientCAFile != "" {
		cas, err := server.NewClientCAReloader(log, cfg.TLS.ClientCAFile, cfg.Reload.Interval.Duration)
		if err != nil {
			return err
		}
		access.ClientCAs = cas.Pool
	}
	if slices.Contains(cfg.Access.Admin, config.AccessToken) {
		access.Reviewer = server.NewAPIReviewer(client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews(), cfg.BindTimeout.Duration)
	}
	handler, err := server.New(server.Options{
		Log: log, MaxRequestBytes: cfg.MaxRequestBytes, Ready: cluster, Queue: cluster, Layout: cluster, Metrics: meters,
		Routes: routes, Access: access, MaxInFlight: cfg.MaxInFlight, MaxInFlightHeld: cfg.MaxInFlightBinds,
	})
	if err != nil {
		return err
	}
	srv := newServer(cfg, cfg.Listen, handler)
	servers := []*http.Server{srv}
	var hookCerts *tls.Config // the self-kept certificate, when the extender keeps one
	var toggle *admission.Switch
	if hook := cfg.Webhook; hook.Listen != "" {
		hookHandler, err := server.New(server.Options{Log: log, MaxRequestBytes: cfg.MaxRequestBytes, Ready: cluster, Metrics: meters, HideMetrics: true,
			Routes: []wire.Route{webhookRoute}, MaxInFlight: cfg.MaxInFlight})
		if err != nil {
			return err
		}
		hookSrv := newServer(cfg, hook.Listen, hookHandler)
		if hook.SelfSigned() {
			certs, err := admission.NewCerts(admission.CertsOptions{Log: log, Secrets: client.CoreV1(),
				Webhooks: client.AdmissionregistrationV1(), Secret: hook.Secret, Configuration: hook.Configuration,
				Hosts: admission.CertHosts(hook.Service, hook.Hosts)})
			if err != nil {
				return err
			}
			go certs.Run(ctx)
			hookCerts = certs.TLSConfig()
			hookSrv.TLSConfig = hookCerts
		} else {
			certs, err := server.NewCertReloader(log, hook.CertFile, hook.KeyFile, cfg.Reload.Interval.Duration)
			if err != nil {
				return err
			}
			hookSrv.TLSConfig = certs.TLSConfig()
		}
		servers = append(servers, hookSrv)
		if hook.Configuration != "" { // with offAfter 0 it keeps the calls on
			toggle, err = admission.NewSwitch(admission.SwitchOptions{Log: log, Webhooks: client.AdmissionregistrationV1(),
				Configuration: hook.Configuration, OffAfter: hook.OffAfter.Duration, Metrics: meters,
				Contended: queueContended, Leading: leading, JobPods: admission.JobPodsExpression(cfg.Gang.JobLabel)})
			if err != nil {
				return err
			}
			go toggle.Run(ctx)
		}
	}
	if cfg.TLS.Enabled() {
		tlsCfg := hookCerts // tls.selfKept (validated: the webhook keeps one)
		if !cfg.TLS.SelfKept {
			certs, err := server.NewCertReloader(log, cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.Reload.Interval.Duration)
			if err != nil {
				return err
			}
			tlsCfg = certs.TLSConfig()
		}
		if cfg.TLS.ClientCAFile != "" {
			tlsCfg = server.RequestClients(tlsCfg)
		}
		srv.TLSConfig = tlsCfg
	}
	if interval := cfg.Reload.Interval.Duration; src.path != "" && interval > 0 {
		reloader := config.NewConfigReloader(config.ConfigReloaderOptions{
			Log: log, Path: src.path, Current: cfg, Overlay: src.overlay,
			Receivers: []config.ModelReceiver{cluster, vc}, Metrics: meters,
		})
		go reloader.Run(ctx, interval)
	}

	serveErr := make(chan error, len(servers))
	for _, one := range servers {
		go func() {
			log.Info("serving", zap.String("listen", one.Addr), zap.Bool("https", one.TLSConfig != nil),
				zap.String("urlPrefix", cfg.URLPrefix), zap.String("volcanoPrefix", cfg.Volcano.URLPrefix))
			var err error
			if one.TLSConfig != nil {
				err = one.ListenAndServeTLS("", "") // the certificate comes from TLSConfig
			} else {
				err = one.ListenAndServe()
			}
			serveErr <- fmt.Errorf("serving on %s: %w", one.Addr, err)
		}()
	}
	syncErr := make(chan error, 1)
	go func() { syncErr <- cluster.Start(ctx) }()
	defer cluster.Shutdown()
	// The election begins once the view can decide: a leader evicts and lifts from its
	// queue. It outlives ctx, so that a leader on its way out still leads while it leaves the
	// gates (leaveGates), and then releases the Lease for a replica left to take at once.
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	campaign := make(chan struct{})
	go func() {
		defer close(campaign)
		for !cluster.Ready() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		if elector != nil {
			elector.Run(electCtx)
		}
	}()

	select {
	case err := <-serveErr:
		return err
	case err := <-syncErr:
		if err != nil && ctx.Err() == nil {
			return err
		}
	case <-ctx.Done():
	}
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}

	log.Info("shutting down", zap.Duration("timeout", cfg.ShutdownTimeout.Duration))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.Duration)
	defer cancel()
	leaveGates(shutdownCtx, log, leading(), toggle, client.AdmissionregistrationV1(), cfg.Webhook.Configuration, cluster, apiNudger)
	stopElection()
	<-campaign // the Lease is released
	for _, one := range servers {
		if err := one.Shutdown(shutdownCtx); err != nil {
			return fmt.Errorf("graceful shutdown of %s: %w", one.Addr, err)
		}
	}
	for range servers {
		if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	log.Info("stopped")
	return nil
}

// newServer is an HTTP server of handler on addr with the configured timeouts.
func newServer(cfg config.Config, addr string, handler http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout.Duration,
		ReadTimeout:       cfg.ReadTimeout.Duration,
		WriteTimeout:      cfg.WriteTimeout.Duration,
		IdleTimeout:       cfg.IdleTimeout.Duration,
	}
}

// configSource is where the configuration came from: the file, and the flags that
// override it (applied again over a reloaded file).
type configSource struct {
	path    string
	overlay func(config.Config) config.Config
}

// loadConfig reads the config file and applies the flags over it, then validates the
// result, reporting every problem at once.
func loadConfig(args []string, stderr io.Writer) (config.Config, configSource, error) {
	fs := flag.NewFlagSet("cps-extender", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "path of the YAML config file (optional; defaults apply); its model and affinity sections are reloaded when it changes")
	kubeconfig := fs.String("kubeconfig", "", "path of a kubeconfig file (default: in-cluster config)")
	listen := fs.String("listen", "", "listen address, host:port (overrides the config file)")
	urlPrefix := fs.String("url-prefix", "", "URL prefix of the scheduler verbs (overrides the config file)")
	logFormat := fs.String("log-format", "", "json (production, the default) or console (overrides the config file)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (overrides the config file)")
	if err := fs.Parse(args); err != nil {
		return config.Config{}, configSource{}, err
	}
	if fs.NArg() > 0 {
		return config.Config{}, configSource{}, fmt.Errorf("unexpected arguments: %v (subcommands: explain, ungate, version)", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	overlay := func(cfg config.Config) config.Config {
		if set["kubeconfig"] {
			cfg.Kubeconfig = *kubeconfig
		}
		if set["listen"] {
			cfg.Listen = *listen
		}
		if set["url-prefix"] {
			cfg.URLPrefix = *urlPrefix
		}
		if set["log-format"] {
			cfg.Log.Format = *logFormat
		}
		if set["log-level"] {
			cfg.Log.Level = *logLevel
		}
		return cfg
	}
	cfg, errs := config.LoadConfig(*configPath)
	cfg = overlay(cfg)
	src := configSource{path: *configPath, overlay: overlay}
	if errs = append(errs, cfg.Validate()...); len(errs) > 0 {
		return cfg, src, fmt.Errorf("invalid configuration (%s):\n%w", *configPath, errors.Join(errs...))
	}
	return cfg, src, nil
}

// newMetrics builds the extender's metrics on a private registry, with the Go runtime and
// process collectors.
func newMetrics() *metrics.Metrics {
	reg := prometheus.NewRegistry()
	// Beside the defaults: the live heap after the last collection (go_gc_heap_live_bytes),
	// what a memory limit must hold, and the last cycle in which the GC's CPU limiter let
	// the heap past GOMEMLIMIT (go_gc_limiter_last_enabled_gc_cycle).
	goRuntime := collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{
		Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$|^/gc/limiter/last-enabled:gc-cycle$`),
	})
	reg.MustRegister(collectors.NewGoCollector(goRuntime), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return metrics.New(reg)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig given and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

func newLogger(c config.LogConfig) (*zap.Logger, error) {
	var zc zap.Config
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	} else {
		zc = zap.NewProductionConfig()
	}
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	return zc.Build()
}
