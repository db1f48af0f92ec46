package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	authv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/raystep/raystep/test/cluster"
)

// The test here runs the built binary as it runs in a Dagster run pod:
// no kubeconfig, KUBERNETES_SERVICE_HOST/PORT pointing at the API server,
// and the pod's service-account token, CA and namespace at the fixed paths
// client-go's in-cluster loading reads. It gets its own mount namespace
// (unshare) in which a tmpfs over /var/run holds those files, and an
// /etc/hosts that maps the head service's cluster DNS name to a loopback
// address where a relay answers on port 8265 for the shared Ray head; its
// /etc/resolv.conf names only 127.0.0.1, so no lookup leaves the machine.
// Nothing on the host changes.

// inPodScript sets up the pod's files in the new mount namespace and runs
// the command after its three arguments: the service-account directory,
// the hosts file and the resolv.conf file.
const inPodScript = `set -e
mount -t tmpfs -o mode=0755 raystep-test /var/run
mkdir -p /var/run/secrets/kubernetes.io/serviceaccount
cp "$1"/token "$1"/ca.crt "$1"/namespace /var/run/secrets/kubernetes.io/serviceaccount/
mount --bind "$2" /etc/hosts
mount --bind "$3" /etc/resolv.conf
shift 3
exec "$@"
`

// TestInClusterUsesServiceAccountAndServiceDNS: raystep in a pod loads the
// real in-cluster config (the ServiceAccount's token from the TokenRequest
// API, under the example Role), reaches the dashboard by the head
// service's cluster DNS name, runs the step to the end and exits 0. It
// runs in parallel with the other tests that do not make the kubelet
// unreachable.
func TestInClusterUsesServiceAccountAndServiceDNS(t *testing.T) {
	t.Parallel()
	setup(t)
	unshare := requireUnshare(t)
	bin := buildRaystep(t)
	ns := namespace(t, "e2e-incluster")
	t.Cleanup(func() { cleanNamespace(t, ns) })
	applyRBAC(t, stepRole, ns, func(rules []any) []any { return rules })
	relay := startDashboardRelay(t)
	dir := t.TempDir()
	sa, hosts, resolv := writePodFiles(t, dir, ns)

	s := newDagsterStep(t, bin, ns)
	api, err := url.Parse(shared.k8s.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	s.env = slices.DeleteFunc(s.env, func(kv string) bool {
		return strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "RAYSTEP_DASHBOARD_URL=") || strings.HasPrefix(kv, "HOME=")
	})
	s.env = append(s.env, "HOME="+dir, "KUBERNETES_SERVICE_HOST="+api.Hostname(), "KUBERNETES_SERVICE_PORT="+api.Port())
	s.args = append([]string{"--mount", "--propagation", "private", "sh", "-c", inPodScript, "sh", sa, hosts, resolv, bin}, s.args...)
	s.bin = unshare
	rayJobs := watchRayJobs(t, ns)
	p := s.start(t)

	// The head service is named after the RayCluster, which the operator
	// creates (Initializing) before its head pod can be ready.
	select {
	case <-rayJobs.reachedStatus(rayv1.JobDeploymentStatusInitializing):
	case <-p.done:
		t.Fatalf("raystep exited (%v) before its RayJob was Initializing:\n%s", p.err, p.out.String())
	case <-time.After(4 * time.Minute):
		t.Fatal("RayJob not Initializing after 4m")
	}
	service := headServiceHost(t, ns, s.id)
	if err := os.WriteFile(hosts, fmt.Appendf(nil, "127.0.0.1 localhost\n%s %s\n", relay.ip, service), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("raystep in a pod exited %d, want 0\n%s", code, p.out.String())
	}
	if !strings.Contains(p.out.String(), "hello from kuberay") {
		t.Errorf("the job's log did not reach raystep's output:\n%s", p.out.String())
	}
	want := "http://" + service + ":8265"
	if got := materialized(t, s.messages, "raystep/dashboard_url"); got != want {
		t.Errorf("materialization raystep/dashboard_url = %v, want %s", got, want)
	}
	if relay.conns.Load() == 0 {
		t.Errorf("nothing came through %s:8265: raystep did not use the service's DNS name", relay.ip)
	}
	nothingLeft(t, ns)
}

