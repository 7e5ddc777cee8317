#!/usr/bin/env bash
# Regenerates kubernetes/go.mod for one Kubernetes release, from the module's own go.mod as the
# Go module proxy serves it. k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces
# them with ./staging paths; a dependency's replace directives are ignored, so this module pins
# each staging module (the ones k8s.io/kubernetes replaces) at the matching v0.x release.
# Usage: tools/control-plane/pin-kubernetes.sh v1.37.2
set -euo pipefail
cd "$(dirname "$0")/kubernetes"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
release=${1:?usage: pin-kubernetes.sh vMAJOR.MINOR.PATCH}
staging=v0.${release#v1.}
modfile=$(go list -m -json "k8s.io/kubernetes@$release" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
cat > go.mod <<MOD
module rollsafe.invalid/control-plane/kubernetes

go 1.26.0
MOD
required=$(sed -n '/^require (/,/^)/p' "$modfile" | awk '$2 == "v0.0.0" {print $1}')
for m in $(sed -n '/^replace (/,/^)/p' "$modfile" | awk '$3 ~ /^\.\/staging\// {print $1}'); do
  go mod edit -replace="$m=$m@$staging"
  if grep -qx "$m" <<<"$required"; then go mod edit -require="$m@$staging"; fi
done
go mod edit -require="k8s.io/kubernetes@$release"
for t in kube-apiserver kube-controller-manager kube-scheduler; do go mod edit -tool="k8s.io/kubernetes/cmd/$t"; done
# Never `go get -u`: newer dependencies than the release's own need a newer Go.
go mod tidy
