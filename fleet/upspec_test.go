package fleet

import "testing"

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
