// Package local is raystep's embedded backend: a Ray head started and owned by
// the step on this machine (or an existing cluster named by RAY_ADDRESS).
//
// The head itself is launched, watched and stopped by package rayhead; this
// package decides when a step gets one, reaches an existing cluster instead
// (address.go), and turns either into a runner.Cluster.
package local
