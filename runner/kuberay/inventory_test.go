package kuberay

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raystep/raystep/fleet"
)

func TestListOutputGolden(t *testing.T) {
	t.Parallel()
	running := rayJobAt("raystep-ads-ranking-train-3f2a9c1b7d0e", 90*time.Minute, rayv1.RayJobStatus{
		JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, JobStatus: rayv1.JobStatusRunning,
		RayClusterName: "raystep-ads-ranking-train-3f2a9c1b7d0e-x7k2p", DashboardURL: "raystep-ads-ranking-train-3f2a9c1b7d0e-x7k2p-head-svc.ml-ads.svc.cluster.local:8265"})
	fresh := rayJobAt("raystep-ads-ranking-eval-0c1d2e3f4a5b", 40*time.Second, rayv1.RayJobStatus{})
	fresh.Namespace = "ml-search"
	fresh.Labels[LabelKind] = "eval"
	delete(fresh.Annotations, AnnotationGPUs)
	// Queued in Kueue: KubeRay named a RayCluster it never created.
	queued := rayJobAt("raystep-ads-ranking-batch-9a8b7c6d5e4f", 3*time.Minute, rayv1.RayJobStatus{
		JobDeploymentStatus: rayv1.JobDeploymentStatusSuspended, JobStatus: rayv1.JobStatusNew})
	queued.Labels[LabelQueueName] = "a100"
	queued.Spec.Suspend = true
	// An interactive cluster (raystep up), ready, expiring in 3h.
	dev := clusterAt("alice-dev", 25*time.Minute, "2026-11-30T15:00:00Z")
	dev.Status = rayv1.RayClusterStatus{State: rayv1.Ready, Head: rayv1.HeadInfo{ServiceName: "alice-dev-head-svc"}}
	rows := []fleet.Record{Summarize(running), Summarize(fresh), Summarize(queued), SummarizeCluster(dev)}
	tests := []struct {
		golden string
		write  func(*bytes.Buffer) error
	}{
		{"ls.txt", func(b *bytes.Buffer) error { return fleet.WriteTable(b, rows, fleet.TableOptions{Now: gcNow}) }},
		{"ls-A-wide.txt", func(b *bytes.Buffer) error {
			return fleet.WriteTable(b, rows, fleet.TableOptions{Now: gcNow, AllNamespaces: true, Wide: true})
		}},
		{"ls.json", func(b *bytes.Buffer) error { return fleet.WriteJSON(b, rows) }},
		{"ls-empty.json", func(b *bytes.Buffer) error { return fleet.WriteJSON(b, nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.write(&b); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run go test -update): %v", err)
			}
			if diff := cmp.Diff(string(want), b.String()); diff != "" {
				t.Errorf("%s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// clusterAt is an interactive RayCluster created ago before gcNow that
// expires at expires ("" for no annotation).
func clusterAt(name string, ago time.Duration, expires string) *rayv1.RayCluster {
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID(name + "-uid"),
		CreationTimestamp: metav1.NewTime(gcNow.Add(-ago)),
		Labels:            map[string]string{LabelManagedBy: ManagedByRaystep, LabelOwner: "alice", LabelKind: KindInteractive},
		Annotations:       map[string]string{AnnotationGPUs: "a100-80gb=1"}}}
	if expires != "" {
		rc.Annotations[AnnotationExpires] = expires
	}
	return rc
}
