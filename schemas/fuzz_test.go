package schemas

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzLoad feeds the spec loader arbitrary bytes, starting from the seeds in
// testdata/fuzz/FuzzLoad (alias bombs, deep nesting, NUL bytes, binary
// files, ...), the examples and the invalid fixtures. Parse must never
// panic, must return well within the time a user waits, and must explain
// every problem as a *ValidationErrors naming the file.
func FuzzLoad(f *testing.F) {
	seeds, err := filepath.Glob("testdata/invalid/*.*")
	if err != nil {
		f.Fatal(err)
	}
	seeds = append(seeds, "../examples/ads_ranking/train.yaml", "../examples/ads_ranking/eval.yaml")
	for _, file := range seeds {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	profile, err := DefaultProfile()
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir() // a workingDir of "." must resolve, not wander
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(dir, "fuzz.yaml")
		start := time.Now()
		_, err := Parse(file, data, LoadOptions{Profile: profile})
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("Parse took %s on %d bytes", took, len(data))
		}
		if err == nil {
			return
		}
		var ve *ValidationErrors
		if !errors.As(err, &ve) || len(ve.Errors) == 0 {
			t.Fatalf("Parse = %v (%T), want *ValidationErrors", err, err)
		}
		for _, e := range ve.Errors {
			if e.File != file || e.Message == "" {
				t.Errorf("error %q does not name %s or says nothing", e.Error(), file)
			}
		}
		if !strings.HasPrefix(err.Error(), file+": ") {
			t.Errorf("error %q does not start with the file", err)
		}
	})
}
