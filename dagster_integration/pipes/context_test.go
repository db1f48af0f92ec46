package pipes

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestContextAccessors(t *testing.T) {
	t.Parallel()
	pk := "p"
	tests := []struct {
		name string
		data ContextData
		call func(*Context) (any, error)
		want any
		err  error
	}{
		{"single asset", ContextData{AssetKeys: []string{"a"}}, func(c *Context) (any, error) { return c.AssetKey() }, "a", nil},
		{"two assets", ContextData{AssetKeys: []string{"a", "b"}}, func(c *Context) (any, error) { return c.AssetKey() }, "", ErrUndefined},
		{"no asset", ContextData{}, func(c *Context) (any, error) { return c.AssetKeys() }, []string(nil), ErrUndefined},
		{"code version of two", ContextData{AssetKeys: []string{"a", "b"}}, func(c *Context) (any, error) { return c.CodeVersion() }, (*string)(nil), ErrUndefined},
		{"provenance none", ContextData{AssetKeys: []string{"a"}, ProvenanceByAssetKey: map[string]*DataProvenance{"a": nil}}, func(c *Context) (any, error) { return c.Provenance() }, (*DataProvenance)(nil), nil},
		{"partition key", ContextData{PartitionKey: &pk}, func(c *Context) (any, error) { return c.PartitionKey() }, "p", nil},
		{"no partition range", ContextData{}, func(c *Context) (any, error) { return c.PartitionKeyRange() }, PartitionKeyRange{}, ErrUndefined},
		{"time window of non-time partitions", ContextData{PartitionKeyRange: &PartitionKeyRange{"a", "b"}}, func(c *Context) (any, error) { return c.PartitionTimeWindow() }, (*TimeWindow)(nil), nil},
		{"extra", ContextData{Extras: map[string]any{"k": "v"}}, func(c *Context) (any, error) { return c.Extra("k") }, "v", nil},
		{"missing extra", ContextData{Extras: map[string]any{}}, func(c *Context) (any, error) { return c.Extra("k") }, nil, ErrUndefined},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.call(NewContext(tt.data))
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
