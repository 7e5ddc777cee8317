# syntax=docker/dockerfile:1
# rollsafe container image: the release binary on a distroless runtime, nothing else.
#
#   docker build -t rollsafe:0.1.0 .
#
# The build step is exactly the command below (crates/rollsafe/tests/install_dockerfile.rs
# reads it from this file and runs it), so what CI checks is what the image contains.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-gnu -p rollsafe --bin rollsafe \
 && install -D -m 0555 target/x86_64-unknown-linux-gnu/release/rollsafe /out/rollsafe

# glibc and libgcc only (ring and rustls need nothing else); no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="rollsafe" \
      org.opencontainers.image.description="Rolls Kubernetes workloads when the Secrets they consume change" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/rollsafe/rollsafe"
COPY --from=builder /out/rollsafe /usr/local/bin/rollsafe
# The distroless `nonroot` user; the Helm chart pins the same UID.
USER 65532:65532
# The allocator (mimalloc) without transparent huge pages, also on nodes whose kernel backs every
# heap with them (`transparent_hugepage/enabled: always`): partly used 2 MiB pages stay resident
# whole (docs/watch.md, "Memory").
ENV MIMALLOC_ALLOW_THP=0
EXPOSE 8080 9090
# No HEALTHCHECK: Kubernetes probes /healthz and /readyz.
ENTRYPOINT ["/usr/local/bin/rollsafe"]
CMD ["serve"]
