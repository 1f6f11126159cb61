// Package eval is the pure part of the evaluation (`make eval`): a seeded workload generator
// shaped after public ML cluster traces, the communication model that turns a placement into a
// run time, the per-job and per-run metrics computed from recorded timelines, and the report
// (markdown tables, CSV, PNG plots). It starts no process and reads no clock: the harness in
// test/eval/harness drives a real control plane, records what happened, and hands the record
// to this package.
//
// # Time
//
// The workload is written in simulated time. A run replays it scaled by Scale: one simulated
// minute per real second. Every figure in the report is in simulated minutes.
//
// # Seeds
//
// One workload is one draw: a setup can look better or worse on it by luck. `make eval` runs
// every setup on several workloads, seed i drawn with the size's seed + i (see
// Params.Seeded), and the report gives each figure's mean over the seeds with its 95%
// confidence interval by Student's t (see MeanInterval), and each setup's per-seed
// difference from the default setup with its interval (see SetupSeeds.PairedWith): every
// setup ran the same workloads, so the paired difference is clear of the spread between
// workloads.
//
// # Communication model
//
// A PS/worker job trains asynchronously (TensorFlow's ParameterServerStrategy default): each
// worker pulls parameters from and pushes gradients to the parameter servers on its own, so
// the job's progress is the sum of its workers' rates and its slowdown is the mean of their
// slowdowns. A worker's slowdown depends on where it sits relative to the nearest PS of its
// job:
//
//	same node as a PS      1.00  (loopback)
//	same rack as a PS      1.15  (one top-of-rack switch hop)
//	another rack           1.40  (through the aggregation layer, oversubscribed)
//
// A job's run time is its base duration times the mean factor over its workers (see
// RunFactor). The factors are assumptions of the same order as the communication share of
// PS training reported in the literature, not measurements; the ordering is what matters.
package eval
