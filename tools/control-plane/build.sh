#!/usr/bin/env bash
# Builds the real control plane from the Go modules pinned here (kubernetes/, etcd/, kwok/) into a
# cache outside the repository, keyed by the pinned versions, the Go version and the go.sum hashes,
# so a second run on the same machine builds nothing. Prints the binary folder on its last line.
# Nothing is downloaded but Go modules through the Go module proxy; nothing is vendored or copied.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || {
  echo "control plane: Go is not installed (need Go 1.26 at /usr/local/go or on PATH)" >&2; exit 3; }
export PATH="$PATH:/usr/local/go/bin"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -mod=readonly"
k8s=$(cd "$here/kubernetes" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(cd "$here/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
kwok=$(cd "$here/kwok" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
sums=$(cat "$here"/kubernetes/go.sum "$here"/etcd/go.sum "$here"/kwok/go.sum | sha256sum | cut -c1-12)
key="k8s-$k8s.etcd-$etcd.kwok-$kwok.$(go env GOVERSION).$sums"
bin="${ROLLSAFE_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rollsafe/control-plane}/$key/bin"
if [ -e "$bin/.complete" ]; then echo "$bin"; exit 0; fi
mkdir -p "$bin"
# One build at a time: a second caller (CI starts the build early, in the background) waits
# for the first and then finds the binaries.
exec 9>"$bin/../build.lock"
flock 9
if [ -e "$bin/.complete" ]; then echo "$bin"; exit 0; fi
minor=$(echo "$k8s" | cut -d. -f2)
v=k8s.io/component-base/version
ldflags="-s -w -X $v.gitVersion=$k8s -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean \
 -X $v.buildDate=1970-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=$k8s \
 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
start=$(date +%s)
echo "control plane: building Kubernetes $k8s, etcd $etcd and kwok $kwok with $(go env GOVERSION) into $bin" >&2
(cd "$here/kubernetes" && go build -ldflags "$ldflags" -o "$bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
(cd "$here/etcd" && go build -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)
(cd "$here/kwok" && go build -ldflags "-s -w" -o "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok)
"$bin/kube-apiserver" --version >&2
echo "control plane: built in $(( $(date +%s) - start )) s" >&2
touch "$bin/.complete"
echo "$bin"