// requireUnshare returns the unshare executable, failing the test (CI runs
// as root on machines where mount namespaces work) when it cannot be used.
func requireUnshare(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("TestInCluster needs unshare(1) (util-linux) to give raystep a pod's files without touching the host: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("TestInCluster needs root for `unshare --mount` (a private mount namespace holding a pod's service-account files); running as uid %d", os.Geteuid())
	}
	if out, err := exec.CommandContext(t.Context(), path, "--mount", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Fatalf("TestInCluster needs `unshare --mount` to work here: %v: %s", err, out)
	}
	return path
}

// writePodFiles writes what a pod of ns running as the raystep
// ServiceAccount sees: its service-account directory (a token from the
// TokenRequest API, the API server's CA, the namespace), an /etc/hosts
// without the head service yet, and a resolv.conf that sends lookups
// nowhere but 127.0.0.1.
func writePodFiles(t *testing.T, dir, ns string) (sa, hosts, resolv string) {
	t.Helper()
	tr, err := shared.k8s.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), "raystep",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token for %s/raystep: %v", ns, err)
	}
	awaitTokenAllowed(t, ns, tr.Status.Token)
	sa = filepath.Join(dir, "serviceaccount")
	hosts, resolv = filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")
	files := map[string][]byte{
		filepath.Join(sa, "token"): []byte(tr.Status.Token), filepath.Join(sa, "ca.crt"): shared.k8s.Config.CAData,
		filepath.Join(sa, "namespace"): []byte(ns), hosts: []byte("127.0.0.1 localhost\n"), resolv: []byte("nameserver 127.0.0.1\n"),
	}
	if len(shared.k8s.Config.CAData) == 0 {
		t.Fatal("the test API server's config has no CA data")
	}
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return sa, hosts, resolv
}

// awaitTokenAllowed waits until the API server, authenticating token,
// lets it create RayJobs in ns: the authorizer learns of the Role and its
// binding by watch, a moment after they were created.
func awaitTokenAllowed(t *testing.T, ns, token string) {
	t.Helper()
	cfg := &rest.Config{Host: shared.k8s.Config.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: shared.k8s.Config.CAData}}
	awaitAllowed(t, cfg, "the "+ns+"/raystep token", ns, permission{"ray.io", "rayjobs", "create"})
}

// headServiceHost returns the cluster DNS name of the head service of the
// RayJob's RayCluster: KubeRay's NAME-head-svc.NS.svc.cluster.local.
func headServiceHost(t *testing.T, ns, name string) string {
	t.Helper()
	job := &rayv1.RayJob{}
	if err := shared.k8s.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
		t.Fatal(err)
	}
	if job.Status.RayClusterName == "" {
		t.Fatalf("RayJob %s/%s is %s without a RayCluster name", ns, name, job.Status.JobDeploymentStatus)
	}
	return fmt.Sprintf("%s-head-svc.%s.svc.cluster.local", job.Status.RayClusterName, ns)
}

// dashboardRelay answers on ip:8265 for the shared Ray head, as the head
// service does in a cluster.
type dashboardRelay struct {
	ip    string
	conns atomic.Int64
}

// startDashboardRelay listens on port 8265 of a random 127.x.y.z address
// and relays every connection to the shared Ray head until the test ends.
func startDashboardRelay(t *testing.T) *dashboardRelay {
	t.Helper()
	target, err := url.Parse(shared.head.DashboardURL())
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	r := &dashboardRelay{}
	for range 10 {
		r.ip = fmt.Sprintf("127.%d.%d.%d", 2+rand.IntN(250), rand.IntN(256), 1+rand.IntN(254))
		if ln, err = net.Listen("tcp", net.JoinHostPort(r.ip, fmt.Sprint(cluster.DashboardPort))); !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		t.Fatalf("listen on a loopback address's port 8265: %v", err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			r.conns.Add(1)
			go relayConn(in, target.Host)
		}
	}()
	return r
}

// relayConn copies in to addr and back until either side closes.
func relayConn(in net.Conn, addr string) {
	defer in.Close()
	out, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

// cleanNamespace deletes what applyRBAC created in ns (labelled
// app.kubernetes.io/name=raystep) and waits, within a bound that only
// catches a hang, until ns holds nothing the test or the step created
// (the garbage collector removes the heartbeat Lease and the head Service
// with the RayJob); then it removes ns itself. Register it right after
// namespace, so that it runs after the test's other cleanups.
func cleanNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mine := []client.DeleteAllOfOption{client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "raystep"}}
	for _, o := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		if err := shared.k8s.Client.DeleteAllOf(ctx, o, mine...); err != nil {
			t.Errorf("delete %T in %s: %v", o, ns, err)
		}
	}
	kinds := []client.ObjectList{&corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
		&coordinationv1.LeaseList{}, &corev1.ServiceList{}, &corev1.SecretList{}, &corev1.ConfigMapList{}}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		left := leftovers(ctx, ns)
		for _, l := range kinds {
			if err := shared.k8s.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
				left += " " + err.Error()
			} else if n := meta.LenList(l); n > 0 {
				left += fmt.Sprintf(" %d in %T", n, l)
			}
		}
		if left == "" {
			removeNamespace(ctx, t, ns)
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("left in %s after the test: %s", ns, left)
			return
		case <-tick.C:
		}
	}
}

// removeNamespace deletes the empty namespace ns and finalizes it, as the
// namespace controller (not running here) would, so that it is gone.
func removeNamespace(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	namespaces := shared.k8s.Clientset.CoreV1().Namespaces()
	if err := namespaces.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete namespace %s: %v", ns, err)
		return
	}
	got, err := namespaces.Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Errorf("get namespace %s: %v", ns, err)
		return
	}
	got.Spec.Finalizers = nil
	if _, err := namespaces.Finalize(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Errorf("finalize namespace %s: %v", ns, err)
		return
	}
	if _, err := namespaces.Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s still there after finalizing (%v)", ns, err)
	}
}
