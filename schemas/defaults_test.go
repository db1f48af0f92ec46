package schemas

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSchemaDefaultsMatchCode keeps the defaults the schema documents equal
// to the ones Load applies.
func TestSchemaDefaultsMatchCode(t *testing.T) {
	t.Parallel()
	var doc struct {
		Properties struct {
			Spec struct {
				Properties struct {
					Cluster struct {
						Properties struct {
							Head struct {
								Properties map[string]struct {
									Default string `json:"default"`
								} `json:"properties"`
							} `json:"head"`
						} `json:"properties"`
					} `json:"cluster"`
					Timeouts struct {
						Properties map[string]struct {
							Default string `json:"default"`
						} `json:"properties"`
					} `json:"timeouts"`
					Teardown struct {
						Default string `json:"default"`
					} `json:"teardown"`
				} `json:"properties"`
			} `json:"spec"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(JobSpecSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	p := doc.Properties.Spec.Properties
	got := []string{
		p.Cluster.Properties.Head.Properties["cpus"].Default, p.Cluster.Properties.Head.Properties["memory"].Default,
		p.Timeouts.Properties["provision"].Default, p.Timeouts.Properties["run"].Default,
		p.Timeouts.Properties["ttlAfterFinished"].Default, p.Teardown.Default,
	}
	want := []string{defaultHeadCPUs, defaultHeadMemory, defaultProvision, defaultRun, defaultTTL, string(TeardownAlways)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schema defaults (-code +schema):\n%s", diff)
	}
}
