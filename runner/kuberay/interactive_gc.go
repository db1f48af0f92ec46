package kuberay

import (
	"fmt"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// JudgeCluster decides whether `raystep gc` deletes the interactive or
// run-scoped cluster rc: once its expiry has passed, never before, and
// never one without a valid expiry (`raystep down` deletes that) or
// younger than o.OlderThan. The reason starts with the cluster's kind.
func JudgeCluster(rc *rayv1.RayCluster, now time.Time, o JudgeOptions) Verdict {
	v := Verdict{Cluster: rc}
	kind := KindInteractive
	if rc.Labels[LabelKind] == KindRun {
		kind = "run-scoped"
	}
	expiry, ok := Expiry(rc)
	switch {
	case rc.DeletionTimestamp != nil:
		v.Reason = "already being deleted"
	case now.Sub(rc.CreationTimestamp.Time) < o.OlderThan:
		v.Reason = fmt.Sprintf("younger than %s", o.OlderThan)
	case !ok:
		v.Reason = fmt.Sprintf("%s, no valid %s annotation (%q): `raystep down %s` deletes it",
			kind, AnnotationExpires, rc.Annotations[AnnotationExpires], rc.Name)
	case now.Before(expiry):
		v.Reason = fmt.Sprintf("%s, expires in %s (%s)", kind, expiry.Sub(now).Round(time.Second), expiry.UTC().Format(time.RFC3339))
	default:
		v.Collect = true
		v.Reason = fmt.Sprintf("%s, expired %s ago (%s)", kind, now.Sub(expiry).Round(time.Second), expiry.UTC().Format(time.RFC3339))
	}
	return v
}

// JudgeClusters judges each interactive cluster, in order.
func JudgeClusters(clusters []rayv1.RayCluster, now time.Time, o JudgeOptions) []Verdict {
	out := make([]Verdict, len(clusters))
	for i := range clusters {
		out[i] = JudgeCluster(&clusters[i], now, o)
	}
	return out
}
