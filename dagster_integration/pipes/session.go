package pipes

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
)

// ErrClosed is returned for a message sent after Close.
var ErrClosed = errors.New("dagster pipes session is closed")

// Options configures Open. The zero value reads nothing: pass os.Args[1:]
// and os.LookupEnv in main, fakes in tests.
type Options struct {
	// Args are the program's arguments, searched for --dagster-pipes-context
	// and --dagster-pipes-messages.
	Args []string
	// LookupEnv reads DAGSTER_PIPES_CONTEXT and DAGSTER_PIPES_MESSAGES.
	LookupEnv func(string) (string, bool)
	// Stdout and Stderr are the process's streams, used by the stdio
	// message writers and returned by Session.Stdout / Session.Stderr.
	// Nil means os.Stdout / os.Stderr.
	Stdout, Stderr io.Writer
	// OpenedExtras are sent in the "opened" message.
	OpenedExtras map[string]any
	// ReadFile reads the context file; nil means os.ReadFile.
	ReadFile func(string) ([]byte, error)
}

// Session is an open Pipes connection to Dagster. Its methods are safe for
// concurrent use. An inactive session (process not launched by Dagster)
// accepts every call and writes nothing.
type Session struct {
	mu           sync.Mutex
	ctx          *Context
	ch           channel
	active       bool
	closed       bool
	materialized map[string]bool
	stdout       *Stream
	stderr       *Stream
}

// Open reads the bootstrap, loads the context, opens the message channel and
// sends "opened". Without a bootstrap it returns an inactive session and no
// error. A bootstrap that cannot be used is an error wrapping ErrBootstrap.
func Open(opts Options) (*Session, error) {
	s := &Session{
		ctx:          NewContext(ContextData{Extras: map[string]any{}}),
		materialized: map[string]bool{},
		stdout:       NewStream(orDefault(opts.Stdout, os.Stdout)),
		stderr:       NewStream(orDefault(opts.Stderr, os.Stderr)),
	}
	ctxValue, msgValue, ok, err := bootstrapValues(opts.Args, opts.LookupEnv)
	if err != nil || !ok {
		return s, err
	}
	var ctxParams, msgParams Params
	if err := DecodeBootstrap(ctxValue, &ctxParams); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvContext, err)
	}
	if err := DecodeBootstrap(msgValue, &msgParams); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvMessages, err)
	}
	if s.ctx, err = loadContext(ctxParams, opts.ReadFile); err != nil {
		return nil, err
	}
	if s.ch, err = openChannel(msgParams, s.stdout, s.stderr); err != nil {
		return nil, err
	}
	s.active = true
	extras := opts.OpenedExtras
	if extras == nil {
		extras = map[string]any{}
	}
	if err := s.send(MethodOpened, map[string]any{"extras": extras}); err != nil {
		return nil, errors.Join(err, s.ch.close())
	}
	return s, nil
}

func orDefault(w, def io.Writer) io.Writer {
	if w == nil {
		return def
	}
	return w
}

// Active reports whether the process was launched by Dagster.
func (s *Session) Active() bool { return s.active }

// Context returns the step's context (empty for an inactive session).
func (s *Session) Context() *Context { return s.ctx }

// Stdout returns the process's stdout as a line-aware writer; use it for
// plain output when messages may travel on stdout too.
func (s *Session) Stdout() *Stream { return s.stdout }

// Stderr is Stdout for stderr.
func (s *Session) Stderr() *Stream { return s.stderr }

func (s *Session) send(method Method, params any) error {
	m, err := NewMessage(method, params)
	if err != nil {
		return err
	}
	return s.write(m)
}

func (s *Session) write(m *Message) error {
	if !s.active {
		return nil
	}
	if s.closed {
		return fmt.Errorf("%s: %w", m.Method, ErrClosed)
	}
	line := make([]byte, 0, len(m.line)+1)
	line = append(append(line, m.line...), '\n')
	return s.ch.writeLine(line)
}

