package runner

import (
	"fmt"
	"sync"
	"time"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// stream is a step's one event stream. It stamps each event with the
// time, the elapsed time, the step's current phase (unless the emitter
// named one) and what is known of the step (submission id, cluster,
// dashboard), then hands it to every consumer in turn. The runner emits
// from Run's goroutine, backends from their own: the stamp and the
// delivery are serialised by mu, so consumers see events one at a time
// and in time order.
type stream struct {
	clock Clock
	start time.Time
	id    string
	sinks []Sink

	mu        sync.Mutex
	phase     Phase
	cluster   string
	dashboard string
}

var _ Sink = (*stream)(nil)

// Event stamps e and delivers it.
func (st *stream) Event(e Event) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e.Time = st.clock.Now()
	e.Elapsed = e.Time.Sub(st.start)
	if e.Phase == "" {
		e.Phase = st.phase
	}
	if e.SubmissionID == "" {
		e.SubmissionID = st.id
	}
	if e.Cluster == "" {
		e.Cluster = st.cluster
	}
	if e.DashboardURL == "" {
		e.DashboardURL = st.dashboard
	}
	for _, s := range st.sinks {
		s.Event(e)
	}
}

// enter records the phase the step is in, for the events of backends.
func (st *stream) enter(p Phase) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.phase = p
}

// know records the step's cluster and dashboard once known.
func (st *stream) know(cluster, dashboard string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.cluster, st.dashboard = cluster, dashboard
}

// dagsterLog is the consumer that tells Dagster raystep's notes and
// warnings, the runner's and the backends' alike, as Pipes log messages
// "raystep <phase>: <text>" at INFO or WARNING. The other kinds are for a
// person only: the driver's own messages reach Dagster as they came, and
// the step's end is the "closed" message. The first failure to send is
// kept, so that the step fails: Dagster missed something.
type dagsterLog struct {
	sess Session
	mu   sync.Mutex
	err  error
}

// Event sends e's log message when e is a note or a warning.
func (d *dagsterLog) Event(e Event) {
	level := pipes.LevelInfo
	switch e.Kind {
	case KindNote:
	case KindWarning:
		level = pipes.LevelWarning
	default:
		return
	}
	m, err := pipes.LogMessage(level, fmt.Sprintf("raystep %s: %s", e.Phase, e.Message))
	if err == nil {
		err = d.sess.Send(m)
	}
	if err == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = fmt.Errorf("send log to dagster: %w", err)
	}
}

// failure is the first log Dagster could not be sent, nil if none.
func (d *dagsterLog) failure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}
