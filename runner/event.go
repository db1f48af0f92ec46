package runner

import "time"

// Event is one thing that happened in a step, told once: the runner and the
// backends emit it through one Sink, and each consumer renders it its own
// way (the terminal in colour with the elapsed time, a log collector as one
// JSON or logfmt line, Dagster as a Pipes log message, a web page live).
type Event struct {
	// Time is when it happened, on the runner's clock.
	Time time.Time
	// Elapsed is the time since the step started.
	Elapsed time.Duration
	// Phase is the lifecycle phase it happened in.
	Phase Phase
	// Kind says what sort of event it is; see the Kind constants.
	Kind EventKind
	// Message is the event's text for a person, without a trailing newline.
	Message string
	// Cluster names the step's cluster once one is provisioned.
	Cluster string
	// SubmissionID is the step's Ray submission id.
	SubmissionID string
	// DashboardURL is the Ray dashboard shown to people, once known.
	DashboardURL string
	// Attrs are further key/value pairs in order, e.g. the metadata of a
	// result or the level of a driver's log message.
	Attrs []Attr
}

// Attr is one key/value pair of an Event.
type Attr struct {
	// Key is a short lower-case name, e.g. "level" or "raystep/gpu_hours".
	Key string
	// Value is the value as text.
	Value string
}

// EventKind says what an Event tells.
type EventKind string

// The kinds of Event.
const (
	// KindNote is raystep's progress: a phase began or made headway.
	KindNote EventKind = "note"
	// KindWarning is a problem that does not end the step.
	KindWarning EventKind = "warning"
	// KindDone ends a step whose job succeeded.
	KindDone EventKind = "done"
	// KindFailed ends a step that failed; Message is the step's error.
	KindFailed EventKind = "failed"
	// KindLog is a log message the driver sent (standalone runs): Message
	// is its text, the attribute "level" its level (INFO, WARNING, ...).
	KindLog EventKind = "log"
	// KindCheck is an asset check result the driver reported (standalone);
	// Message says it in one line, e.g. "auc_above on ads/model: passed".
	KindCheck EventKind = "check"
	// KindResult is a materialization reported at the end (standalone):
	// Message is the asset key (and data version), Attrs its metadata in
	// key order, each value as text.
	KindResult EventKind = "result"
	// KindMessage is any other message from the driver (standalone), as
	// compact JSON.
	KindMessage EventKind = "message"
)

// Sink receives a step's events. Backends emit from their own goroutines,
// so a Sink must be safe for concurrent use; Event must not block for long.
type Sink interface {
	Event(e Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

// Event calls f(e).
func (f SinkFunc) Event(e Event) { f(e) }

// Discard is a Sink that drops every event.
var Discard Sink = SinkFunc(func(Event) {})
