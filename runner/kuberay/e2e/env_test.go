package e2e

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/runner"
	"github.com/raystep/raystep/runner/adapters"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/schemas"
	"github.com/raystep/raystep/test/cluster"
	"github.com/raystep/raystep/test/raytest"
)

// shared is the one environment every test of the package uses: a real
// Ray head and a Kubernetes with the KubeRay operator pointed at it.
var shared struct {
	once    sync.Once
	ray     raytest.Shared
	head    raytest.Head
	k8s     *cluster.Cluster
	profile *schemas.Profile
	// notebookPort is the port kwok sends to 127.0.0.1 for the notebook
	// tests, whose Jupyter server runs on the shared real head.
	notebookPort int
	// tokenDashboard listens, from the start, on the port kwok sends to
	// 127.0.0.1 for the UI's token test: a head pod that names that port
	// as its dashboard port is reached, by a port-forward, at the relay
	// the test runs on it in front of the token head. Held open, the port
	// cannot be taken by anything else meanwhile.
	tokenDashboard *net.TCPListener
	// idleDashboard is the same for the idle release test's cluster, whose
	// dashboard is a filter in front of the shared head (see idle_test.go).
	idleDashboard *net.TCPListener
	err           error
}

// parallel is how many of the package's tests run at once unless
// -test.parallel says otherwise. They spend their time waiting on the API
// server, the operator, kwok's pod delays and the Ray head, not on the
// CPU, so the GOMAXPROCS default would leave a 2-core machine idle.
const parallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(parallel))
	}
	code := m.Run()
	if shared.k8s != nil {
		// Whatever the tests did, the suite must leave nothing behind.
		if left := sweep(context.Background()); left != "" {
			fmt.Fprintln(os.Stderr, "FAIL: left in the API server after the suite:", left)
			code = max(code, 1)
		} else {
			fmt.Fprintln(os.Stderr, "e2e: the suite left nothing in the API server")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := shared.k8s.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "stop cluster:", err)
		}
		cancel()
	}
	shared.ray.Stop()
	tokenRay.Stop()
	if shared.tokenDashboard != nil {
		shared.tokenDashboard.Close()
	}
	if shared.idleDashboard != nil {
		shared.idleDashboard.Close() // the test closed it already, unless it did not run
	}
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// setup returns the shared environment, starting it on first use.
func setup(t *testing.T) {
	t.Helper()
	head := shared.ray.Head(t)
	shared.once.Do(func() {
		shared.head = head
		shared.profile, shared.err = schemas.LoadProfile("../../../examples/platform.yaml")
		if shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		if shared.notebookPort, shared.err = notebook.LoopbackPort(); shared.err != nil {
			return
		}
		var ln net.Listener
		if ln, shared.err = net.Listen("tcp", "127.0.0.1:0"); shared.err != nil {
			return
		}
		shared.tokenDashboard = ln.(*net.TCPListener)
		if ln, shared.err = net.Listen("tcp", "127.0.0.1:0"); shared.err != nil {
			return
		}
		shared.idleDashboard = ln.(*net.TCPListener)
		shared.k8s, shared.err = cluster.Start(ctx, cluster.Options{Nodes: nodes(shared.profile), DashboardURL: head.DashboardURL(),
			LoopbackPorts: []int{shared.notebookPort, tokenDashboardPort(), idleDashboardPort()}})
		t.Logf("environment started in %s", time.Since(start).Round(time.Millisecond))
	})
	if shared.err != nil {
		t.Fatalf("start environment: %v", shared.err)
	}
}

// idleDashboardPort is the port of shared.idleDashboard.
func idleDashboardPort() int { return shared.idleDashboard.Addr().(*net.TCPAddr).Port }

// tokenDashboardPort is the port of shared.tokenDashboard.
func tokenDashboardPort() int { return shared.tokenDashboard.Addr().(*net.TCPAddr).Port }

// gpuNodes is the size of the fake A100 pool: enough GPUs for every step
// of the package running at once (one A100 worker each), so a step's
// worker is never Unschedulable because of another test.
const gpuNodes = 4

