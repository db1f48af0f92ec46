package local

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raystep/raystep/rayhead"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/test/fakeray"
)

// TestPrivateClusterReportsItsHeadsEnd kills `ray start` under a private
// cluster: the step hears of it, and Teardown still succeeds, since the
// keeper cleaned up already.
func TestPrivateClusterReportsItsHeadsEnd(t *testing.T) {
	t.Parallel()
	rayBin, _ := fakeray.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := &Backend{Head: rayhead.Options{RayBin: rayBin}}
	c, err := b.Provision(ctx, runner.Step{ID: "raystep-x-0123456789ab"}, runner.Discard)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	h := c.(*privateCluster).head
	_ = syscall.Kill(h.Pid(), syscall.SIGKILL)
	select {
	case err := <-c.Failures():
		want := "ray start ended with exit code -9. Signal 9 is SIGKILL"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("failure = %v, want the head's exit: %q", err, want)
		}
	case <-ctx.Done():
		t.Fatal("no failure reported after the head died")
	}
	if err := c.Teardown(ctx, false); err != nil {
		t.Errorf("Teardown after the head died: %v", err)
	}
	if _, err := os.Stat(h.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s left behind (stat: %v)", h.TempDir(), err)
	}
}
