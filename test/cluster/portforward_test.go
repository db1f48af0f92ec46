package cluster

import (
	"bufio"
	"io"
	"net"
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// echoServer answers every line with the same line until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line over c and returns what comes back.
func roundTrip(c net.Conn) (string, error) {
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// TestKubeletRelay: connections pass through; a cut closes the open ones
// and leaves new ones working; once shut, every new one is closed.
func TestKubeletRelay(t *testing.T) {
	r, err := startKubeletRelay(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.stop()
	addr := r.ln.Addr().String()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	open := dial()
	if got, err := roundTrip(open); err != nil || got != "ping\n" {
		t.Fatalf("through the relay: %q, %v", got, err)
	}
	if n := r.cut(); n != 2 {
		t.Errorf("cut %d connections, want 2 (in and out)", n)
	}
	if _, err := roundTrip(open); err == nil {
		t.Errorf("a cut connection still answers")
	}
	if got, err := roundTrip(dial()); err != nil || got != "ping\n" {
		t.Errorf("after a cut, a new connection: %q, %v", got, err)
	}
	r.shut()
	if _, err := roundTrip(dial()); err == nil {
		t.Errorf("a shut relay answers")
	}
}

// TestDashboardForward: kwok's ClusterPortForward sends port 8265 of every
// pod to the dashboard's host and port.
func TestDashboardForward(t *testing.T) {
	dir := t.TempDir()
	path, err := writeDashboardForward(dir, "http://127.0.0.1:43225")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
		Spec       struct {
			Selector *struct{} `json:"selector"`
			Forwards []struct {
				Ports  []int `json:"ports"`
				Target struct {
					Address string `json:"address"`
					Port    int    `json:"port"`
				} `json:"target"`
			} `json:"forwards"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &got); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	f := got.Spec.Forwards
	if got.APIVersion != "kwok.x-k8s.io/v1alpha1" || got.Kind != "ClusterPortForward" || got.Spec.Selector != nil || len(f) != 1 || len(f[0].Ports) != 1 ||
		f[0].Ports[0] != 8265 || f[0].Target.Address != "127.0.0.1" || f[0].Target.Port != 43225 {
		t.Errorf("forward:\n%s", data)
	}
	if path, err := writeDashboardForward(dir, ""); path != "" || err != nil {
		t.Errorf("without a dashboard: %q, %v; want no forward", path, err)
	}
}