// nodes mirrors the profile's A100 pool (labels, taints, 8 GPUs a node)
// and adds a CPU node. The L4 pool gets no node, so asking for an L4 is
// really Unschedulable.
func nodes(p *schemas.Profile) []cluster.NodeSpec {
	gpu := p.Spec.GPUTypes["a100-80gb"]
	var taints []corev1.Taint
	for _, tol := range gpu.Tolerations {
		value := tol.Value
		if tol.Operator == "Exists" {
			value = "present"
		}
		taints = append(taints, corev1.Taint{Key: tol.Key, Value: value, Effect: corev1.TaintEffect(tol.Effect)})
	}
	var all []cluster.NodeSpec
	for i := range gpuNodes {
		all = append(all, cluster.NodeSpec{Name: fmt.Sprintf("gpu-a100-80gb-%d", i), Labels: gpu.NodeSelector, Taints: taints,
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti"),
				corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceName(gpu.ResourceName): resource.MustParse("8"),
			}})
	}
	return append(all, cluster.NodeSpec{Name: "cpu-0", Capacity: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods: resource.MustParse("110"),
	}})
}

// restricted returns the Pod Security Admission labels of every test
// namespace: the API server enforces, warns about and audits the
// restricted standard at the newest version it knows, so every pod KubeRay
// makes for a step is admitted only if it is restricted.
func restricted() map[string]string {
	return map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
		"pod-security.kubernetes.io/warn":            "restricted",
		"pod-security.kubernetes.io/warn-version":    "latest",
		"pod-security.kubernetes.io/audit":           "restricted",
		"pod-security.kubernetes.io/audit-version":   "latest",
	}
}

// namespace creates a namespace for one test, enforcing the restricted
// Pod Security Standard, and deletes it afterwards.
func namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: restricted()}}
	if err := shared.k8s.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			componentLog(t, name)
		}
		// Namespaces are never finalized here (no namespace controller):
		// the test checks its own leftovers instead.
		_ = shared.k8s.Client.Delete(context.Background(), ns)
	})
	return name
}

// componentLog logs the last lines of each component's log (the KubeRay
// operator, the controller manager's garbage collector, kwok...) that
// name namespace ns, so that a failed test shows what the components did
// with its objects.
func componentLog(t *testing.T, ns string) {
	const keep, width = 12, 400
	for _, f := range shared.k8s.LogFiles() {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var lines []string
		for l := range strings.SplitSeq(string(data), "\n") {
			if strings.Contains(l, ns+"/") || strings.Contains(l, `"namespace":"`+ns+`"`) || strings.Contains(l, `namespace="`+ns+`"`) {
				lines = append(lines, l[:min(len(l), width)])
			}
		}
		if len(lines) > keep {
			lines = lines[len(lines)-keep:]
		}
		if len(lines) > 0 {
			t.Logf("%s, its last lines on %s:\n%s", filepath.Base(f), ns, strings.Join(lines, "\n"))
		}
	}
}

// spec loads testdata/step.yaml with overrides.
func spec(t *testing.T, set ...string) *schemas.Spec {
	t.Helper()
	s, err := schemas.Load("testdata/step.yaml", schemas.LoadOptions{Profile: shared.profile, Set: set})
	if err != nil {
		t.Fatalf("load spec: %v", err)
	}
	return s
}

// step is what the CLI would hand the runner for s, in s's namespace
// (backend sets it).
func step(s *schemas.Spec, runID string) runner.Step {
	return runner.Step{
		Name: s.Metadata.Name, Kind: string(s.Spec.Kind), Entrypoint: s.Spec.Entrypoint, RuntimeEnv: s.Spec.RuntimeEnv,
		ProvisionTimeout: s.Spec.Timeouts.Provision, RunTimeout: s.Spec.Timeouts.Run,
		Teardown:  runner.TeardownPolicy(s.Spec.Teardown),
		Dagster:   runner.Dagster{RunID: runID, StepKey: "train", AssetKeys: []string{"e2e/model"}},
		Namespace: s.Metadata.Namespace,
	}
}

