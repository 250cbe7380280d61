# Multi-stage build of the batchledger manager: a static binary on a distroless,
# non-root base. `make docker-build` runs it where a Docker engine exists; CI checks the
# build stage by building the same binary the same way (`make build`).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X batchledger.dev/batchledger/pkg/version.Version=${VERSION}" -o /out/batchledger ./cmd/batchledger

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/batchledger /batchledger
USER 65532:65532
ENTRYPOINT ["/batchledger"]
