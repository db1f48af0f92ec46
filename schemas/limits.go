package schemas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on what raystep reads, so that a hostile or mistaken file is
// refused quickly and in little memory, and so that what passes validate
// also fits through Ray and the Kubernetes API server. SPEC.md documents
// the same numbers.
const (
	// MaxFileBytes is the largest spec or profile file raystep reads.
	MaxFileBytes = 128 << 10
	// MaxDepth is how deeply maps and lists may nest.
	MaxDepth = 32
	// MaxValues is how many values (maps, lists, scalars) a document may
	// hold once YAML aliases are expanded, each use of an alias counting
	// its whole value again.
	MaxValues = 50_000
	// MaxExpandedBytes is how much text (keys and scalars) a document may
	// hold once its aliases are expanded.
	MaxExpandedBytes = 1 << 20
	// MaxSpecJSONBytes is the largest a spec may be as JSON: it is copied
	// into the RayJob, whose whole object must stay under etcd's 1.5 MiB
	// request limit alongside what raystep and KubeRay add.
	MaxSpecJSONBytes = 512 << 10
	// MaxEntrypointBytes bounds spec.entrypoint, which Ray runs as one
	// `sh -c` argument (Linux takes at most 128 KiB per argument).
	MaxEntrypointBytes = 64 << 10
	// MaxEnvVarBytes bounds one "NAME=value" of runtimeEnv.env_vars, which
	// become the environment of Ray's processes (Linux: 128 KiB per string).
	MaxEnvVarBytes = 64 << 10
	// MaxAnnotationBytes is Kubernetes' limit on all annotations together.
	MaxAnnotationBytes = 256 << 10
	// MaxQueueTimeout bounds spec.timeouts.queue: a step that waits longer
	// for Kueue than a week is stuck, not queued.
	MaxQueueTimeout = 7 * 24 * time.Hour
)

// StdinName names a spec read from standard input (-f -) in errors.
const StdinName = "<stdin>"

// readFile reads file, or in for "-", refusing more than MaxFileBytes. It
// returns as soon as ctx is done, even while a read blocks (a pipe that
// never closes). Problems with the file come back as a message for the user.
func readFile(ctx context.Context, file string, in io.Reader) (data []byte, problem string, err error) {
	r := in
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, readError(err), nil
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, readError(err), nil
		}
		switch {
		case st.IsDir():
			return nil, "is a directory, not a file", nil
		case st.Mode().IsRegular() && st.Size() > MaxFileBytes:
			head := make([]byte, sniffBytes)
			n, _ := io.ReadFull(f, head)
			return nil, tooLarge(head[:n], st.Size()), nil
		}
		r = f
	} else if r == nil {
		r = bytes.NewReader(nil)
	}
	data, err = readAll(ctx, io.LimitReader(r, MaxFileBytes+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, "", err
	case err != nil:
		return nil, readError(err), nil
	case len(data) > MaxFileBytes:
		return nil, tooLarge(data, -1), nil
	}
	return data, "", nil
}

// readAll is io.ReadAll that gives up when ctx is done. The abandoned read
// ends with the process (or when its reader closes).
func readAll(ctx context.Context, r io.Reader) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		data, err := io.ReadAll(r)
		ch <- result{data, err}
	}()
	select {
	case res := <-ch:
		return res.data, res.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// sniffBytes is how much of a file that is too large is read to tell a
// binary file from a large text file.
const sniffBytes = 8 << 10

// tooLarge says a file is over MaxFileBytes, or that it is a binary file
// when its first bytes (head) hold a NUL; size < 0 when unknown.
func tooLarge(head []byte, size int64) string {
	if bytes.IndexByte(head[:min(len(head), sniffBytes)], 0) >= 0 {
		return "is a binary file, not a YAML or JSON spec (it contains NUL bytes)"
	}
	if size < 0 || kib(int(min(size, 1<<50))) == kib(MaxFileBytes) {
		return fmt.Sprintf("is larger than %s, the most raystep reads", kib(MaxFileBytes))
	}
	return fmt.Sprintf("is %s; raystep reads at most %s", kib(int(min(size, 1<<50))), kib(MaxFileBytes))
}

// kib prints a byte count for people.
func kib(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// textProblem says why data is not a YAML or JSON text file, or "".
func textProblem(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}), bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		return "is UTF-16 text; save it as UTF-8"
	case bytes.IndexByte(data, 0) >= 0:
		return "is a binary file, not a YAML or JSON spec (it contains NUL bytes)"
	}
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return fmt.Sprintf("line %d, column %d: byte 0x%02X is not UTF-8 text; "+
				"this is a binary file or another encoding (save the spec as UTF-8)", line, col, data[i])
		case r == '\n':
			line, col = line+1, 0
		case controlRune(r) && r != '\t' && r != '\r':
			return fmt.Sprintf("line %d, column %d: control character %U; "+
				"a spec is text (write it as an escape in a double-quoted string if you must)", line, col, r)
		}
		i += size
		col++
	}
	return ""
}

