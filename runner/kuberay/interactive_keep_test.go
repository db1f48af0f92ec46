package kuberay

import (
	"os"
	"path/filepath"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestKeep: what up keeps is the user's alone, found again only for the
// same cluster (its UID), and forgotten by name without touching a
// cluster whose name merely starts the same.
func TestKeep(t *testing.T) {
	t.Parallel()
	i := &Interactive{KeepDir: filepath.Join(t.TempDir(), "kuberay")}
	rc := func(name, uid string) *rayv1.RayCluster {
		return &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(uid)}}
	}
	dev := rc("alice-dev", "0b7c2d1e-1111-4222-8333-944455556666")
	dev2 := rc("alice-dev-2", "0b7c2d1e-1111-4222-8333-944455557777")
	for _, c := range []*rayv1.RayCluster{dev, dev2} {
		if err := i.keep(c, KeptRayToken, []byte("token-of-"+c.Name)); err != nil {
			t.Fatal(err)
		}
	}
	p := i.KeptPath(dev, KeptRayToken)
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept token %s: %v, %v; want mode 0600", p, fi, err)
	}
	if di, err := os.Stat(filepath.Dir(p)); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("kept dir: %v, %v; want mode 0700", di, err)
	}
	if b, err := i.kept(rc("alice-dev", "0b7c2d1e-1111-4222-8333-944455558888"), KeptRayToken); err == nil {
		t.Errorf("a new cluster of the same name found the old one's token %q", b)
	}
	if err := i.Forget("ml", "alice-dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := i.kept(dev, KeptRayToken); err == nil {
		t.Error("the token is still kept after Forget")
	}
	if b, err := i.kept(dev2, KeptRayToken); err != nil || string(b) != "token-of-alice-dev-2" {
		t.Errorf("Forget(alice-dev) took alice-dev-2's token too: %q, %v", b, err)
	}
	if err := (&Interactive{}).keep(dev, KeptRayToken, []byte("x")); err != nil {
		t.Errorf("keep without a KeepDir: %v, want nothing kept and no error", err)
	}
}
