package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/raystep/raystep/cmd/raystep/ui"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/kuberay/kubeapi"
	"github.com/raystep/raystep/test/cluster"
)

// startUI serves raystep ui's page of every namespace of the sandbox on
// addr (loopback) until ctx ends or stop is called, and returns its URL.
func startUI(ctx context.Context, c *cluster.Cluster, addr string, stderr io.Writer) (string, func(), error) {
	cs, err := kubeapi.NewForConfig(c.Config)
	if err != nil {
		return "", nil, fmt.Errorf("raystep ui: %w", err)
	}
	if err := ui.CheckAddr(addr, ui.Auth{}); err != nil {
		return "", nil, fmt.Errorf("-ui-addr: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	store := &ui.Store{}
	if err := store.Watch(wctx, cs, cs, ""); err != nil {
		cancel()
		return "", nil, fmt.Errorf("raystep ui: %w", err)
	}
	pods := &ui.Pods{}
	if err := pods.Watch(wctx, cs, ""); err != nil {
		cancel()
		return "", nil, fmt.Errorf("raystep ui: %w", err)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		cancel()
		return "", nil, fmt.Errorf("raystep ui: listen on %s: %w", addr, err)
	}
	// Dashboards are reached as from a laptop: by a port-forward to the head
	// pod, which kwok sends to the sandbox's Ray head.
	notify := func(level, msg string) { fmt.Fprintf(stderr, "sandbox: raystep ui: %s: %s\n", level, msg) }
	heads := &ui.KubeHeads{Interactive: &kuberay.Interactive{Kube: cs, Ray: cs, Notify: notify}, Config: c.Config}
	page := &ui.Server{Store: store, Scope: "every namespace of the sandbox", Reach: heads.Reach, Pods: pods}
	srv := &http.Server{Handler: page.Handler(),
		ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return wctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "sandbox: raystep ui stopped: %v\n", err)
		}
	}()
	stop := func() {
		cancel() // ends the live streams first
		_ = srv.Close()
		<-done
		page.Close()
		heads.Close()
	}
	return "http://" + ln.Addr().String() + "/", stop, nil
}
