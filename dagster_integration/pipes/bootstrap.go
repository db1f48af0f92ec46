package pipes

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"strings"
)

// Names under which Dagster passes the bootstrap to the external process.
const (
	// EnvContext is the environment variable holding the encoded context params.
	EnvContext = "DAGSTER_PIPES_CONTEXT"
	// EnvMessages is the environment variable holding the encoded message params.
	EnvMessages = "DAGSTER_PIPES_MESSAGES"
	// ArgContext is the command-line flag equivalent of EnvContext.
	ArgContext = "--dagster-pipes-context"
	// ArgMessages is the command-line flag equivalent of EnvMessages.
	ArgMessages = "--dagster-pipes-messages"
	// ProtocolVersion is the value of "__dagster_pipes_version" in every message.
	ProtocolVersion = "0.1"
)

// maxBootstrapBytes caps the decompressed size of one bootstrap value, so a
// hostile or corrupt value cannot exhaust memory.
const maxBootstrapBytes = 64 << 20

// ErrBootstrap is wrapped by every error about a bootstrap value that cannot
// be decoded or has the wrong shape.
var ErrBootstrap = errors.New("invalid dagster pipes bootstrap")

// EncodeBootstrap encodes v the way Dagster encodes bootstrap params: JSON,
// in a zlib stream, then standard padded base64. Up to storedMax bytes of
// JSON are stored in the stream uncompressed (see zlibStored); larger
// values are compressed.
func EncodeBootstrap(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode bootstrap: %w", err)
	}
	if len(raw) <= storedMax {
		return base64.StdEncoding.EncodeToString(zlibStored(raw)), nil
	}
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		return "", fmt.Errorf("encode bootstrap: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("encode bootstrap: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// storedMax is the largest JSON EncodeBootstrap leaves uncompressed. A
// step's bootstrap is a few hundred bytes, and a compressor costs about
// 650 KB of zeroed memory, a millisecond or two of a step's CPU; above
// this, the size an environment variable may have matters more.
const storedMax = 16 << 10

// zlibStored returns raw as a zlib stream (RFC 1950) of stored, that is
// uncompressed, deflate blocks (RFC 1951, 3.2.4): what any zlib reader,
// Python's included, decodes.
func zlibStored(raw []byte) []byte {
	const maxBlock = 0xffff
	sum := adler32.Checksum(raw)
	out := make([]byte, 0, 2+len(raw)+5*(len(raw)/maxBlock+1)+4)
	out = append(out, 0x78, 0x01) // deflate, 32 KiB window; header checksum ok
	for first := true; first || len(raw) > 0; first = false {
		n := min(len(raw), maxBlock)
		final := byte(0)
		if n == len(raw) {
			final = 1
		}
		out = append(out, final) // BFINAL, BTYPE=00: stored
		out = binary.LittleEndian.AppendUint16(out, uint16(n))
		out = binary.LittleEndian.AppendUint16(out, ^uint16(n))
		out = append(out, raw[:n]...)
		raw = raw[n:]
	}
	return binary.BigEndian.AppendUint32(out, sum)
}

// DecodeBootstrap decodes a value produced by EncodeBootstrap (or by Dagster's
// encode_param) into v. Errors wrap ErrBootstrap.
func DecodeBootstrap(s string, v any) error {
	compressed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%w: base64: %w", ErrBootstrap, err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return fmt.Errorf("%w: zlib: %w", ErrBootstrap, err)
	}
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, maxBootstrapBytes+1))
	if err != nil {
		return fmt.Errorf("%w: zlib: %w", ErrBootstrap, err)
	}
	if len(raw) > maxBootstrapBytes {
		return fmt.Errorf("%w: larger than %d bytes once decompressed", ErrBootstrap, maxBootstrapBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: json: %w", ErrBootstrap, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: json: trailing data", ErrBootstrap)
	}
	return nil
}

// Params is a decoded bootstrap value: the context injector's or the message
// reader's parameters, e.g. {"path": "/tmp/x/context"} or {"stdio": "stdout"}.
type Params map[string]any

// ContextDataParams returns context params that carry the context inline,
// as Dagster's PipesEnvContextInjector does: {"data": data}.
func ContextDataParams(data ContextData) Params { return Params{"data": data} }

// ContextPathParams returns context params that point to a JSON file.
func ContextPathParams(path string) Params { return Params{"path": path} }

// StdioMessagesParams returns message params that make the child write its
// messages, one per line, to "stdout" or "stderr".
func StdioMessagesParams(stream string) Params { return Params{"stdio": stream} }

// FileMessagesParams returns message params that make the child append its
// messages to the file at path.
func FileMessagesParams(path string) Params { return Params{"path": path} }

// BootstrapEnv encodes context and message params as the two environment
// variables a child process reads, ready for os/exec or a Ray runtime_env.
func BootstrapEnv(context, messages Params) (map[string]string, error) {
	c, err := EncodeBootstrap(context)
	if err != nil {
		return nil, fmt.Errorf("context params: %w", err)
	}
	m, err := EncodeBootstrap(messages)
	if err != nil {
		return nil, fmt.Errorf("message params: %w", err)
	}
	return map[string]string{EnvContext: c, EnvMessages: m}, nil
}

// bootstrapValues finds the two encoded values: arguments first (both
// "--flag value" and "--flag=value"), then the environment. ok is false when
// the process was not launched by Dagster (no context value anywhere).
func bootstrapValues(args []string, lookup func(string) (string, bool)) (ctx, msgs string, ok bool, err error) {
	ctx, okC := argValue(args, ArgContext)
	msgs, okM := argValue(args, ArgMessages)
	if !okC && lookup != nil {
		ctx, okC = lookup(EnvContext)
	}
	if !okM && lookup != nil {
		msgs, okM = lookup(EnvMessages)
	}
	if !okC {
		return "", "", false, nil
	}
	if !okM {
		return "", "", false, fmt.Errorf("%w: %s is set but %s is not", ErrBootstrap, EnvContext, EnvMessages)
	}
	return ctx, msgs, true, nil
}

func argValue(args []string, flag string) (string, bool) {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

// paramString returns params[key] as a string, reporting whether the key is
// present at all.
func paramString(p Params, key string) (string, bool, error) {
	v, ok := p[key]
	if !ok {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", true, fmt.Errorf("%w: %q must be a string, got %T", ErrBootstrap, key, v)
	}
	return s, true, nil
}
