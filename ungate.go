package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cps-extender/cps-extender/extender/gang"
	"github.com/cps-extender/cps-extender/extender/turns"
)

// runUngate is `cps-extender ungate`: it lifts the extender's scheduling gate
// (cps-extender.io/turn) from the pods that carry it, and nothing else (other systems'
// gates stay), for when no extender will: it was uninstalled, or is down for good. The
// pods then go to their scheduler as any pod does.
func runUngate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cps-extender ungate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "path of a kubeconfig file (default: in-cluster config)")
	namespace := fs.String("namespace", "", "lift the gates of this namespace's pods")
	all := fs.Bool("all", false, "lift the gates of every namespace's pods")
	timeout := fs.Duration("timeout", 10*time.Second, "how long one API call may take")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cps-extender ungate [--kubeconfig=FILE] (--namespace=NS | --all)")
		fmt.Fprintln(stderr, "Lifts the scheduling gate "+gang.TurnGate+" from the pods that carry it; other gates stay.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("ungate: unexpected arguments: %v", fs.Args())
	case (*namespace == "") == !*all:
		return errors.New("ungate: give --namespace=NS or --all (and not both)")
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return fmt.Errorf("ungate: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("ungate: the API client: %w", err)
	}
	return ungate(context.Background(), client, *namespace, *timeout, stdout)
}

// ungate lifts gang.TurnGate from every pod of namespace ("" for all) that carries it.
func ungate(ctx context.Context, client kubernetes.Interface, namespace string, timeout time.Duration, stdout io.Writer) error {
	lctx, cancel := context.WithTimeout(ctx, 4*timeout)
	defer cancel()
	pods, err := client.CoreV1().Pods(namespace).List(lctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("ungate: listing pods: %w", err)
	}
	lifter := turns.NewAPINudger(client, timeout)
	var failed []error
	lifted := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		if turn, _ := gang.SchedulingGates(pod); !turn {
			continue
		}
		ref := gang.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
		if err := lifter.Ungate(ctx, ref); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", ref, err))
			continue
		}
		lifted++
		fmt.Fprintf(stdout, "lifted %s from %s\n", gang.TurnGate, ref)
	}
	fmt.Fprintf(stdout, "%d pods lifted, %d failed\n", lifted, len(failed))
	if len(failed) > 0 {
		return fmt.Errorf("ungate: %w", errors.Join(failed...))
	}
	return nil
}
