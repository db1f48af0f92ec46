// Package local is raystep's embedded backend: a Ray head started and owned by
// the step on this machine (or an existing cluster named by RAY_ADDRESS), and
// interactive clusters: detached private heads that outlive the raystep that
// started them and stop themselves at their expiry.
//
// The head itself is launched, watched and stopped by package rayhead; this
// package decides when a step gets one, reaches an existing cluster instead
// (address.go), and turns either into a runner.Cluster. Clusters
// (interactive.go) brings interactive clusters up, lists and stops them, by
// the records it keeps in a state dir (records.go); the commands that print
// them and their flags are raystep's.
package local
