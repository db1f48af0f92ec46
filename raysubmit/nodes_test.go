package raysubmit_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/raystep/raystep/raysubmit"
)

// TestNodes: the alive nodes of Ray 2.60's /nodes?view=summary (its
// fields trimmed to those raystep reads), each with the moment its
// reporter took the figures; a dead node is left out, and a node without
// that moment has a zero At.
func TestNodes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/nodes" || r.URL.Query().Get("view") != "summary" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"result": true, "msg": "Node summary fetched.", "data": {"summary": [
			{"now": 1796659212.969473, "hostname": "h", "ip": "10.0.0.1", "cpu": 8.1,
			 "mem": [16000000000, 15600000000, 2.5, 400000000], "gpus": [],
			 "raylet": {"nodeId": "aa", "state": "ALIVE", "isHeadNode": true}},
			{"now": 1796659210.5, "hostname": "", "ip": "10.0.0.2", "cpu": 50,
			 "mem": [16000000000, 8000000000, 50, 8000000000],
			 "gpus": [{"utilizationGpu": 90}, {"utilizationGpu": 70}, {"utilizationGpu": null}],
			 "raylet": {"nodeId": "bb", "state": "ALIVE", "isHeadNode": false}},
			{"now": 1796659200, "hostname": "gone", "cpu": 0, "mem": [1, 1, 0, 0],
			 "raylet": {"nodeId": "cc", "state": "DEAD"}},
			{"hostname": "", "ip": "", "cpu": 1, "raylet": {"nodeId": "dd", "state": "ALIVE"}}
		]}}`)
	}))
	defer srv.Close()
	got, err := newClient(t, srv.URL).Nodes(t.Context())
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	want := []raysubmit.NodeStats{
		{Name: "h (head)", CPU: 8.1, Mem: 2.5, GPU: -1, At: time.Unix(1796659212, 969473000)},
		{Name: "10.0.0.2", CPU: 50, Mem: 50, GPU: 80, At: time.Unix(1796659210, 500000000)},
		{Name: "dd", CPU: 1, GPU: -1},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool {
		return a.Sub(b).Abs() < time.Microsecond
	})); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}