// Log sends a log line at level.
func (s *Session) Log(level Level, message string) error {
	m, err := LogMessage(level, message)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(m)
}

// ReportAssetMaterialization reports that an asset was materialized. An
// empty AssetKey means the step's single asset; an asset can be reported
// once per session.
func (s *Session) ReportAssetMaterialization(mat Materialization) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active {
		return nil
	}
	key, err := s.resolveAssetKey(mat.AssetKey, MethodReportMaterialize)
	if err != nil {
		return err
	}
	if s.materialized[key] {
		return invalid("%s: asset %q was already materialized in this session", MethodReportMaterialize, key)
	}
	mat.AssetKey = key
	m, err := MaterializationMessage(mat)
	if err != nil {
		return err
	}
	if err := s.write(m); err != nil {
		return err
	}
	s.materialized[key] = true
	return nil
}

// ReportAssetCheck reports an asset check result.
func (s *Session) ReportAssetCheck(c AssetCheck) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active {
		return nil
	}
	key, err := s.resolveAssetKey(c.AssetKey, MethodReportAssetCheck)
	if err != nil {
		return err
	}
	c.AssetKey = key
	m, err := AssetCheckMessage(c)
	if err != nil {
		return err
	}
	return s.write(m)
}

func (s *Session) resolveAssetKey(key string, method Method) (string, error) {
	keys := s.ctx.data.AssetKeys
	if key == "" {
		if len(keys) != 1 {
			return "", invalid("%s: pass an asset key: the step targets %d assets", method, len(keys))
		}
		return keys[0], nil
	}
	if len(keys) > 0 && !contains(keys, key) {
		return "", invalid("%s: asset key %q is not one of the step's %v", method, key, keys)
	}
	return key, nil
}

// ReportCustomMessage sends any JSON-encodable payload, retrieved on the
// Dagster side with get_custom_messages.
func (s *Session) ReportCustomMessage(payload any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.send(MethodReportCustomMessage, map[string]any{"payload": payload})
}

// LogExternalStream sends text that Dagster writes to its own stdout or
// stderr ("stdout" or "stderr").
func (s *Session) LogExternalStream(stream, text string, extras map[string]any) error {
	if extras == nil {
		extras = map[string]any{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.send(MethodLogExternalStream, map[string]any{"stream": stream, "text": text, "extras": extras})
}

// Forward sends a message received from another Pipes writer (see Relay)
// unchanged. It is validated again; "opened" and "closed" belong to this
// session and are refused.
func (s *Session) Forward(m *Message) error {
	if m == nil || m.Method == MethodOpened || m.Method == MethodClosed {
		return invalid("forward: %v messages belong to the session itself", methodOf(m))
	}
	if err := m.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Method == MethodReportMaterialize {
		if mat, err := m.Materialization(); err == nil {
			s.materialized[mat.AssetKey] = true
		}
	}
	return s.write(m)
}

func methodOf(m *Message) Method {
	if m == nil {
		return "nil"
	}
	return m.Method
}

// Close sends "closed" (with exc when the program failed) and releases the
// channel. It is idempotent. A closed message with an exception does not
// fail the Dagster step by itself: the exit code does.
func (s *Session) Close(exc *Exception) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active || s.closed {
		return nil
	}
	params := map[string]any{}
	if exc != nil {
		params["exception"] = exc
	}
	err := s.send(MethodClosed, params)
	s.closed = true
	return errors.Join(err, s.ch.close())
}

// CloseWithError closes with the exception describing err (none if nil).
func (s *Session) CloseWithError(err error) error {
	return s.Close(ExceptionFromError(err))
}

// Recover is deferred on a program's main path: on a panic it sends "closed"
// with the panic and its stack, then panics again, so the process still
// exits non-zero with Go's usual report.
func (s *Session) Recover() {
	v := recover()
	if v == nil {
		return
	}
	_ = s.Close(ExceptionFromPanic(v, debug.Stack()))
	panic(v)
}
