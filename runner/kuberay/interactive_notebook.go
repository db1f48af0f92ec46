package kuberay

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/raystep/raystep/notebook"
	"github.com/raystep/raystep/schemas"
)

// The notebook of an interactive cluster (`up --notebook`) keeps its port,
// app and token in the Secret NotebookSecretName(cluster), owned by the
// RayCluster, so the garbage collector deletes it with the cluster and
// `raystep notebook NAME` finds it again. up keeps a copy on the machine
// it ran on (KeepDir), which raystep reads first: a person needs create
// on secrets for it, and get only to reach the notebook from elsewhere.
const (
	notebookTokenKey = "token"
	notebookPortKey  = "port"
	notebookAppKey   = "app"
)

// AnnotationNotebook marks an interactive cluster whose notebook answered
// once (its value is the notebook's app: schemas.NotebookLab or NotebookServer), so that ls and
// the ui can say it has one without reading its Secret.
const AnnotationNotebook = "raystep.dev/notebook"

// MarkNotebook annotates rc with AnnotationNotebook for s.
func (i *Interactive) MarkNotebook(ctx context.Context, rc *rayv1.RayCluster, s notebook.Server) error {
	app := s.App
	if app == "" {
		app = schemas.NotebookLab
	}
	if rc.Annotations[AnnotationNotebook] == app {
		return nil
	}
	// The uid makes the patch fail on another RayCluster of the same name.
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, rc.UID, AnnotationNotebook, app)
	if _, err := i.Ray.RayV1().RayClusters(rc.Namespace).Patch(ctx, rc.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("mark RayCluster %s/%s as having a notebook: %w", rc.Namespace, rc.Name, err)
	}
	return nil
}

// NotebookSecretName names the Secret of the notebook of cluster.
func NotebookSecretName(cluster string) string { return cluster + "-notebook" }

// KeepNotebook returns the notebook already kept for rc (up again on a
// live cluster) or, when there is none, keeps s in a new Secret owned by
// rc and returns it.
func (i *Interactive) KeepNotebook(ctx context.Context, rc *rayv1.RayCluster, s notebook.Server) (notebook.Server, error) {
	name := NotebookSecretName(rc.Name)
	secret := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: rc.Namespace, Labels: maps.Clone(rc.Labels),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster", Name: rc.Name, UID: rc.UID}},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr(true),
		Data: map[string][]byte{notebookTokenKey: []byte(s.Token), notebookPortKey: []byte(strconv.Itoa(s.Port)),
			notebookAppKey: []byte(s.App)},
	}
	if kept, err := i.keptNotebook(rc); err == nil {
		return kept, nil // up again, on the machine that started it
	}
	_, err := i.Kube.CoreV1().Secrets(rc.Namespace).Create(ctx, secret, metav1.CreateOptions{FieldManager: FieldManager})
	switch {
	case apierrors.IsAlreadyExists(err):
		return i.ReadNotebook(ctx, rc)
	case refused(err):
		return s, fmt.Errorf("create notebook Secret %s/%s: %w (raystep's Role needs create on secrets)", rc.Namespace, name, err)
	case err != nil:
		return s, fmt.Errorf("create notebook Secret %s/%s: %w", rc.Namespace, name, err)
	}
	if b, err := json.Marshal(s); err == nil {
		if err := i.keep(rc, keptNotebook, b); err != nil && i.Notify != nil {
			i.Notify("WARNING", err.Error()+": only who may get Secrets here will reach the notebook")
		}
	}
	return s, nil
}

// keptNotebook is the notebook this machine keeps for rc.
func (i *Interactive) keptNotebook(rc *rayv1.RayCluster) (notebook.Server, error) {
	var s notebook.Server
	b, err := i.kept(rc, keptNotebook)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Token == "" || s.Port <= 0 || s.Port > 65535 {
		return notebook.Server{}, fmt.Errorf("the notebook kept for RayCluster %s/%s is not one (%v)", rc.Namespace, rc.Name, err)
	}
	return s, nil
}

// ReadNotebook returns the notebook kept for rc, or an error wrapping
// notebook.ErrNone when rc was brought up without --notebook.
func (i *Interactive) ReadNotebook(ctx context.Context, rc *rayv1.RayCluster) (notebook.Server, error) {
	if s, err := i.keptNotebook(rc); err == nil {
		return s, nil
	}
	name := NotebookSecretName(rc.Name)
	sec, err := i.Kube.CoreV1().Secrets(rc.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return notebook.Server{}, fmt.Errorf("RayCluster %s/%s: %w: it was brought up without --notebook (raystep up --notebook --name %s starts one)",
			rc.Namespace, rc.Name, notebook.ErrNone, rc.Name)
	case refused(err):
		return notebook.Server{}, fmt.Errorf("read notebook Secret %s/%s: %w (its token is kept on the machine that ran "+
			"raystep up --notebook: run raystep notebook there, or ask for get on that Secret)", rc.Namespace, name, err)
	case err != nil:
		return notebook.Server{}, fmt.Errorf("read notebook Secret %s/%s: %w", rc.Namespace, name, err)
	}
	owned := false
	for _, o := range sec.OwnerReferences {
		owned = owned || o.Kind == "RayCluster" && o.UID == rc.UID
	}
	port, perr := strconv.Atoi(string(sec.Data[notebookPortKey]))
	s := notebook.Server{Port: port, App: string(sec.Data[notebookAppKey]), Token: string(sec.Data[notebookTokenKey])}
	switch {
	case !owned:
		return notebook.Server{}, fmt.Errorf("Secret %s/%s is not owned by RayCluster %s: raystep does not read its token", rc.Namespace, name, rc.Name)
	case s.Token == "" || perr != nil || port <= 0 || port > 65535:
		return notebook.Server{}, fmt.Errorf("Secret %s/%s: want keys %s and %s (a port)", rc.Namespace, name, notebookTokenKey, notebookPortKey)
	}
	return s, nil
}
