package rayhead

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExitReport(t *testing.T) {
	t.Parallel()
	stateDump := strings.Repeat("[state-dump] - num pinned objects: 0\n", 40)
	tests := []struct {
		name, out, exit, want string
	}{{
		name: "a process died: its log's last lines, without the state dumps",
		// The kept output begins inside the first tail: `ray start`
		// printed more than Output keeps.
		out: "-- raylet.err [exit code=1]\n" +
			"[2026-12-07 03:03:12,204 I 1 1] (gcs_server) gcs_server.cc:1: started\n" +
			"2026-12-07 03:03:18,280\tERR scripts.py:128 -- ----- END gcs_server.out tail (exit code(s)=1) -----\n" +
			"\n" +
			"2026-12-07 03:03:18,280\tERR scripts.py:116 -- ----- BEGIN raylet.err tail (exit code(s)=-9 (signal 9)) -----\n" +
			"\n" +
			"2026-12-07 03:03:18,280\tERR scripts.py:122 -- " + stateDump + "\n" +
			"2026-12-07 03:03:18,280\tERR scripts.py:128 -- ----- END raylet.err tail (exit code(s)=-9 (signal 9)) -----\n" +
			"2026-12-07 03:03:18,280\tERR scripts.py:116 -- ----- BEGIN raylet.out tail (exit code(s)=-9 (signal 9)) -----\n" +
			stateDump +
			"line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\n" + stateDump +
			"[2026-12-07 03:03:14,034 W 19425 19435] (raylet) store.cc:366: Disconnecting client\n\n" +
			"2026-12-07 03:03:18,280\tERR scripts.py:128 -- ----- END raylet.out tail (exit code(s)=-9 (signal 9)) -----\n" +
			"2026-12-07 03:03:18,280\tERR scripts.py:1315 -- Remaining processes will be killed.\n",
		exit: "exit code 1",
		want: "gcs_server exited with exit code 1. The end of gcs_server.out:\n" +
			"    -- raylet.err [exit code=1]\n" +
			"    [2026-12-07 03:03:12,204 I 1 1] (gcs_server) gcs_server.cc:1: started\n" +
			"raylet exited with exit code -9 (signal 9). Signal 9 is SIGKILL, which the kernel's out-of-memory killer sends too. The end of raylet.err: (none)\n" +
			"raylet exited with exit code -9 (signal 9). Signal 9 is SIGKILL, which the kernel's out-of-memory killer sends too. The end of raylet.out:\n" +
			"    line 2\n    line 3\n    line 4\n    line 5\n    line 6\n    line 7\n    line 8\n" +
			"    [2026-12-07 03:03:14,034 W 19425 19435] (raylet) store.cc:366: Disconnecting client",
	}, {
		name: "a tail of nothing but state dumps",
		out: "2026-12-07 03:03:18,280\tERR scripts.py:116 -- ----- BEGIN raylet.out tail (exit code(s)=-11 (signal 11)) -----\n" +
			stateDump +
			"2026-12-07 03:03:18,280\tERR scripts.py:128 -- ----- END raylet.out tail (exit code(s)=-11 (signal 11)) -----\n",
		exit: "exit code 1",
		want: "raylet exited with exit code -11 (signal 11). The end of raylet.out: (none)",
	}, {
		name: "ray start itself killed",
		out:  "2026-12-07 03:03:11,000\tINFO scripts.py:1 -- Ray runtime started.\n" + stateDump + "\n--block\n",
		exit: "exit code -9",
		want: "ray start ended with exit code -9. Signal 9 is SIGKILL, which the kernel's out-of-memory killer sends too. The end of its output:\n" +
			"    2026-12-07 03:03:11,000\tINFO scripts.py:1 -- Ray runtime started.\n" +
			"    --block",
	}, {
		name: "ray start said nothing",
		exit: "exit code 1",
		want: "ray start ended with exit code 1. The end of its output: (none)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, exitReport(tt.out, tt.exit)); diff != "" {
				t.Errorf("exitReport (-want +got):\n%s", diff)
			}
		})
	}
}
