//go:build race

package view

// defaultIncrementalSequences is fewer under the race detector, which slows each ten times.
const defaultIncrementalSequences = 200
