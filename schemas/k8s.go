package schemas

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// parseQuantity reads a Kubernetes quantity written as a string or number;
// msg explains why it is not one.
func parseQuantity(v any) (q resource.Quantity, msg string) {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case json.Number:
		s = v.String()
	case float64:
		s = fmt.Sprint(v)
	default:
		return q, "expected a Kubernetes quantity such as 2, 500m or 8Gi"
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return q, fmt.Sprintf("%q is not a Kubernetes quantity (e.g. 2, 500m, 8Gi)", s)
	}
	if q.Sign() < 0 {
		return q, fmt.Sprintf("%q must not be negative", s)
	}
	return q, ""
}

// mustQuantity parses a value that validation already accepted; def is used
// when v is absent.
func mustQuantity(v any, def string) resource.Quantity {
	if v == nil {
		if def == "" {
			return resource.Quantity{}
		}
		v = def
	}
	q, _ := parseQuantity(v)
	return q
}

// parseDuration reads a positive, whole-second Go duration that fits the
// int32 seconds Kubernetes uses; msg explains why not.
func parseDuration(s string) (time.Duration, string) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Sprintf("%q is not a duration (e.g. 90s, 15m, 24h)", s)
	case d < time.Second:
		return 0, fmt.Sprintf("%q must be at least 1s", s)
	case d%time.Second != 0:
		return 0, fmt.Sprintf("%q must be a whole number of seconds", s)
	case d/time.Second > math.MaxInt32:
		return 0, fmt.Sprintf("%q is too long (at most %d seconds)", s, math.MaxInt32)
	}
	return d, ""
}

func mustDuration(s, def string) time.Duration {
	d, _ := parseDuration(or(s, def))
	return d
}

// qualifiedName returns why s is not a Kubernetes qualified name, or "".
func qualifiedName(s string) string {
	return strings.Join(validation.IsQualifiedName(s), "; ")
}

// labelValue returns why s is not a Kubernetes label value, or "".
func labelValue(s string) string {
	return strings.Join(validation.IsValidLabelValue(s), "; ")
}

// checkLabels checks a map of labels (or node selectors) at ptr.
func checkLabels(file string, pos positions, errs *ValidationErrors, ptr string, v any) {
	m, _ := v.(map[string]any)
	for k, val := range m {
		p := ptr + "/" + escapeToken(k)
		if msg := qualifiedName(k); msg != "" {
			errs.add(file, pos, p, "%q is not a valid label key: %s", k, msg)
		}
		if s, ok := val.(string); ok {
			if msg := labelValue(s); msg != "" {
				errs.add(file, pos, p, "%q is not a valid label value: %s", s, msg)
			}
		}
	}
}
