package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
)

// TestKuberayBackendDashboard: raystep uses the head service's DNS name
// only when it talks to the API server as its pod's service account (a pod
// given a kubeconfig for another cluster port-forwards, though Kubernetes
// set KUBERNETES_SERVICE_HOST), and not when told so; the port-forward's
// give-up comes from RAYSTEP_PORT_FORWARD_GIVE_UP.
func TestKuberayBackendDashboard(t *testing.T) {
	t.Parallel()
	spec, profile := trainSpec(t)
	tests := []struct {
		name          string
		inClusterConf bool
		env           map[string]string
		wantInCluster bool
		wantGiveUp    time.Duration
	}{
		{"pod's service account", true, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, true, 2 * time.Minute},
		{"kubeconfig in a pod", false, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, false, 2 * time.Minute},
		{"turned off", true, map[string]string{"RAYSTEP_DASHBOARD_IN_CLUSTER": "false"}, false, 2 * time.Minute},
		{"give-up", false, map[string]string{"RAYSTEP_PORT_FORWARD_GIVE_UP": "15s"}, false, 15 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := &app{lookup: envconfig.MapLookuper(tt.env)}
			var err error
			if a.cfg, err = loadConfig(t.Context(), a.lookup); err != nil {
				t.Fatal(err)
			}
			s := a.kubeSite(a.runCommand(), "run")
			s.Connect = func() (*kuberay.Clients, error) { return &kuberay.Clients{InCluster: tt.inClusterConf}, nil }
			_, got, err := s.Place(t.Context(), runner.Step{Name: "x"}, fleet.Placement{Spec: spec, Profile: profile})
			if err != nil {
				t.Fatal(err)
			}
			b, ok := got.(*kuberay.Backend)
			if !ok {
				t.Fatal("not a *kuberay.Backend")
			}
			if b.Dashboard.InCluster != tt.wantInCluster || b.PortForwardGiveUp != tt.wantGiveUp {
				t.Errorf("InCluster %v, PortForwardGiveUp %s; want %v, %s", b.Dashboard.InCluster, b.PortForwardGiveUp, tt.wantInCluster, tt.wantGiveUp)
			}
		})
	}
}

// TestKuberayBorrowRefusesABadName: run --cluster with a name no
// RayCluster can have is the user's mistake (exit 2), found before
// anything asks the API server.
func TestKuberayBorrowRefusesABadName(t *testing.T) {
	t.Parallel()
	spec, profile := trainSpec(t)
	a := &app{lookup: envconfig.MapLookuper(map[string]string{})}
	var err error
	if a.cfg, err = loadConfig(t.Context(), a.lookup); err != nil {
		t.Fatal(err)
	}
	s := a.kubeSite(a.runCommand(), "run")
	s.Connect = func() (*kuberay.Clients, error) { return &kuberay.Clients{}, nil } // no API server: nothing may ask it
	_, _, err = s.Place(t.Context(), runner.Step{Name: "x"}, fleet.Placement{Spec: spec, Profile: profile, Cluster: "Alice_Dev"})
	if code := exitCode(t.Context(), err); code != exitUsage || !strings.Contains(err.Error(), `run --cluster: "Alice_Dev" is not a cluster name`) {
		t.Errorf("run --cluster Alice_Dev: exit %d, %v; want %d naming the name", code, err, exitUsage)
	}
}

// trainSpec loads the example train spec under the built-in profile.
func trainSpec(t *testing.T) (*schemas.Spec, *schemas.Profile) {
	t.Helper()
	spec, err := schemas.Load(train, schemas.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	profile, err := schemas.DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	return spec, profile
}
