// Package jupytertest drives a real Jupyter server as a notebook page
// does, for tests of what raystep reads of a notebook's activity.
package jupytertest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Kernel is a Jupyter kernel executing time.sleep(600).
type Kernel struct {
	base, token, id string
	hc              *http.Client
}

// StartBusy starts a kernel on the notebook at nb (its URL with
// token), has it execute a long sleep through the kernel's websocket, as
// a notebook page does, and waits until the code printed that it sleeps
// (the kernel then takes an interrupt: it may ignore one before, when the
// kernel runs under a process that ignores SIGINT, as a Ray job does) and
// Jupyter says the kernel is busy.
func StartBusy(t *testing.T, nb *url.URL) *Kernel {
	t.Helper()
	k := &Kernel{base: "http://" + nb.Host, token: nb.Query().Get("token"), hc: &http.Client{Timeout: time.Minute}}
	var created struct {
		ID string `json:"id"`
	}
	k.call(t, http.MethodPost, "/api/kernels", `{"name":"python3"}`, &created)
	k.id = created.ID
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+nb.Host+"/api/kernels/"+k.id+"/channels",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"token " + k.token}}})
	if err != nil {
		t.Fatalf("open kernel %s's channels: %v", k.id, err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	msg := map[string]any{
		"header": map[string]any{"msg_id": "raystep-e2e-1", "username": "e2e", "session": "raystep-e2e", "msg_type": "execute_request",
			"version": "5.3", "date": time.Now().UTC().Format(time.RFC3339)},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "channel": "shell", "buffers": []any{},
		"content": map[string]any{"code": "import time\nprint('raystep-e2e sleeping', flush=True)\ntime.sleep(600)", "silent": false, "store_history": false,
			"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true},
	}
	b, _ := json.Marshal(msg)
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("execute on kernel %s: %v", k.id, err)
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("read kernel %s's channels until the code runs: %v", k.id, err)
		}
		var got struct {
			Header struct {
				MsgType string `json:"msg_type"`
			} `json:"header"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(data, &got) == nil && got.Header.MsgType == "stream" && strings.Contains(got.Content.Text, "raystep-e2e sleeping") {
			break
		}
	}
	for {
		var kernels []struct {
			ID    string `json:"id"`
			State string `json:"execution_state"`
		}
		k.call(t, http.MethodGet, "/api/kernels", "", &kernels)
		for _, got := range kernels {
			if got.ID == k.id && got.State == "busy" {
				return k
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kernel %s never became busy: %+v", k.id, kernels)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Shutdown shuts the kernel down, as a notebook page's "Shut Down
// Kernel" does.
func (k *Kernel) Shutdown(t *testing.T) {
	t.Helper()
	k.call(t, http.MethodDelete, "/api/kernels/"+k.id, "", nil)
}

// Interrupt stops the kernel's sleep.
func (k *Kernel) Interrupt(t *testing.T) {
	t.Helper()
	k.call(t, http.MethodPost, "/api/kernels/"+k.id+"/interrupt", "", nil)
}

// call makes one Jupyter REST request with the token and decodes the
// answer into out (when not nil).
func (k *Kernel) call(t *testing.T, method, path, body string, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, k.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+k.token)
	resp, err := k.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}
