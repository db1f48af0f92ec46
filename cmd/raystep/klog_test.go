package main

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"k8s.io/klog/v2"
)

// TestKubernetesLogAtDebug: what the Kubernetes client libraries log (a
// port-forward's refused connection while a notebook starts, client-side
// throttling) reaches stderr only with RAYSTEP_LOG_LEVEL=debug, as a
// debug line, and their verbose traces never. Not parallel: klog's logger
// is the process's, and the parallel tests' commands swap it.
func TestKubernetesLogAtDebug(t *testing.T) {
	for _, tc := range []struct {
		level string
		want  []string
	}{
		{"info", nil},
		{"warn", nil},
		{"debug", []string{"DEBUG\tkubernetes\tUnhandled Error\t", "connection refused", "DEBUG\tkubernetes\tWaited for 1s due to client-side throttling"}},
	} {
		var stderr strings.Builder
		setKubernetesLogger(mustLogger(t, tc.level, &stderr))
		klog.ErrorS(errors.New("an error occurred forwarding 37157 -> 33559: dial tcp 127.0.0.1:33559: connect: connection refused"), "Unhandled Error")
		klog.Infof("Waited for %v due to client-side throttling", "1s")
		klog.V(4).Info("GET https://10.0.0.1:6443/api/v1/pods 200 OK")
		klog.Background().V(4).Info("GET https://10.0.0.1:6443/api/v1/pods 200 OK")
		klog.Flush()
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
	setKubernetesLogger(mustLogger(t, "info", io.Discard))
}

// TestKubernetesLoggerWhileLogging: a command that starts while an earlier
// one's watch still logs through klog (in one process, as these tests run
// commands) changes where klog writes without a data race; the race
// detector fails this test if it does not.
func TestKubernetesLoggerWhileLogging(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				klog.Info("watch of pods closed")
				klog.Background().WithValues("reflector", "pods").Info("watch of pods closed")
			}
		}
	}()
	for range 200 {
		setKubernetesLogger(mustLogger(t, "debug", io.Discard))
	}
	close(stop)
	wg.Wait()
}

func mustLogger(t *testing.T, level string, w io.Writer) *zap.Logger {
	t.Helper()
	log, err := newLogger(level, w)
	if err != nil {
		t.Fatal(err)
	}
	return log
}
