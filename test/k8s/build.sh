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
#
# A build takes about 39 minutes on a new 2-core machine. A prebuilt archive
# of the directory saves it:
#
#   test/k8s/build.sh [--archive KEY.tar.zst] [--no-build]   (or RAYSTEP_K8S_ARCHIVE=KEY.tar.zst)
#   test/k8s/build.sh --key                                   prints KEY
#
# The archive unpacks to KEY/ (tar --zstd), KEY being the directory's name
# above. It is used only when its file name is this checkout's KEY.tar.zst
# and a SHA256SUMS file beside it holds its digest; anything else (another
# key, a digest that differs or is missing, a corrupt or incomplete archive,
# no zstd) is said on stderr and the build from source runs as without it,
# or, with --no-build, the script fails (exit 1) instead of building.
set -euo pipefail

archive=${RAYSTEP_K8S_ARCHIVE:-}
build=1
print_key=0
while (($#)); do
	case $1 in
	--archive) archive=${2:?--archive needs a file}; shift 2 ;;
	--archive=*) archive=${1#--archive=}; shift ;;
	--no-build) build=0; shift ;;
	--key) print_key=1; shift ;;
	*) printf 'usage: %s [--archive KEY.tar.zst] [--no-build] | --key\n' "$0" >&2; exit 2 ;;
	esac
done

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
if ((print_key)); then
	basename "$dir"
	exit 0
fi
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

# unpack ARCHIVE TMP unpacks the archive into TMP and moves its complete
# KEY/ into place, or prints why it cannot be used and fails.
unpack() {
	local archive=$1 tmp=$2 key name sums want got out
	key=$(basename "$dir")
	name=$(basename "$archive")
	[[ -f $archive ]] || { echo "there is no such file"; return 1; }
	[[ $name == "$key.tar.zst" ]] || { echo "it holds ${name%.tar.zst}, this checkout needs $key"; return 1; }
	sums=$(dirname "$archive")/SHA256SUMS
	[[ -f $sums ]] || { echo "there is no SHA256SUMS beside it"; return 1; }
	want=$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1 }' "$sums")
	[[ -n $want ]] || { echo "$sums has no line for it"; return 1; }
	got=$(sha256sum "$archive") || { echo "it cannot be read"; return 1; }
	got=${got%% *}
	[[ $got == "$want" ]] || { echo "its SHA-256 is $got, $sums says $want"; return 1; }
	command -v zstd >/dev/null || { echo "zstd is not installed (apt-get install zstd)"; return 1; }
	if ! out=$(tar --zstd -xf "$archive" -C "$tmp" --no-same-owner 2>&1); then
		echo "tar failed: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
		return 1
	fi
	complete "$tmp/$key" || { echo "it does not hold a complete $key/ (bin/, stages/, kueue-crds/)"; return 1; }
	chmod 755 "$tmp/$key"
	rm -rf "$dir" # an incomplete one
	mv "$tmp/$key" "$dir"
}

tmp=
trap 'rm -rf "$tmp"' EXIT
if [[ -n $archive ]]; then
	start=$(date +%s)
	tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
	if why=$(unpack "$archive" "$tmp"); then
		log "unpacked $archive in $(($(date +%s) - start))s"
		echo "$dir"
		exit 0
	fi
	rm -rf "$tmp"
	if ((!build)); then
		log "not using $archive: $why; not building from source (--no-build)"
		exit 1
	fi
	log "not using $archive: $why; building from source"
fi
if ((!build)); then
	log "$dir is missing or incomplete and there is no archive to unpack; not building from source (--no-build)"
	exit 1
fi

tmp=$(mktemp -d "$cache/.build.XXXXXX")
chmod 755 "$tmp"
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
