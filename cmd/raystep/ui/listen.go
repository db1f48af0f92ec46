package ui

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Serve listens on addr, prints the page's URL on out and serves h until
// ctx is done, then closes open connections (live updates included).
func Serve(ctx context.Context, addr string, h http.Handler, out io.Writer) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("ui: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	fmt.Fprintf(out, "raystep ui: http://%s/\n", shownAddr(ln.Addr()))
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("ui: serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdown) // live streams end with ctx (BaseContext); Close what is left
	_ = hs.Close()
	return nil
}

// shownAddr is the address the UI's URL names: the listen address, or,
// on every interface (0.0.0.0, ::), this machine's loopback with the port,
// which a browser here can open.
func shownAddr(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
	}
	return addr.String()
}
