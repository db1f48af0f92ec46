package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/runner/kuberay"
	"github.com/raystep/raystep/runner/kuberay/kubeapi/kubeapitest"
)

// plantedToken is the page's auth token; no answer may contain it.
const plantedToken = "planted-secret-token-4f1c9e"

// event is one server-sent event.
type event struct{ name, data string }

// stream opens /events with the token and returns its events as they come.
func stream(t *testing.T, ctx context.Context, base string) <-chan event {
	t.Helper()
	return streamPath(t, ctx, base+"/events", []string{plantedToken})
}

// streamPath opens the server-sent events at url with the token and
// returns them as they come; an event that carries one of secrets fails
// the test.
func streamPath(t *testing.T, ctx context.Context, url string, secrets []string) <-chan event {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+plantedToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := make(chan event, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var e event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			case line == "":
				for _, s := range secrets {
					if strings.Contains(e.data, s) {
						t.Errorf("event %s of %s carries a secret", e.name, url)
					}
				}
				out <- e
				e = event{}
			}
		}
	}()
	return out
}

// await reads events until match accepts one, failing at the deadline.
func await(t *testing.T, events <-chan event, what string, match func(event) bool) event {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("waiting for %s: the event stream ended", what)
			}
			if match(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("waiting for %s: no such event in 2m", what)
		}
	}
}

func upsertOf(key string, status func(string) bool) func(event) bool {
	return func(e event) bool {
		if e.name != "upsert" {
			return false
		}
		var r Row
		return json.Unmarshal([]byte(e.data), &r) == nil && r.Key == key && status(r.Status)
	}
}

func stepJob(ns, name string) *rayv1.RayJob {
	return &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{kuberay.LabelManagedBy: kuberay.ManagedByRaystep, kuberay.LabelOwner: "ads-ranking",
				kuberay.LabelKind: "train", kuberay.LabelRunID: "run-1234"},
			Annotations: map[string]string{kuberay.AnnotationGPUs: "a100-80gb=2", kuberay.AnnotationAssetKey: "ads/ranker"}},
		Spec: rayv1.RayJobSpec{
			Entrypoint: "python train.py", SubmissionMode: rayv1.InteractiveMode, Suspend: true,
			// A job env value, never to be shown.
			RuntimeEnvYAML: "env_vars: {API_KEY: " + plantedToken + "}",
			RayClusterSpec: &rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: "rayproject/ray:2.60.0",
					Env: []corev1.EnvVar{{Name: "TOKEN", Value: plantedToken}}}}}}}},
		},
	}
}

// TestLiveList runs the server on the real API server and KubeRay
// operator: a raystep RayJob appears in /api/clusters, in the page and
// as a live event; its status change and its deletion arrive live.
func TestLiveList(t *testing.T) {
	c := sharedCluster(t)
	ray, err := rayclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	const ns = "default"
	store := &Store{}
	own := kubeapitest.New(t, c.Config) // raystep ui's own clients
	if err := store.Watch(ctx, own, own, ns); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&Server{Store: store, Auth: Auth{Token: plantedToken}, Scope: "namespace " + ns}).Handler())
	defer srv.Close()
	defer cancel() // first: ends the event stream, which srv.Close waits for
	events := stream(t, ctx, srv.URL)
	await(t, events, "the first snapshot", func(e event) bool { return e.name == "snapshot" })

	job, err := ray.RayV1().RayJobs(ns).Create(ctx, stepJob(ns, "ads-train-1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := "step/" + ns + "/" + job.Name
	await(t, events, "the queued job", upsertOf(key, func(s string) bool { return s == StatusQueued }))

	page := get(t, srv.URL+"/", plantedToken, http.StatusOK)
	for _, want := range []string{"ads-train-1", "ads-ranking", "a100-80gb × 2", StatusQueued} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	var api []fleet.Record
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/api/clusters", plantedToken, http.StatusOK)), &api); err != nil {
		t.Fatal(err)
	}
	if len(api) != 1 || api[0].Name != job.Name || api[0].GPUs != "a100-80gb=2" || api[0].Owner != "ads-ranking" {
		t.Errorf("/api/clusters = %+v, want the one job", api)
	}

	patch := []byte(`{"spec":{"suspend":false}}`)
	if _, err := ray.RayV1().RayJobs(ns).Patch(ctx, job.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, events, "the job leaving the queue", upsertOf(key, func(s string) bool { return s != StatusQueued }))

	if err := ray.RayV1().RayJobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, events, "the job's removal", func(e event) bool { return e.name == "remove" && strings.Contains(e.data, key) })
	if page := get(t, srv.URL+"/", plantedToken, http.StatusOK); strings.Contains(page, "ads-train-1") {
		t.Errorf("the page still lists the deleted job")
	}

	// An interactive cluster whose notebook answered: its row gives the
	// command that opens it, and the notebook's token is not on the page.
	rc, err := ray.RayV1().RayClusters(ns).Create(ctx, notebookCluster(ns, "nora-dev"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rcKey := kuberay.KindInteractive + "/" + ns + "/" + rc.Name
	const open = "raystep notebook -n " + ns + " nora-dev"
	e := await(t, events, "the interactive cluster", upsertOf(rcKey, func(string) bool { return true }))
	var row Row
	if err := json.Unmarshal([]byte(e.data), &row); err != nil || row.Notebook != open {
		t.Errorf("the cluster's row says notebook %q (%v), want %q", row.Notebook, err, open)
	}
	if page := get(t, srv.URL+"/", plantedToken, http.StatusOK); !strings.Contains(page, open) {
		t.Errorf("the page lacks %q:\n%s", open, page)
	}
}

// notebookCluster is an interactive RayCluster as `raystep up --notebook`
// leaves it, with the notebook's token planted where it must stay.
func notebookCluster(ns, name string) *rayv1.RayCluster {
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{kuberay.LabelManagedBy: kuberay.ManagedByRaystep, kuberay.LabelOwner: "nora",
				kuberay.LabelKind: kuberay.KindInteractive},
			Annotations: map[string]string{kuberay.AnnotationGPUs: "a100-80gb=1", kuberay.AnnotationNotebook: "lab",
				kuberay.AnnotationExpires: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}},
		Spec: rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: "rayproject/ray:2.60.0",
				Env: []corev1.EnvVar{{Name: "JUPYTER_TOKEN", Value: plantedToken}}}}}}}},
	}
}

// get fetches url with token ("" for none), checks the status code and
// that the answer never carries the token, and returns the body.
func get(t *testing.T, url, token string, code int) string {
	t.Helper()
	resp, body := fetch(t, url, token, []string{plantedToken})
	if resp.StatusCode != code {
		t.Fatalf("GET %s: %s, want %d", url, resp.Status, code)
	}
	return body
}

// getAll is get with the token, wanting 200, checking for every one of secrets.
func getAll(t *testing.T, url string, secrets []string) string {
	t.Helper()
	resp, body := fetch(t, url, plantedToken, secrets)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	return body
}

// fetch GETs url with token ("" for none) and returns the answer and its
// body, failing the test when the body or a header carries one of secrets.
func fetch(t *testing.T, url, token string, secrets []string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, s := range secrets {
		if strings.Contains(string(b), s) || strings.Contains(fmt.Sprint(resp.Header), s) {
			t.Errorf("GET %s: the answer carries a secret", url)
		}
	}
	return resp, string(b)
}
