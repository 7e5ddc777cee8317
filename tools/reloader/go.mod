// Stakater Reloader, the scale bench's second controller profile
// (crates/rollsafe/benches/scale_real.rs, ROLLSAFE_SCALE_PROFILE=reloader), pinned here and
// built by build.sh from the Go module proxy into a cache outside the repository. Nothing is
// vendored. go.sum is absent: `go mod tidy` cannot complete while the proxy refuses
// github.com/openshift/api at the pseudo-version Reloader v1.4.22 requires (build.sh says so).
module rollsafe.dev/tools/reloader

go 1.26.8

tool github.com/stakater/Reloader

require github.com/stakater/Reloader v1.4.22
