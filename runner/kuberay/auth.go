package kuberay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/raystep/raystep/raysubmit"
	"github.com/raystep/raystep/runner"
)

// Ray's token authentication (schemas.RayAuth.On: the profile's
// spec.rayAuth.mode, by default on for Ray 2.52.0 and newer). Build sets
// the RayCluster's authOptions to mode token with secretName
// AuthSecretName(step.ID); KubeRay then puts RAY_AUTH_MODE=token and
// RAY_AUTH_TOKEN (from that Secret's key auth_token) into every Ray
// container, and creates no Secret of its own. raystep creates the Secret
// itself, right after the RayJob and owned by it (the garbage collector
// deletes it with the RayJob), with a fresh 256-bit random token, or
// RAYSTEP_DASHBOARD_TOKEN when the platform fixes one, and sends the same
// token with its own dashboard requests; if the Secret is deleted while
// the step runs, teardown makes it again (restoreSecret). So raystep only
// ever creates Secrets, and never reads one, except when a restarted step
// re-attaches to a RayJob whose Secret a killed attempt created: then the
// token is only in that Secret, and raystep reads it (get on secrets) or,
// when it may not, fails saying so. The token never appears in a log line,
// event or error: only its Secret's name does.

// AuthTokenKey is the key of the token in the Secret, as KubeRay reads it.
const AuthTokenKey = "auth_token"

// AuthSecretName returns the name of the token Secret of the RayJob
// named job.
func AuthSecretName(job string) string { return job + "-ray-auth" }

// NewAuthToken returns a fresh random token: 256 bits from crypto/rand,
// hex encoded, as Ray's own `ray get-auth-token --generate` makes them.
func NewAuthToken() (string, error) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("make a ray auth token: %w", err)
	}
	return hex.EncodeToString(buf), nil
}

// AuthSecret returns the token Secret of job without its token, or nil
// when job's cluster has no token authentication. It carries job's
// labels and is owned by job (job.UID, empty before the RayJob exists).
func AuthSecret(job *rayv1.RayJob) *corev1.Secret {
	return authSecret(job.Spec.RayClusterSpec, &job.ObjectMeta, "RayJob")
}

// authSecret is the token Secret of the cluster cs, owned by the object
// of kind owner that meta describes; nil without token authentication.
func authSecret(cs *rayv1.RayClusterSpec, meta *metav1.ObjectMeta, owner string) *corev1.Secret {
	if cs == nil || cs.AuthOptions == nil || cs.AuthOptions.Mode != rayv1.AuthModeToken || cs.AuthOptions.SecretName == nil {
		return nil
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: *cs.AuthOptions.SecretName, Namespace: meta.Namespace, Labels: maps.Clone(meta.Labels),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: rayv1.GroupVersion.String(), Kind: owner, Name: meta.Name, UID: meta.UID}},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr(true),
	}
}

// authorize creates the token Secret of job (created by this step, or
// found by it when attached) and keeps the token for the dashboard. A
// cluster without token authentication keeps the configured token.
func (c *Cluster) authorize(ctx context.Context, job *rayv1.RayJob, attached bool) error {
	secret := AuthSecret(job)
	if secret == nil {
		return nil
	}
	token := c.b.Dashboard.Token
	if token == "" {
		var err error
		if token, err = NewAuthToken(); err != nil {
			return err
		}
	}
	secret.Data = map[string][]byte{AuthTokenKey: []byte(token)}
	secrets := c.b.Kube.CoreV1().Secrets(job.Namespace)
	_, err := secrets.Create(ctx, secret, metav1.CreateOptions{FieldManager: FieldManager})
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err) && attached && c.b.Dashboard.Token == "":
		if token, err = c.readToken(ctx, secret.Name); err != nil {
			return err
		}
	case apierrors.IsAlreadyExists(err) && attached:
		// The platform's fixed token: the killed attempt used it too.
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("create token Secret %s/%s for RayJob %s: a Secret of that name exists and raystep did not create it for this RayJob: delete it, or run the step under another Dagster run",
			job.Namespace, secret.Name, c.Name())
	default:
		return fmt.Errorf("create token Secret %s/%s for RayJob %s: %w", job.Namespace, secret.Name, c.Name(), err)
	}
	secret.Data = map[string][]byte{AuthTokenKey: []byte(token)}
	c.token, c.secret = token, secret
	return nil
}

