#!/usr/bin/env bash
# Builds Stakater Reloader from the Go module proxy (the version pinned in go.mod) into a cache
# outside the repository, keyed by its version, the Go version and go.sum's hash, as
# tools/control-plane/build.sh builds the control plane. Prints the binary's path on its last
# line: ROLLSAFE_SCALE_RELOADER_BIN="$(tools/reloader/build.sh | tail -1)".
#
# Reloader v1.4.22 (the only version the proxy lists) requires github.com/openshift/api at
# v0.0.0-20260402111718-ad9eb11110b6, which the proxy refuses (403, "not available"; it lists
# only v3.9.0+incompatible), so go.sum cannot be completed and this script stops with exit 3
# until that module is served. Nothing is substituted: a Reloader built against other
# dependencies would not be the Reloader its users run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { echo "reloader: Go is not installed" >&2; exit 3; }
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -mod=readonly"
if [ ! -s "$here/go.sum" ]; then
  echo "reloader: tools/reloader/go.sum is missing: 'go mod tidy' needs github.com/openshift/api@v0.0.0-20260402111718-ad9eb11110b6, which the Go module proxy does not serve" >&2
  exit 3
fi
version=$(cd "$here" && go list -m -f '{{.Version}}' github.com/stakater/Reloader)
sums=$(sha256sum "$here/go.sum" | cut -c1-12)
bin="${ROLLSAFE_RELOADER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rollsafe/reloader}/reloader-$version.$(go env GOVERSION).$sums/bin"
if [ -e "$bin/.complete" ]; then echo "$bin/reloader"; exit 0; fi
mkdir -p "$bin"
exec 9>"$bin/../build.lock"
flock 9
if [ -e "$bin/.complete" ]; then echo "$bin/reloader"; exit 0; fi
(cd "$here" && go build -ldflags "-s -w" -o "$bin/reloader" github.com/stakater/Reloader)
touch "$bin/.complete"
echo "$bin/reloader"
