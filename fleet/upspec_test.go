package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/raystep/raystep/schemas"
)

// TestDefaultClusterName: the name of an owner's cluster is a DNS-1035
// label of at most 40 characters, whatever the owner's label value holds.
func TestDefaultClusterName(t *testing.T) {
	t.Parallel()
	tests := []struct{ owner, want string }{
		{"alice", "ray-alice"},
		{"Ads_Ranking.team", "ray-ads-ranking-team"},
		{"0xdead", "ray-0xdead"},
		{"a-very-long-owner-name-that-goes-on-and-on-forever", "ray-a-very-long-owner-name-that-goes-on"},
		{"trailing-team-with-a-dash-at-forty-one-x", "ray-trailing-team-with-a-dash-at-forty-o"},
		{"x-------------------------------------------y", "ray-x"},
	}
	for _, tt := range tests {
		if got := DefaultClusterName(tt.owner); got != tt.want {
			t.Errorf("DefaultClusterName(%q) = %q, want %q", tt.owner, got, tt.want)
		}
	}
}

// TestIdleness: --idle and --idle-stop are checked against each other,
// the cluster's life and the profile's defaults; what could never act is
// refused with the flag (or the profile field) it came from.
func TestIdleness(t *testing.T) {
	t.Parallel()
	profile := &schemas.Profile{Metadata: schemas.ProfileMetadata{Name: "gpu-pool"}}
	withDefaults := &schemas.Profile{Metadata: schemas.ProfileMetadata{Name: "gpu-pool"},
		Spec: schemas.ProfileSpec{Interactive: schemas.Interactive{Idle: "30m", IdleStop: "2h"}}}
	tests := []struct {
		name       string
		p          *schemas.Profile
		idle, stop string
		want       Idle
		err        string
	}{
		{"none", profile, "", "", Idle{}, ""},
		{"profile", withDefaults, "", "", Idle{Release: 30 * time.Minute, Stop: 2 * time.Hour}, ""},
		{"flags win", withDefaults, "10m", "off", Idle{Release: 10 * time.Minute}, ""},
		{"off", withDefaults, "off", "off", Idle{}, ""},
		{"zero", profile, "0", "", Idle{}, "up: --idle 0: must be positive (--idle off keeps the cluster as it is while idle)"},
		{"negative", profile, "-5m", "", Idle{}, "up: --idle -5m: must be positive (--idle off keeps the cluster as it is while idle)"},
		{"not a duration", profile, "soon", "", Idle{}, "up: --idle soon: want a duration such as 30m, or off"},
		{"fraction", profile, "1.5s", "", Idle{}, "up: --idle 1.5s: want a whole number of seconds"},
		{"past ttl", profile, "5h", "", Idle{}, "up: --idle 5h0m0s is not shorter than the cluster's life (4h0m0s): it would never release its GPUs; pass a shorter --idle, or --idle off"},
		{"stop past ttl", profile, "", "4h", Idle{}, "up: --idle-stop 4h0m0s is not shorter than the cluster's life (4h0m0s): it expires first; pass a shorter --idle-stop, or --idle-stop off"},
		{"stop before release", profile, "1h", "30m", Idle{}, "up: --idle-stop 30m0s is not longer than --idle 1h0m0s: the cluster would be deleted before its GPUs are released"},
		{"stop before profile's release", withDefaults, "", "20m", Idle{},
			"up: --idle-stop 20m0s is not longer than the default of profile gpu-pool (spec.interactive.idle) 30m0s: the cluster would be deleted before its GPUs are released"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			given := map[string]bool{"idle": tt.idle != "", "idle-stop": tt.stop != ""}
			r := UpRequest{Idle: tt.idle, IdleStop: tt.stop, Profile: tt.p, Given: func(f string) bool { return given[f] }}
			got, err := r.Idleness(4 * time.Hour)
			msg := ""
			if err != nil {
				msg = err.Error()
				if !errors.Is(err, ErrUsage) {
					t.Errorf("error %v is not a usage error (exit 2)", err)
				}
			}
			if got != tt.want || msg != tt.err {
				t.Errorf("Idleness = %+v, %q; want %+v, %q", got, msg, tt.want, tt.err)
			}
		})
	}
}