// restoreSecret makes the token Secret again if it is gone: before
// teardown deletes the RayJob (someone deleted it while the step ran), and
// when the RayJob is heldForSecret, saying why. KubeRay lets a deleted
// RayJob whose Ray job has not ended go only once it has asked the
// dashboard to stop that job, with a client it builds from this Secret
// (see deleteRayJobOptions). A Secret still there, the usual case, is left
// as it is; no other error stops the teardown, nor does a teardown already
// cancelled by a second signal wait for this.
func (c *Cluster) restoreSecret(ctx context.Context, why string) {
	if c.secret == nil || ctx.Err() != nil {
		return
	}
	_, err := c.b.Kube.CoreV1().Secrets(c.ns).Create(ctx, c.secret.DeepCopy(), metav1.CreateOptions{FieldManager: FieldManager})
	switch {
	case err == nil:
		c.b.Notify.warn(fmt.Sprintf("token Secret %s/%s %s; raystep made it again, as KubeRay needs it to let RayJob %s go", c.ns, c.secret.Name, why, c.Name()))
	case apierrors.IsAlreadyExists(err):
	default:
		c.b.Notify.warn(fmt.Sprintf("could not make sure the token Secret %s/%s of RayJob %s exists (%v): if it is gone, KubeRay keeps the deleted RayJob", c.ns, c.secret.Name, c.Name(), err))
	}
}

// checkToken asks the dashboard for Ray's version with the token, so
// that a cluster whose Ray runs with another token fails at once, naming
// the token's Secret (Ray answers 403 to a wrong token, 401 to none).
func (c *Cluster) checkToken(ctx context.Context, d runner.Dashboard) error {
	if c.secret == nil {
		return nil
	}
	rc, err := raysubmit.New(raysubmit.Config{BaseURL: d.URL, Headers: d.Headers, Token: d.Token, CAFile: d.CAFile, UserAgent: "raystep"})
	if err != nil {
		return fmt.Errorf("ray jobs client for %s: %w", d.URL, err)
	}
	rc.HTTP.RetryMax = 0 // one look: retrying an unreachable dashboard is the Jobs client's job
	_, err = rc.Version(ctx)
	var api *raysubmit.APIError
	if !errors.As(err, &api) || api.StatusCode != http.StatusUnauthorized && api.StatusCode != http.StatusForbidden {
		return nil // the Jobs client that follows says what else went wrong
	}
	from := "a fresh token"
	if c.b.Dashboard.Token != "" {
		from = "RAYSTEP_DASHBOARD_TOKEN"
	}
	where := "did the cluster's pods start with RAY_AUTH_TOKEN from that Secret?"
	if c.b.Dashboard.URL != "" {
		where = "is RAYSTEP_DASHBOARD_URL the dashboard of this RayJob's cluster?"
	}
	shown := d.PublicURL
	if shown == "" {
		shown = d.URL
	}
	return fmt.Errorf("dashboard %s refused raystep's token (HTTP %d: %s): the cluster's Ray does not run with the token raystep put in Secret %s/%s (%s): %s",
		shown, api.StatusCode, strings.TrimSpace(api.Body), c.ns, c.secret.Name, from, where)
}

// readToken reads the token of a RayJob this step re-attaches to from
// the Secret named name, which a killed attempt created; it must be
// owned by the RayJob.
func (c *Cluster) readToken(ctx context.Context, name string) (string, error) {
	s, err := c.b.Kube.CoreV1().Secrets(c.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsForbidden(err) {
		return "", fmt.Errorf("re-attach to RayJob %s: its Ray token is in Secret %s/%s, which raystep may not read: "+
			"grant get on secrets in namespace %s (the optional rule in examples/k8s/rbac.yaml), or set RAYSTEP_DASHBOARD_TOKEN "+
			"so that every attempt uses the same token: %w", c.Name(), c.ns, name, c.ns, err)
	}
	if err != nil {
		return "", fmt.Errorf("re-attach to RayJob %s: read token Secret %s/%s: %w", c.Name(), c.ns, name, err)
	}
	owned := false
	for _, o := range s.OwnerReferences {
		owned = owned || o.Kind == "RayJob" && o.Name == c.name && (c.uid == "" || o.UID == c.uid)
	}
	token := string(s.Data[AuthTokenKey])
	switch {
	case !owned:
		return "", fmt.Errorf("re-attach to RayJob %s: Secret %s/%s is not owned by it: delete the Secret", c.Name(), c.ns, name)
	case token == "":
		return "", fmt.Errorf("re-attach to RayJob %s: Secret %s/%s has no %s", c.Name(), c.ns, name, AuthTokenKey)
	}
	c.b.Notify.info(fmt.Sprintf("Ray token of RayJob %s read from Secret %s/%s", c.Name(), c.ns, name))
	return token, nil
}
