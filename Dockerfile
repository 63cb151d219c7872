# syntax=docker/dockerfile:1
# Countersign's image, for those who build with Docker (BuildKit):
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION="$(git describe --tags --always)" \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg CREATED="$(git log -1 --format=%cI)" \
#     --output type=oci,dest=countersign.oci.tar .
#
# (or -t countersign:dev --load for a local engine). The labels take the
# three build arguments; the binary stamps the commit itself.
#
# It makes the image scripts/image makes without a daemon: the static
# binary at /usr/local/bin/countersign, CA certificates and time zone data
# from Debian's packages (the same deploy/image/rootfs), user 65532:65532,
# the volume /data, entrypoint countersign and command serve, the same
# labels. The build context must hold .git, so that the go command stamps
# the commit (`countersign version` prints it); .dockerignore leaves it in.
# tools/image's TestDockerfileDeclaresTheSame checks that this file
# declares what the layout's config holds.

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH GOAMD64=v1 GOARM64=v8.0 \
    GOFLAGS="-buildvcs=true -mod=readonly -trimpath" \
    go build -o /out/countersign ./cmd/countersign

FROM debian:bookworm-slim AS rootfs
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates tzdata && rm -rf /var/lib/apt/lists/*
COPY deploy/image/rootfs /usr/local/bin/countersign-rootfs
# The volume's directory apart, to be copied with its owner (COPY makes
# everything else root's).
RUN countersign-rootfs /rootfs && mv /rootfs/data /rootfs-data

FROM scratch
COPY --from=rootfs /rootfs/ /
COPY --from=rootfs --chown=65532:65532 --chmod=0700 /rootfs-data /data
COPY --from=build --chmod=0755 /out/countersign /usr/local/bin/countersign
ARG VERSION=dev REVISION=unknown CREATED=
LABEL org.opencontainers.image.source="https://github.com/countersign/countersign" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.title="countersign" \
      org.opencontainers.image.description="A chat-ops approval bot for AI agents"
ENV PATH=/usr/local/bin COUNTERSIGN_LISTEN=:8080
USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080/tcp
ENTRYPOINT ["/usr/local/bin/countersign"]
CMD ["serve"]
