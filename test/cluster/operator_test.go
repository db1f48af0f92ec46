package cluster

import (
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDashboardLabelValue(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, want string }{
		{"http://127.0.0.1:8265", "127.0.0.1_8265"},
		{"http://127.3.4.5:38595", "127.3.4.5_38595"},
		{"http://10.0.0.1:8265", ""},
		{"https://127.0.0.1:8265", ""},
		{"http://localhost:8265", ""},
		{"127.0.0.1:8265", ""},
	}
	for _, tt := range tests {
		got, err := DashboardLabelValue(tt.url)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("DashboardLabelValue(%q) = %q, %v; want %q", tt.url, got, err, tt.want)
		}
	}
}

// TestDashboardLabelRefusesOtherHosts: the operator's dashboard client
// never leaves loopback, whatever a RayCluster's label says.
func TestDashboardLabelRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	get := dashboardProvider{}.GetDashboardClient(t.Context(), nil)
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: "ns",
		Labels: map[string]string{DashboardLabel: "10.0.0.1_8265"}}}
	if _, err := get(rc, ""); err == nil {
		t.Errorf("a dashboard client for %s: want a refusal", rc.Labels[DashboardLabel])
	}
}
