# everynode's controller image, for builds that can pull base images:
#   docker build -t ghcr.io/everynode/everynode:dev .
# Offline, without a Docker daemon, `make image` writes the same image as an OCI
# layout (tools/image).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The nosandbox build leaves out the embedded control plane, kubectl and the
# benchmark: the controller, rollout and explain verbs only.
RUN CGO_ENABLED=0 go build -tags nosandbox -trimpath -ldflags "-s -w" -o /out/everynode ./cmd/everynode

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/everynode /everynode
USER 65532:65532
ENTRYPOINT ["/everynode"]
CMD ["controller"]
