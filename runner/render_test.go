package runner

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// TextSink is textSink for the tests outside the package.
var TextSink = textSink

// textSink renders events as raystep's plain progress lines, the way the
// CLI's text renderer does, so that tests compare bytes.
func textSink(w io.Writer) Sink {
	var mu sync.Mutex
	return SinkFunc(func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		var b strings.Builder
		tag, msg := string(e.Kind), e.Message
		switch e.Kind {
		case KindNote:
			tag = string(e.Phase)
		case KindWarning:
			tag = string(e.Phase) + " !"
		case KindLog:
			msg = attr(e, "level") + " " + msg
		}
		fmt.Fprintf(&b, "[%7.1fs] %-10s %s\n", e.Elapsed.Seconds(), tag, msg)
		if e.Kind == KindResult {
			width := 0
			for _, a := range e.Attrs {
				width = max(width, len(a.Key))
			}
			for _, a := range e.Attrs {
				fmt.Fprintf(&b, "%22s%-*s  %s\n", "", width, a.Key, a.Value)
			}
		}
		_, _ = io.WriteString(w, b.String())
	})
}

// attr returns the value of e's attribute key.
func attr(e Event, key string) string {
	for _, a := range e.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}
