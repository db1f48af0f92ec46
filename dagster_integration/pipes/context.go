package pipes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
)

// ErrUndefined is wrapped by Context accessors asked for something the
// current step does not define (no asset, several assets, no partition, an
// unknown extra).
var ErrUndefined = errors.New("undefined in the pipes context")

// ContextData is the context payload Dagster sends, field for field. Absent
// values are nil, as Dagster sends null.
type ContextData struct {
	// AssetKeys are the keys of the assets the step materializes, each
	// written as a user string (path parts joined by "/"); nil for an op.
	AssetKeys []string `json:"asset_keys"`
	// CodeVersionByAssetKey and ProvenanceByAssetKey hold, per asset key,
	// its code version and the provenance of its latest materialization;
	// a value is nil when Dagster has none.
	CodeVersionByAssetKey map[string]*string         `json:"code_version_by_asset_key"`
	ProvenanceByAssetKey  map[string]*DataProvenance `json:"provenance_by_asset_key"`
	// PartitionKey, PartitionKeyRange and PartitionTimeWindow describe
	// the one partition the step targets; nil when it targets none (or
	// several), PartitionTimeWindow also when the partitioning is not by
	// time in one dimension.
	PartitionKey        *string            `json:"partition_key"`
	PartitionKeyRange   *PartitionKeyRange `json:"partition_key_range"`
	PartitionTimeWindow *TimeWindow        `json:"partition_time_window"`
	// RunID is the Dagster run's id.
	RunID string `json:"run_id"`
	// JobName is the run's job; nil for a run not made from a job.
	JobName *string `json:"job_name"`
	// RetryNumber counts the retries before this attempt: 0 for the first.
	RetryNumber int `json:"retry_number"`
	// Extras are the values the launching code passed for this step.
	Extras map[string]any `json:"extras"`
}

// PartitionKeyRange is an inclusive range of partition keys.
type PartitionKeyRange struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// TimeWindow is a time partition's window; Start and End are ISO 8601 strings.
type TimeWindow struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// DataProvenance is the provenance Dagster recorded for an asset.
type DataProvenance struct {
	// CodeVersion is the code version the asset was materialized with.
	CodeVersion string `json:"code_version"`
	// InputDataVersions maps each upstream asset key to the data version
	// it had then.
	InputDataVersions map[string]string `json:"input_data_versions"`
	// IsUserProvided reports whether the data version was set by user code
	// rather than computed by Dagster.
	IsUserProvided bool `json:"is_user_provided"`
}

// Context is the read-only view of the step that launched this process. Its
// accessors mirror the Python dagster-pipes PipesContext and fail with
// ErrUndefined where the Python ones raise.
type Context struct {
	data ContextData
}

// NewContext wraps a payload; Open builds it from the bootstrap.
func NewContext(data ContextData) *Context { return &Context{data: data} }

// Data returns the payload as received.
func (c *Context) Data() ContextData { return c.data }

// IsAssetStep reports whether the step targets assets.
func (c *Context) IsAssetStep() bool { return c.data.AssetKeys != nil }

// AssetKeys returns the escaped user strings of the targeted assets.
func (c *Context) AssetKeys() ([]string, error) {
	if c.data.AssetKeys == nil {
		return nil, fmt.Errorf("asset_keys: %w: the step does not target an asset", ErrUndefined)
	}
	return slices.Clone(c.data.AssetKeys), nil
}

// AssetKey returns the single targeted asset key.
func (c *Context) AssetKey() (string, error) {
	if err := c.singleAsset("asset_key"); err != nil {
		return "", err
	}
	return c.data.AssetKeys[0], nil
}

func (c *Context) singleAsset(what string) error {
	if c.data.AssetKeys == nil {
		return fmt.Errorf("%s: %w: the step does not target an asset", what, ErrUndefined)
	}
	if len(c.data.AssetKeys) != 1 {
		return fmt.Errorf("%s: %w: the step targets %d assets", what, ErrUndefined, len(c.data.AssetKeys))
	}
	return nil
}

// CodeVersion returns the single targeted asset's code version (nil if none).
func (c *Context) CodeVersion() (*string, error) {
	if err := c.singleAsset("code_version"); err != nil {
		return nil, err
	}
	return c.data.CodeVersionByAssetKey[c.data.AssetKeys[0]], nil
}

