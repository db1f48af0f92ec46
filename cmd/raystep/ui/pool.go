package ui

import (
	"context"
	"sync"
	"time"
)

// pool keeps one running value per key (a probe of a head, the tail of a
// job's log) while it has users and for linger after the last one left,
// so that every tab shares it and a page opened again finds its history.
type pool[T any] struct {
	mu     sync.Mutex
	m      map[string]*pooled[T]
	linger time.Duration
	ctx    context.Context // the server's lifetime; every value's ends with it
}

type pooled[T any] struct {
	v     T
	users int
	idle  *time.Timer
	stop  context.CancelFunc
}

// acquire returns the value of key, starting it with start when there is
// none, and the release its user calls once. start gets the value's
// context, done when the pool drops it, and forget, which drops it at
// once so that the next acquire starts a new one (after a failure).
func (p *pool[T]) acquire(key string, start func(ctx context.Context, forget func()) T) (T, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[key]
	if !ok {
		ctx, cancel := context.WithCancel(p.ctx)
		e = &pooled[T]{stop: cancel}
		if p.m == nil {
			p.m = map[string]*pooled[T]{}
		}
		p.m[key] = e
		e.v = start(ctx, func() { p.forget(key, e, false) })
	}
	e.users++
	if e.idle != nil {
		e.idle.Stop()
		e.idle = nil
	}
	var once sync.Once
	return e.v, func() { once.Do(func() { p.release(key, e) }) }
}

func (p *pool[T]) release(key string, e *pooled[T]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.users--
	if e.users == 0 {
		e.idle = time.AfterFunc(p.linger, func() { p.forget(key, e, true) })
	}
}

// forget drops e from the pool, and stops it when idle says it is unused.
func (p *pool[T]) forget(key string, e *pooled[T], idle bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if idle && e.users > 0 {
		return
	}
	if p.m[key] == e {
		delete(p.m, key)
	}
	if idle {
		e.stop()
	}
}
