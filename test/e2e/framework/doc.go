// Package framework runs a real, local Kubernetes control plane for end-to-end tests: etcd,
// kube-apiserver and kwok (fake nodes and pod lifecycles, no kubelet), plus kube-scheduler and
// any binary under test, all as child processes on free 127.0.0.1 ports.
//
// A test starts a control plane, adds nodes, starts a scheduler and drives pods with client-go:
//
//	func TestMain(m *testing.M) { framework.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		cp := framework.Start(t, framework.Options{})
//		cp.AddNodes(t, framework.Nodes("node", 3, "4", "8Gi")...)
//		cp.StartScheduler(t, []byte(config)) // a KubeSchedulerConfiguration naming cp.Kubeconfig
//		// create pods with cp.Client, then framework.WaitFor(...) and framework.PodPlacements(...)
//	}
//
// The binaries come from BinDir: $CPS_CONTROLPLANE_BIN, or test/tools/build-controlplane.sh.
//
// # Isolation
//
// Every control plane has its own scratch folder, etcd and ports, so tests may run in parallel
// (t.Parallel); each costs about a core for a few seconds while it starts. There is no
// controller-manager unless a test starts one (StartControllerManager, with the controllers it
// names): by default nothing garbage-collects, runs Jobs, finalises namespaces or creates
// service accounts, and tests delete what they create when it matters.
//
// # Workload controllers
//
// The real operators come from ControllersBinDir ($CPS_CONTROLLERS_BIN, or
// test/tools/build-controllers.sh): kube-controller-manager, the Kubeflow training-operator
// (InstallTrainingOperator, StartTrainingOperator) and JobSet (InstallJobSet, StartJobSet).
// Install the CRDs before starting kube-controller-manager, so that its garbage collector
// watches them from the start. The training-operator's certificate rotator insists on
// TrainingOperatorCertDir, a fixed folder every test shares (StartTrainingOperator puts a
// pair there under a lock if none is valid).
//
// The optional operators come from ControllersExtraBinDir ($CPS_CONTROLLERS_EXTRA_BIN, or
// test/tools/build-controllers-extra.sh): Kubeflow Trainer v2 (InstallTrainer, StartTrainer,
// InstallTrainingRuntimes; it needs JobSet running, and shares TrainingOperatorCertDir) and
// LeaderWorkerSet (InstallLWS, StartLWS; kube-controller-manager with LWSKubeControllers, the
// StatefulSet controller among them). Their webhooks are registered as the releases ship them
// (WebhookConfigs), pointed at the process by URL.
//
// # Process lifetime
//
// Every child runs in its own process group and is stopped by the test's cleanup, in reverse
// start order: SIGTERM to the group, SIGKILL after StopGracePeriod. If the test binary is
// interrupted, Main's signal handler (KillAllOnSignal) kills every group first. If the test
// binary dies without running any handler (SIGKILL, a crash, a -timeout panic), each child
// still gets SIGKILL from the kernel: children are started with Pdeathsig, which fires when the
// OS thread that forked them exits. Because of that per-thread semantics, all children are
// forked by a single goroutine locked to its OS thread for the life of the binary (see
// registry.spawn); forking from an ordinary goroutine could kill a child in mid-test when the
// Go runtime retires the thread it happened to run on.
package framework
