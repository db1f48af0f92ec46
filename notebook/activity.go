package notebook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Activity is what a cluster was last seen doing, as idle release judges
// it: Busy says why it is in use now (empty when it is not), Last is the
// latest moment it is known to have been in use (zero when never).
type Activity struct {
	Busy string
	Last time.Time
}

// Merge returns the activity of a and b together: busy when either is,
// last used when the later of the two was.
func (a Activity) Merge(b Activity) Activity {
	if a.Busy == "" {
		a.Busy = b.Busy
	}
	if b.Last.After(a.Last) {
		a.Last = b.Last
	}
	return a
}

// kernel is one entry of Jupyter's GET /api/kernels.
type kernel struct {
	ID             string    `json:"id"`
	ExecutionState string    `json:"execution_state"`
	LastActivity   time.Time `json:"last_activity"`
}

// ServerActivity asks the Jupyter server at base, with its token, what
// its users did: a kernel that executes code is busy, and the server's
// own last_activity (API requests, kernel messages, terminals: Jupyter's
// activity record) is when it was last used. Both requests carry
// no_track_activity, so asking is not counted as use.
func ServerActivity(ctx context.Context, hc *http.Client, base string, s Server) (Activity, error) {
	get := func(path string, out any) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+path+"?no_track_activity=1", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "token "+s.Token)
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("ask the notebook for %s: %w", path, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("ask the notebook for %s: %s", path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("ask the notebook for %s: %w", path, err)
		}
		return nil
	}
	var status struct {
		LastActivity time.Time `json:"last_activity"`
	}
	if err := get("/api/status", &status); err != nil {
		return Activity{}, err
	}
	var kernels []kernel
	if err := get("/api/kernels", &kernels); err != nil {
		return Activity{}, err
	}
	a := Activity{Last: status.LastActivity}
	for _, k := range kernels {
		if k.LastActivity.After(a.Last) {
			a.Last = k.LastActivity
		}
		if k.ExecutionState == "busy" && a.Busy == "" {
			a.Busy = "notebook kernel " + k.ID + " is busy"
		}
	}
	return a, nil
}
