package kuberay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPortForwardGivesUp: when the head pod is gone for good, the broken
// port-forward is tried again (each failure noted), then the step is
// failed through Failures with an error that says so, and the
// supervisor stops.
func TestPortForwardGivesUp(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.b.PortForwardGiveUp = time.Nanosecond
	c := f.provision(t, request(0))
	fw := &forward{stop: make(chan struct{}), done: make(chan struct{})}
	broke := make(chan error, 1)
	broke <- errors.New("lost connection to pod")
	dial := func(context.Context, uint16, chan struct{}) (uint16, <-chan error, error) {
		_, err := c.headPod()
		return 0, nil, err
	}
	go c.superviseForward(fw, 4242, broke, dial)
	select {
	case err := <-c.Failures():
		want := "port-forward to the head of " + c.Name() + ": gave up after 1ns (attempts: 1): RayJob " + c.Name() + " has no running head pod to port-forward to"
		if err.Error() != want {
			t.Errorf("failure = %q, want %q", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no failure reported after 10s")
	}
	<-fw.done // the supervisor stopped by itself
	if !f.noted("WARNING port-forward to the head of " + c.Name() + " broke, opening it again: lost connection to pod") {
		t.Errorf("the break was not noted: %q", f.allNotes())
	}
}

// TestPortForwardReopens: a broken port-forward that can be opened again
// is, and says so; it is not a failure.
func TestPortForwardReopens(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	c := f.provision(t, request(0))
	fw := &forward{stop: make(chan struct{}), done: make(chan struct{})}
	broke := make(chan error, 1)
	broke <- errors.New("lost connection to pod")
	dial := func(_ context.Context, port uint16, _ chan struct{}) (uint16, <-chan error, error) {
		return port, make(chan error), nil
	}
	go c.superviseForward(fw, 4242, broke, dial)
	f.awaitNote(t, "INFO port-forward to the head of "+c.Name()+" open again (attempt 1)")
	close(fw.stop)
	<-fw.done
	select {
	case err := <-c.Failures():
		t.Errorf("failure reported: %v", err)
	default:
	}
	for _, n := range f.allNotes() {
		if strings.Contains(n, "failed") {
			t.Errorf("unexpected note %q", n)
		}
	}
}