// CodeVersionByAssetKey returns the code version of every targeted asset.
func (c *Context) CodeVersionByAssetKey() (map[string]*string, error) {
	if c.data.CodeVersionByAssetKey == nil {
		return nil, fmt.Errorf("code_version_by_asset_key: %w: the step does not target an asset", ErrUndefined)
	}
	return c.data.CodeVersionByAssetKey, nil
}

// Provenance returns the single targeted asset's provenance (nil if none).
func (c *Context) Provenance() (*DataProvenance, error) {
	if err := c.singleAsset("provenance"); err != nil {
		return nil, err
	}
	return c.data.ProvenanceByAssetKey[c.data.AssetKeys[0]], nil
}

// ProvenanceByAssetKey returns the provenance of every targeted asset.
func (c *Context) ProvenanceByAssetKey() (map[string]*DataProvenance, error) {
	if c.data.ProvenanceByAssetKey == nil {
		return nil, fmt.Errorf("provenance_by_asset_key: %w: the step does not target an asset", ErrUndefined)
	}
	return c.data.ProvenanceByAssetKey, nil
}

// IsPartitionStep reports whether the step targets one or more partitions.
func (c *Context) IsPartitionStep() bool { return c.data.PartitionKeyRange != nil }

// PartitionKey returns the single targeted partition key.
func (c *Context) PartitionKey() (string, error) {
	if c.data.PartitionKey == nil {
		return "", fmt.Errorf("partition_key: %w: the step does not target a single partition", ErrUndefined)
	}
	return *c.data.PartitionKey, nil
}

// PartitionKeyRange returns the targeted partition key range.
func (c *Context) PartitionKeyRange() (PartitionKeyRange, error) {
	if c.data.PartitionKeyRange == nil {
		return PartitionKeyRange{}, fmt.Errorf("partition_key_range: %w: the step does not target partitions", ErrUndefined)
	}
	return *c.data.PartitionKeyRange, nil
}

// PartitionTimeWindow returns the time window of the targeted partitions, nil
// when they are not time-based.
func (c *Context) PartitionTimeWindow() (*TimeWindow, error) {
	if c.data.PartitionKeyRange == nil {
		return nil, fmt.Errorf("partition_time_window: %w: the step does not target partitions", ErrUndefined)
	}
	return c.data.PartitionTimeWindow, nil
}

// RunID returns the Dagster run id.
func (c *Context) RunID() string { return c.data.RunID }

// JobName returns the Dagster job name ("" when the run has none).
func (c *Context) JobName() string {
	if c.data.JobName == nil {
		return ""
	}
	return *c.data.JobName
}

// RetryNumber returns the step's retry number (0 on the first attempt).
func (c *Context) RetryNumber() int { return c.data.RetryNumber }

// Extras returns the extras the asset passed to the client. JSON numbers are
// json.Number, so large integers keep their precision.
func (c *Context) Extras() map[string]any { return c.data.Extras }

// Extra returns one extra, or ErrUndefined when the asset did not pass it.
func (c *Context) Extra(key string) (any, error) {
	v, ok := c.data.Extras[key]
	if !ok {
		return nil, fmt.Errorf("extra %q: %w", key, ErrUndefined)
	}
	return v, nil
}

// loadContext resolves context params: {"path": FILE} or {"data": {...}}.
func loadContext(p Params, readFile func(string) ([]byte, error)) (*Context, error) {
	path, hasPath, err := paramString(p, "path")
	if err != nil {
		return nil, err
	}
	var raw []byte
	switch {
	case hasPath:
		if readFile == nil {
			readFile = os.ReadFile
		}
		if raw, err = readFile(path); err != nil {
			return nil, fmt.Errorf("read pipes context: %w", err)
		}
	case p["data"] != nil:
		if _, ok := p["data"].(map[string]any); !ok {
			return nil, fmt.Errorf("%w: \"data\" must be an object, got %T", ErrBootstrap, p["data"])
		}
		if raw, err = json.Marshal(p["data"]); err != nil {
			return nil, fmt.Errorf("%w: data: %w", ErrBootstrap, err)
		}
	default:
		return nil, fmt.Errorf("%w: context params need \"path\" or \"data\", got keys %v", ErrBootstrap, keys(p))
	}
	var data ContextData
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		return nil, fmt.Errorf("%w: context payload: %w", ErrBootstrap, err)
	}
	if data.Extras == nil {
		data.Extras = map[string]any{}
	}
	return NewContext(data), nil
}

func keys(p Params) []string {
	out := make([]string, 0, len(p))
	for k := range p {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
