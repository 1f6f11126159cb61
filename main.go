// Command cps-extender is a Kubernetes scheduler extender that schedules distributed
// machine-learning jobs (parameter servers + workers) by a combined priority.
//
//	cps-extender --config=/etc/cps-extender/config.yaml [--kubeconfig=...] [--listen=:8888] [--url-prefix=/scheduler]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cps-extender/cps-extender/extender"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cps-extender:", err)
		os.Exit(1)
	}
}

// run parses the configuration, wires the parts, and serves until SIGTERM or SIGINT.
func run(args []string, stderr io.Writer) error {
	cfg, err := loadConfig(args, stderr)
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
	// leaving it partly bound meanwhile (clientQPS/clientBurst, see extender/config.go).
	restCfg.QPS, restCfg.Burst = cfg.ClientQPS, cfg.ClientBurst
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("building the API client: %w", err)
	}

	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("building the dynamic API client: %w", err)
	}
	cluster := extender.NewCluster(extender.ClusterOptions{Log: log, Client: client, Dynamic: dyn, Config: cfg})
	gate := extender.NewGate(extender.GateOptions{
		Log: log, View: cluster, Binder: extender.NewAPIBinder(client, cfg.BindTimeout.Duration), Config: cfg.Gate,
	})
	cluster.SetHolds(gate)
	verbs, err := extender.NewSchedulerVerbs(log, cluster, gate)
	if err != nil {
		return err
	}
	volcano, err := extender.NewVolcanoVerbs(log, cfg.Volcano, cfg.Model.PriorityModel(), cfg.Affinity, cfg.Gang, time.Now)
	if err != nil {
		return err
	}
	handler, err := extender.NewServer(extender.ServerOptions{
		Log: log, URLPrefix: cfg.URLPrefix, MaxRequestBytes: cfg.MaxRequestBytes, Ready: cluster, Scheduler: verbs, Queue: cluster,
		Volcano: volcano,
	})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Addr:              cfg.Listen,
		Handler:           handler,
		ReadHeaderTimeout: cfg.ReadTimeout.Duration,
		ReadTimeout:       cfg.ReadTimeout.Duration,
		WriteTimeout:      cfg.WriteTimeout.Duration,
	}

	serveErr := make(chan error, 1)
	go func() {
		log.Info("serving", zap.String("listen", cfg.Listen), zap.String("urlPrefix", cfg.URLPrefix), zap.String("volcanoPrefix", cfg.Volcano.URLPrefix))
		serveErr <- srv.ListenAndServe()
	}()
	syncErr := make(chan error, 1)
	go func() { syncErr <- cluster.Start(ctx) }()
	defer cluster.Shutdown()

	select {
	case err := <-serveErr:
		return fmt.Errorf("serving on %s: %w", cfg.Listen, err)
	case err := <-syncErr:
		if err != nil && ctx.Err() == nil {
			return err
		}
	case <-ctx.Done():
	}
	select {
	case err := <-serveErr:
		return fmt.Errorf("serving on %s: %w", cfg.Listen, err)
	case <-ctx.Done():
	}

	log.Info("shutting down", zap.Duration("timeout", cfg.ShutdownTimeout.Duration))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.Duration)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("graceful shutdown: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// loadConfig reads the config file and applies the flags over it, then validates the
// result, reporting every problem at once.
func loadConfig(args []string, stderr io.Writer) (extender.Config, error) {
	fs := flag.NewFlagSet("cps-extender", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "path of the YAML config file (optional; defaults apply)")
	kubeconfig := fs.String("kubeconfig", "", "path of a kubeconfig file (default: in-cluster config)")
	listen := fs.String("listen", "", "listen address, host:port (overrides the config file)")
	urlPrefix := fs.String("url-prefix", "", "URL prefix of the scheduler verbs (overrides the config file)")
	logFormat := fs.String("log-format", "", "json or console (overrides the config file)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (overrides the config file)")
	if err := fs.Parse(args); err != nil {
		return extender.Config{}, err
	}
	if fs.NArg() > 0 {
		return extender.Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg, errs := extender.LoadConfig(*configPath)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
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
	if errs = append(errs, cfg.Validate()...); len(errs) > 0 {
		return cfg, fmt.Errorf("invalid configuration (%s):\n%w", *configPath, errors.Join(errs...))
	}
	return cfg, nil
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

func newLogger(c extender.LogConfig) (*zap.Logger, error) {
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
