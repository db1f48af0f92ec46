package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/raystep/raystep/schemas"
)

// ClusterHash returns 16 hex digits of the SHA-256 of the resolved cluster
// section c (its defaults applied; Reuse itself left out), so steps with
// the same cluster get the same hash whatever spelling their files used.
func ClusterHash(c schemas.Cluster) string {
	c.Reuse = ""
	b, err := json.Marshal(c)
	if err != nil { // a struct of strings, numbers and quantities
		panic(fmt.Sprintf("encode cluster section: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// RunClusterName is the DNS-1035 name of the run-scoped cluster of the
// Dagster run runID with the cluster section of hash: "run-", 8
// characters of the run id (its letters and digits, lower-cased) and 8
// of the hash. Dagster's run ids are UUIDs, whose first 8 hex digits
// tell the runs of a deployment apart.
func RunClusterName(runID, hash string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(runID) {
		if b.Len() == 8 {
			break
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	return "run-" + b.String() + "-" + hash[:8]
}
