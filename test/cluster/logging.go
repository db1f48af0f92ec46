package cluster

import (
	"io"
	"sync"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// controller-runtime has one process-wide logger, and KubeRay's RayCluster
// reconciler logs through it rather than through its manager's. So that
// those lines land in the operator log of the cluster they belong to (and
// controller-runtime does not complain that no logger was set), the global
// logger is set once per process to a writer that fans out to the operator
// log of every running cluster. A test binary usually runs one cluster at a
// time; with several, each log also holds the others' lines.
var (
	globalLogOnce sync.Once
	globalLogs    = &fanout{}
)

// attachGlobalLog sends controller-runtime's global log to w until detach.
func attachGlobalLog(w io.Writer) (detach func()) {
	globalLogOnce.Do(func() {
		ctrllog.SetLogger(crzap.New(crzap.WriteTo(globalLogs), crzap.UseDevMode(true)))
	})
	globalLogs.add(w)
	return func() { globalLogs.remove(w) }
}

// fanout is an io.Writer that copies every write to a changing set of
// writers.
type fanout struct {
	mu sync.Mutex
	ws []io.Writer
}

func (f *fanout) add(w io.Writer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ws = append(f.ws, w)
}

func (f *fanout) remove(w io.Writer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.ws {
		if x == w {
			f.ws = append(f.ws[:i], f.ws[i+1:]...)
			return
		}
	}
}

// Write copies p to every attached writer; their errors are ignored, as a
// logger's would be.
func (f *fanout) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.ws {
		w.Write(p) //nolint:errcheck // best effort, like any log sink
	}
	return len(p), nil
}
