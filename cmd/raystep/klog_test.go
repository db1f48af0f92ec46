package main

import (
	"errors"
	"strings"
	"testing"
)

// TestKubernetesLogAtDebug: what the Kubernetes client libraries log (a
// port-forward's refused connection while a notebook starts, client-side
// throttling) reaches stderr only with RAYSTEP_LOG_LEVEL=debug, as a
// debug line, and their verbose traces never.
func TestKubernetesLogAtDebug(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level string
		want  []string
	}{
		{"info", nil},
		{"warn", nil},
		{"debug", []string{"DEBUG\tkubernetes\tUnhandled Error\t", "connection refused", "DEBUG\tkubernetes\tWaited for 1s due to client-side throttling"}},
	} {
		var stderr strings.Builder
		log, err := newLogger(tc.level, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		l := kubernetesLogger(log)
		l.Error(errors.New("an error occurred forwarding 37157 -> 33559: dial tcp 127.0.0.1:33559: connect: connection refused"), "Unhandled Error")
		l.Info("Waited for 1s due to client-side throttling")
		l.V(4).Info("GET https://10.0.0.1:6443/api/v1/pods 200 OK")
		got := stderr.String()
		if tc.want == nil && got != "" {
			t.Errorf("RAYSTEP_LOG_LEVEL=%s: stderr %q, want nothing", tc.level, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("RAYSTEP_LOG_LEVEL=%s: stderr %q, want %q in it", tc.level, got, w)
			}
		}
		if strings.Contains(got, "200 OK") || strings.Contains(got, "ERROR") {
			t.Errorf("RAYSTEP_LOG_LEVEL=%s: stderr %q has a verbose trace or an error level", tc.level, got)
		}
	}
}
