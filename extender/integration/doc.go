// Package integration holds the tests and benchmarks that run the extender's parts together
// in one process: the cluster view over a fake clientset, the gate, the kube-scheduler and
// Volcano verbs, and the HTTP server, driven through their HTTP answers (the end-to-end
// tests in test/e2e run them against a real control plane). It has no code of its own.
package integration
