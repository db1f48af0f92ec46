package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// recorder is a Sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Event(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// brief is what a test compares of an event.
type brief struct {
	Phase   Phase
	Kind    EventKind
	Message string
}

func (r *recorder) briefs() []brief {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]brief, len(r.events))
	for i, e := range r.events {
		out[i] = brief{e.Phase, e.Kind, e.Message}
	}
	return out
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// TestEventsOfSuccessfulStep: a step that succeeds tells its phases in
// order, each event stamped with the elapsed time and what is known of the
// step by then, and ends with done; Dagster gets the notes, not the end.
func TestEventsOfSuccessfulStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rec := &recorder{}
	h.runner.Events = rec
	res, err := h.run()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	id := res.ID
	want := []brief{
		{PhaseProvision, KindNote, "step " + id + " (train) on kuberay"},
		{PhaseProvision, KindNote, "cluster ml-ads/raystep-train ready"},
		{PhaseDashboard, KindNote, "reached https://ray.example.com/train through http://127.0.0.1:38265"},
		{PhaseSubmit, KindNote, "job " + id + " submitted"},
		{PhaseRun, KindNote, "job " + id + " SUCCEEDED"},
		{PhaseTeardown, KindNote, "cluster ml-ads/raystep-train deleted"},
		{PhaseReport, KindDone, "job " + id + " SUCCEEDED in 3637.0s"},
	}
	if diff := cmp.Diff(want, rec.briefs()); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	events := rec.all()
	type stamp struct {
		Elapsed                          time.Duration
		SubmissionID, Cluster, Dashboard string
	}
	var got []stamp
	for _, e := range events {
		got = append(got, stamp{e.Elapsed, e.SubmissionID, e.Cluster, e.DashboardURL})
		if start := newFakeClock().Now(); !e.Time.Equal(start.Add(e.Elapsed)) {
			t.Errorf("event %q: time %s is not the start %s plus %s", e.Message, e.Time, start, e.Elapsed)
		}
	}
	const dash = "https://ray.example.com/train"
	wantStamps := []stamp{
		{0, id, "", ""},
		{30 * time.Second, id, "ml-ads/raystep-train", ""},
		{31 * time.Second, id, "ml-ads/raystep-train", dash},
		{32 * time.Second, id, "ml-ads/raystep-train", dash},
		{3632 * time.Second, id, "ml-ads/raystep-train", dash},
		{3637 * time.Second, id, "ml-ads/raystep-train", dash},
		{3637 * time.Second, id, "ml-ads/raystep-train", dash},
	}
	if diff := cmp.Diff(wantStamps, got); diff != "" {
		t.Errorf("stamps (-want +got):\n%s", diff)
	}
	if logs := h.ownLogs(); len(logs) != 6 || logs[0] != "INFO raystep provision: step "+id+" (train) on kuberay" {
		t.Errorf("dagster logs %v, want the 6 notes and not the end", logs)
	}
}

// TestEventsOfFailedStep: a failed step ends with a failed event carrying
// the step's error, and the standalone driver's reports are events too.
func TestEventsOfFailedStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rec := &recorder{}
	h.runner.Events, h.runner.Session = rec, nil
	exit1 := 1
	h.final = JobInfo{Status: StatusFailed, DriverExitCode: &exit1, Message: "boom"}
	h.lines = []string{pipesLog, pipesCheck, pipesCustom, pipesMat}
	_, err := h.run()
	if !errors.Is(err, ErrJobFailed) {
		t.Fatalf("Run error %v, want ErrJobFailed", err)
	}
	events := rec.all()
	last := events[len(events)-1]
	if last.Kind != KindFailed || last.Message != err.Error() || last.Phase != PhaseReport {
		t.Errorf("last event %+v, want failed with %q", last, err)
	}
	var driver []Event
	for _, e := range events {
		switch e.Kind {
		case KindDone:
			t.Errorf("a failed step told %+v", e)
		case KindLog, KindCheck, KindMessage, KindResult:
			driver = append(driver, e)
		}
	}
	if len(driver) != 4 {
		t.Fatalf("driver events %+v, want a log, a check, a message and the result", driver)
	}
	if diff := cmp.Diff([]Attr{{"level", "INFO"}}, driver[0].Attrs); driver[0].Message != "epoch 1 loss=0.52" || diff != "" {
		t.Errorf("log event %+v, want the driver's message with its level", driver[0])
	}
	if res := driver[3]; res.Kind != KindResult || res.Message != "ads/model (data version v7)" ||
		res.Attrs[0] != (Attr{"auc", "0.81"}) || !strings.HasPrefix(res.Attrs[1].Key, "raystep/") {
		t.Errorf("result event %+v, want the asset and its metadata in key order", res)
	}
}

// TestBackendWarningReachesConsoleAndDagster: a warning the backend emits
// from its own goroutine while the cluster comes up is one event, stamped
// with the step's phase, that the console renders and Dagster is told.
func TestBackendWarningReachesConsoleAndDagster(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var console strings.Builder
	h.runner.Events = textSink(&console)
	h.backend.provision = func(ctx context.Context, _ Step) (Cluster, error) {
		h.clock.Advance(10 * one)
		ready := h.cluster.ready
		h.cluster.ready = func(ctx context.Context) error {
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.backend.events.Event(Event{Kind: KindWarning, Message: "pod head-0: FailedScheduling: 0/3 nodes are available"})
			}()
			<-done
			return ready(ctx)
		}
		return h.cluster, nil
	}
	if _, err := h.run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	const line = "[   10.0s] provision ! pod head-0: FailedScheduling: 0/3 nodes are available\n"
	if !strings.Contains(console.String(), line) {
		t.Errorf("console lacks %q:\n%s", line, console.String())
	}
	if logs := h.ownLogs(); !containsPrefix(logs, "WARNING raystep provision: pod head-0: FailedScheduling: 0/3 nodes are available") {
		t.Errorf("dagster logs %v, want the backend's warning", logs)
	}
}

// TestStepNoticesAreWarnings: what was decided for the user while the step
// was resolved is told first, as warnings; one that Dagster could not be
// sent fails a step that otherwise succeeded, as infrastructure.
func TestStepNoticesAreWarnings(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rec := &recorder{}
	h.runner.Events = rec
	h.step.Notices = []string{"teardown \"never\" keeps nothing here"}
	lost := errors.New("write pipes message: broken pipe")
	h.session.send = func(m *pipes.Message) error {
		if strings.Contains(string(m.Params), "keeps nothing") {
			return lost
		}
		return nil
	}
	_, err := h.run()
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Phase != PhaseReport || !errors.Is(err, lost) {
		t.Fatalf("Run error %v, want a report InfraError wrapping %v", err, lost)
	}
	if got := fmt.Sprint(rec.briefs()[0]); got != fmt.Sprint(brief{PhaseProvision, KindWarning, h.step.Notices[0]}) {
		t.Errorf("first event %s, want the notice as a warning", got)
	}
	if !strings.Contains(err.Error(), "send log to dagster: ") {
		t.Errorf("error %q does not say what Dagster missed", err)
	}
}