// controlRune reports C0 and C1 control characters and DEL.
func controlRune(r rune) bool {
	return r < 0x20 || (r >= 0x7F && r <= 0x9F)
}

// valueControl finds a control character other than tab and newline in a
// decoded value (keys allow neither), which Ray and Kubernetes pass on
// badly or not at all (a NUL in an env var leaves a job PENDING for ever).
func valueControl(s string, key bool) (rune, bool) {
	for _, r := range s {
		if controlRune(r) && (key || (r != '\t' && r != '\n')) {
			return r, true
		}
	}
	return 0, false
}

// The problems valueControl finds, in the file's text (tree.go) and in
// what overrides and substitutions bring in (checkControls) alike.
const (
	keyControlFormat   = "the key contains the control character %U, which is not allowed"
	valueControlFormat = "contains the control character %U, which Ray and Kubernetes do not accept"
)

// checkControls reports the control characters in v's keys and string
// values as decoding a file does: values may hold tab and newline, keys
// nothing. It checks what --set put into the tree, which no decoder saw
// (an env var value of "x\x00y" would leave the job PENDING for ever).
func checkControls(file string, at positions, errs *ValidationErrors, v any, ptr string) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			p := ptr + "/" + escapeToken(k)
			if r, bad := valueControl(k, true); bad {
				errs.add(file, at, p, keyControlFormat, r)
				continue
			}
			checkControls(file, at, errs, child, p)
		}
	case []any:
		for i, child := range v {
			checkControls(file, at, errs, child, ptr+"/"+strconv.Itoa(i))
		}
	case string:
		if r, bad := valueControl(v, false); bad {
			errs.add(file, at, ptrOr(ptr), valueControlFormat, r)
		}
	}
}

// sizes checks that what raystep hands to Ray and Kubernetes fits there.
func (c *checker) sizes(tree any) {
	root, _ := tree.(map[string]any)
	spec, _ := root["spec"].(map[string]any)
	if ep, ok := spec["entrypoint"].(string); ok && len(ep) > MaxEntrypointBytes {
		c.add("/spec/entrypoint", "is %s; at most %s (Ray runs it as one `sh -c` argument): put the commands in a script in workingDir",
			kib(len(ep)), kib(MaxEntrypointBytes))
	}
	renv, _ := spec["runtimeEnv"].(map[string]any)
	env, _ := renv["env_vars"].(map[string]any)
	for k, v := range env {
		ptr := "/spec/runtimeEnv/env_vars/" + escapeToken(k)
		s, _ := v.(string)
		switch {
		case k == "" || strings.ContainsRune(k, '='):
			c.add(ptr, "%q is not an environment variable name: it must be non-empty and without '='", k)
		case len(k)+1+len(s) > MaxEnvVarBytes:
			c.add(ptr, "is %s as NAME=value; at most %s per variable", kib(len(k)+1+len(s)), kib(MaxEnvVarBytes))
		}
	}
	meta, _ := root["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	total := 0
	for k, v := range ann {
		s, _ := v.(string)
		total += len(k) + len(s)
	}
	if total > MaxAnnotationBytes {
		c.add("/metadata/annotations", "are %s together; Kubernetes allows at most %s", kib(total), kib(MaxAnnotationBytes))
	}
	if n := jsonSize(tree); n > MaxSpecJSONBytes {
		c.add(largestPart(tree, n), "the spec is %s as JSON, most of it here; it travels to the Kubernetes API server "+
			"inside the RayJob, so it may be at most %s", kib(n), kib(MaxSpecJSONBytes))
	}
}

// jsonSize is the length of v as JSON, HTML-escaped as the API server
// stores it; 0 if v cannot be encoded.
func jsonSize(v any) int {
	data, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(data)
}

// largestPart points at the map member that holds most of tree's n bytes
// of JSON, descending while one member holds more than half.
func largestPart(tree any, n int) string {
	ptr := ""
	for v := tree; ; {
		m, ok := v.(map[string]any)
		if !ok {
			return ptrOr(ptr)
		}
		best, bestSize := "", 0
		for k, child := range m {
			if s := jsonSize(child); s > bestSize {
				best, bestSize = k, s
			}
		}
		if bestSize*2 < n {
			return ptrOr(ptr)
		}
		ptr, v, n = ptr+"/"+escapeToken(best), m[best], bestSize
	}
}
