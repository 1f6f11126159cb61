//go:build !race

package view

// defaultIncrementalSequences is how many random sequences TestIncrementalMatchesFull runs.
const defaultIncrementalSequences = 1500
