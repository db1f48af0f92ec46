package schemas

import (
	"fmt"
	"strings"
)

// Shape describes the cluster, e.g. "head 2 CPU 4Gi; gpu 2x(8 CPU
// 32Gi 1 a100-80gb)".
func (c Cluster) Shape() string {
	parts := []string{fmt.Sprintf("head %s CPU %s", c.Head.CPUs.String(), c.Head.Memory.String())}
	for _, w := range c.Workers {
		desc := fmt.Sprintf("%s %dx(%s CPU %s", w.Name, w.Replicas, w.CPUs.String(), w.Memory.String())
		if w.GPUsPerWorker > 0 {
			desc += fmt.Sprintf(" %d %s", w.GPUsPerWorker, w.GPUType)
		}
		parts = append(parts, desc+")")
	}
	return strings.Join(parts, "; ")
}