// backend builds a KubeRay backend for s in ns on cfg (nil: the admin),
// counting its API requests in cnt (may be nil).
func backend(t *testing.T, s *schemas.Spec, ns string, cfg *rest.Config, cnt *counter) *kuberay.Backend {
	t.Helper()
	if cfg == nil {
		cfg = shared.k8s.Config
	}
	opts := kuberay.ConnectOptions{UserAgent: "raystep-e2e", Warn: func(m string) { t.Logf("warning: %s", m) }}
	if cnt != nil {
		opts.Wrap = cnt.wrap
	}
	c, err := kuberay.NewClients(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Metadata.Namespace = ns // where step places the RayJob
	return &kuberay.Backend{
		Kube: c.Kube, Ray: c.Ray, Config: c.Config, Spec: s, Profile: shared.profile,
		Dashboard: kuberay.DashboardOptions{URL: shared.head.DashboardURL()},
		Notify:    func(level, msg string) { t.Logf("backend %s: %s", level, msg) },
	}
}

// logWriter writes the runner's progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newRunner returns a runner over b with progress in the test log.
func newRunner(t *testing.T, b runner.Backend) *runner.Runner {
	return &runner.Runner{Backend: b, Connect: adapters.Connect, Pack: adapters.Pack, Stdout: logWriter{t}, Events: runner.SinkFunc(func(e runner.Event) { t.Logf("%s %s: %s", e.Phase, e.Kind, e.Message) }),
		// A job stopped while Ray still sets up its runtime env stays
		// PENDING until its supervisor starts: on a busy machine, longer
		// than the 30 s default; the tests check that it ends, not how fast.
		TeardownTimeout: 2 * time.Minute, StopTimeout: 2 * time.Minute, PollInterval: 200 * time.Millisecond}
}

// runID makes a run id unique to this test run.
func runID(t *testing.T) string {
	return strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// leftovers lists the RayJobs, RayClusters and pods left in ns.
func leftovers(ctx context.Context, ns string) string {
	var left []string
	jobs := &rayv1.RayJobList{}
	clusters := &rayv1.RayClusterList{}
	pods := &corev1.PodList{}
	for _, l := range []client.ObjectList{jobs, clusters, pods} {
		if err := shared.k8s.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
	}
	for _, j := range jobs.Items {
		left = append(left, "RayJob "+j.Name)
	}
	for _, c := range clusters.Items {
		left = append(left, "RayCluster "+c.Name)
	}
	for _, p := range pods.Items {
		left = append(left, "Pod "+p.Name)
	}
	return strings.Join(left, ", ")
}

// nothingLeft fails the test if anything of the step is left in ns.
func nothingLeft(t *testing.T, ns string) {
	t.Helper()
	if left := leftovers(t.Context(), ns); left != "" {
		t.Errorf("left behind in %s: %s", ns, left)
	}
}

// counter counts API requests by verb and resource.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[requestKind(r)]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// counts returns the counts and their total.
func (c *counter) counts() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
		total += v
	}
	return out, total
}

func (c *counter) String() string {
	counts, total := c.counts()
	var parts []string
	for k, v := range counts {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%d requests: %s", total, strings.Join(parts, " "))
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// requestKind names a request like "watch pods" or "patch rayjobs".
func requestKind(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	i := slices.Index(parts, "namespaces")
	rest := []string{}
	if i >= 0 && i+2 < len(parts) {
		rest = parts[i+2:]
	}
	verb := strings.ToLower(r.Method)
	switch {
	case len(rest) == 0:
		return verb + " " + r.URL.Path
	case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		verb = "watch"
	case r.Method == http.MethodGet && len(rest) == 1:
		verb = "list"
	case r.Method == http.MethodPost:
		verb = "create"
	}
	res := rest[0]
	if len(rest) == 3 {
		res += "/" + rest[2]
	}
	return verb + " " + res
}
