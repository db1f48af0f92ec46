#!/usr/bin/env bash
# Builds the real Kubernetes pieces that raystep's kuberay tests and
# `make sandbox` run, from their Go modules, once per machine:
#
#   kube-apiserver, kube-controller-manager, kube-scheduler  k8s.io/kubernetes (tools/kube/go.mod)
#   etcd                                                     go.etcd.io/etcd/server/v3 (tools/etcd/go.mod)
#   kwok                                                     sigs.k8s.io/kwok (its own go.mod)
#   kueue (Kueue's manager)                                  sigs.k8s.io/kueue (its own go.mod)
#
# plus kwok's node and pod stage files and Kueue's CRDs, into
#
#   ${RAYSTEP_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/raystep}/k8s-<ver>-etcd-<ver>-kwok-<ver>-kueue-<ver>/
#     bin/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kwok,kueue}
#     stages/{node-fast,node-heartbeat,node-chaos,pod-general,pod-fast,pod-chaos}/*.yaml
#     kueue-crds/*.yaml
#     VERSIONS, BUILD_TIMES
#
# The directory is built under a temporary name and renamed when complete, so
# a present directory is always whole; a second run only prints its path.
# stdout carries exactly that path (dir=$(test/k8s/build.sh)); progress goes
# to stderr. Builds run under `nice` because they share the machine.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kwok_module=sigs.k8s.io/kwok
kwok_version=v0.8.0
kueue_module=sigs.k8s.io/kueue
kueue_version=v0.17.0

export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

log() { printf 'k8s-build: %s\n' "$*" >&2; }

# modversion DIR MODULE prints the version of MODULE that DIR's go.mod selects.
modversion() { (cd "$1" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$2"); }

kube_version=$(modversion "$here/tools/kube" k8s.io/kubernetes)
etcd_version=$(modversion "$here/tools/etcd" go.etcd.io/etcd/server/v3)

cache=${RAYSTEP_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/raystep}
dir="$cache/k8s-$kube_version-etcd-$etcd_version-kwok-$kwok_version-kueue-$kueue_version"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok kueue)
# kwok's stage sets (kustomize/stage/<kind>/<set> in its module), copied to
# stages/<kind>-<set>/: pod/general has realistic per-phase delays, pod/fast
# none; the chaos sets act only on objects that opt in by label.
stages=(node/fast node/heartbeat node/chaos pod/general pod/fast pod/chaos)

complete() {
	local b s
	for b in "${bins[@]}"; do [[ -x "$1/bin/$b" ]] || return 1; done
	for s in "${stages[@]}"; do [[ -d "$1/stages/${s/\//-}" ]] || return 1; done
	compgen -G "$1/kueue-crds/*.yaml" >/dev/null
}

if complete "$dir"; then
	echo "$dir"
	exit 0
fi

mkdir -p "$cache"
# One build per cache at a time: a second caller waits, then finds the result.
exec 9>"$cache/.build.lock"
flock 9
if complete "$dir"; then
	echo "$dir"
	exit 0
fi

tmp=$(mktemp -d "$cache/.build.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/stages"
: >"$tmp/BUILD_TIMES"

# timed NAME CMD... runs CMD under nice and records its wall time.
timed() {
	local name=$1 start end
	shift
	log "building $name"
	start=$(date +%s)
	if ! nice -n 10 "$@" >&2; then
		log "building $name failed"
		return 1
	fi
	end=$(date +%s)
	log "built $name in $((end - start))s"
	printf '%s %ds\n' "$name" "$((end - start))" >>"$tmp/BUILD_TIMES"
}

# The Kubernetes binaries report their version through component-base (and
# client-go's copy); without -X they say v0.0.0, which clients and the API
# server's compatibility checks treat as a broken build. The module zip has no
# git metadata, so gitCommit carries the module's checksum instead.
kube_time=$(cd "$here/tools/kube" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
kube_sum=$(cd "$here/tools/kube" && go mod download -json "k8s.io/kubernetes@$kube_version" |
	sed -n 's/^\t"Sum": "\(.*\)",\{0,1\}$/\1/p')
minor=${kube_version#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitCommit=$kube_sum -X $pkg.gitTreeState=clean -X $pkg.buildDate=$kube_time"
done

# The four builds run at once: one `go build` leaves a core idle whenever
# its package graph narrows or it links, and on a cold machine the others
# fill those gaps. Each records its own wall time; the total is what counts.
total_start=$(date +%s)
pids=()
(cd "$here/tools/kube" && timed "kube-apiserver kube-controller-manager kube-scheduler" \
	go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler) &
pids+=($!)
(cd "$here/tools/etcd" && timed etcd go build -trimpath -ldflags "-s -w" -o "$tmp/bin/etcd" go.etcd.io/etcd/server/v3) &
pids+=($!)
# kwok's own go.mod has no replace directives, so `go install mod@version`
# builds it with exactly its own dependency versions.
(cd "$tmp" && GOBIN="$tmp/bin" timed kwok go install -trimpath -ldflags "-s -w" "$kwok_module/cmd/kwok@$kwok_version") &
pids+=($!)
# Kueue's go.mod has no replace directives either; -X gives its version.
(cd "$tmp" && GOBIN="$tmp/bin" timed kueue go install -trimpath \
	-ldflags "-s -w -X $kueue_module/pkg/version.GitVersion=$kueue_version" "$kueue_module/cmd/kueue@$kueue_version") &
pids+=($!)
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[[ $failed -eq 0 ]] || { log "a build failed (its output is above)"; exit 1; }
total_end=$(date +%s)
printf 'total %ds\n' "$((total_end - total_start))" >>"$tmp/BUILD_TIMES"

kwok_dir=$(cd "$tmp" && go mod download -json "$kwok_module@$kwok_version" | sed -n 's/^\t"Dir": "\(.*\)",\{0,1\}$/\1/p')
for s in "${stages[@]}"; do
	src="$kwok_dir/kustomize/stage/$s"
	dst="$tmp/stages/${s/\//-}"
	mkdir -p "$dst"
	find "$src" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml -exec cp {} "$dst/" \;
	chmod -R u+w "$dst"
done

# Kueue's CRDs as its module ships them, without the kustomize patches
# (conversion webhooks, CA injection) of a full install.
kueue_dir=$(cd "$tmp" && go mod download -json "$kueue_module@$kueue_version" | sed -n 's/^\t"Dir": "\(.*\)",\{0,1\}$/\1/p')
mkdir -p "$tmp/kueue-crds"
cp "$kueue_dir"/config/components/crd/bases/*.yaml "$tmp/kueue-crds/"
chmod -R u+w "$tmp/kueue-crds"

{
	echo "kubernetes $kube_version"
	echo "etcd $etcd_version"
	echo "kwok $kwok_version"
	echo "kueue $kueue_version"
	"$tmp/bin/kube-apiserver" --version
	"$tmp/bin/etcd" --version | sed -n 1p # reads all: head would leave etcd a SIGPIPE, which pipefail fails on
} >"$tmp/VERSIONS"
complete "$tmp" || { log "incomplete build in $tmp"; exit 1; }

rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
log "$(tr '\n' ' ' <"$dir/BUILD_TIMES")"
echo "$dir"
