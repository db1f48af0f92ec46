package kuberay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/raystep/raystep/fleet"
)

// Keeper is the interactive clusters of one namespace as fleet.Keeper.
type Keeper struct {
	// Connect reaches the API server, once the names were checked: the
	// interactive clusters and the namespace to look in.
	Connect func() (*Interactive, string, error)
}

var _ fleet.Keeper = Keeper{}

// Down checks the names, finds every cluster, then deletes them all at
// once and waits for each; a step's cluster or anyone else's RayCluster is
// never touched (ErrNotInteractive).
func (k Keeper) Down(ctx context.Context, names []string, gone func(string)) error {
	for _, n := range names {
		if msgs := validation.IsDNS1035Label(n); len(msgs) > 0 {
			return fmt.Errorf("down: %w", fleet.BadName(fmt.Sprintf("%q is not a cluster name: %s", n, strings.Join(msgs, "; "))))
		}
	}
	i, ns, err := k.Connect()
	if err != nil {
		return err
	}
	var found []*rayv1.RayCluster
	var errs []error
	for _, n := range names {
		rc, err := i.Find(ctx, ns, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("down: %w", err))
			continue
		}
		found = append(found, rc)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	errs = make([]error, len(found))
	var wg sync.WaitGroup
	var mu sync.Mutex // the lines of the deletes that end together
	for j, rc := range found {
		wg.Go(func() {
			if errs[j] = i.Delete(ctx, rc.Namespace, rc.Name, rc.UID); errs[j] == nil {
				_ = i.Forget(rc.Namespace, rc.Name) // the tokens of a cluster that is gone
				mu.Lock()
				defer mu.Unlock()
				gone(fmt.Sprintf("RayCluster %s/%s deleted", rc.Namespace, rc.Name))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
