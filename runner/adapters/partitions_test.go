package adapters

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/raystep/raystep/dagster_integration/pipes"
	"github.com/raystep/raystep/schemas"
)

// TestPartitionsFrom checks the variables a Pipes context gives: a single
// key is its own range, Dagster's ISO 8601 windows become RFC 3339, and a
// context without partitions defines none.
func TestPartitionsFrom(t *testing.T) {
	t.Parallel()
	key := "2024-03-05"
	tests := []struct {
		name string
		data pipes.ContextData
		want map[string]string
	}{
		{"no partition", pipes.ContextData{}, map[string]string{}},
		{"static key", pipes.ContextData{PartitionKey: &key}, map[string]string{
			schemas.VarPartitionKey: key, schemas.VarPartitionKeyRangeStart: key, schemas.VarPartitionKeyRangeEnd: key}},
		{"range of days with a window in UTC", pipes.ContextData{
			PartitionKeyRange:   &pipes.PartitionKeyRange{Start: "2024-03-01", End: "2024-03-03"},
			PartitionTimeWindow: &pipes.TimeWindow{Start: "2024-03-01T00:00:00+00:00", End: "2024-03-04T00:00:00.000000+00:00"},
		}, map[string]string{
			schemas.VarPartitionKeyRangeStart: "2024-03-01", schemas.VarPartitionKeyRangeEnd: "2024-03-03",
			schemas.VarPartitionTimeWindowStart: "2024-03-01T00:00:00Z", schemas.VarPartitionTimeWindowEnd: "2024-03-04T00:00:00Z"}},
		{"hourly window with an offset", pipes.ContextData{
			PartitionKey:        &key,
			PartitionTimeWindow: &pipes.TimeWindow{Start: "2024-03-05T10:00:00.5-05:00", End: "2024-03-05T11:00:00-05:00"},
		}, map[string]string{
			schemas.VarPartitionKey: key, schemas.VarPartitionKeyRangeStart: key, schemas.VarPartitionKeyRangeEnd: key,
			schemas.VarPartitionTimeWindowStart: "2024-03-05T10:00:00.5-05:00", schemas.VarPartitionTimeWindowEnd: "2024-03-05T11:00:00-05:00"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := PartitionsFrom(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Values); diff != "" {
				t.Errorf("variables (-want +got):\n%s", diff)
			}
		})
	}
	_, err := PartitionsFrom(pipes.ContextData{PartitionTimeWindow: &pipes.TimeWindow{Start: "2024-03-05T00:00:00", End: "2024-03-06T00:00:00"}})
	if want := `partition time window start: "2024-03-05T00:00:00" is not an ISO 8601 time with an offset`; err == nil || err.Error() != want {
		t.Errorf("a window without an offset: error %v, want %q", err, want)
	}
}
