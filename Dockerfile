# edgebase container image.
#
# No base image can be pulled where this project is built, so the image is
# assembled FROM scratch out of files staged on the host (`make image` does it;
# e2e/compose_test.go does the same in a temporary context):
#
#   bin/image/edgebase                 static binary: CGO_ENABLED=0 GOOS=linux go build ./cmd/edgebase
#   bin/image/ca-certificates.crt      the host's CA bundle (outbound TLS, e.g. FCM)
#   bin/image/data/                    an empty directory, becomes /data owned by the runtime user
#
# Time zone data is embedded in the binary (import _ "time/tzdata").
#
# Health: scratch has no shell or curl, so the binary checks itself:
# `edgebase healthcheck` GETs http://127.0.0.1:8080/readyz (200 when joined,
# leader known and caught up). With another --http-addr, set EDGEBASE_URL to
# the matching readyz URL. The end-to-end test polls /readyz over HTTP itself.
FROM scratch

LABEL org.opencontainers.image.title="edgebase" \
      org.opencontainers.image.description="edge-distributed realtime server with WebSocket sync"

COPY bin/image/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY bin/image/edgebase /edgebase
# An empty directory copied with --chown gives /data to the unprivileged user;
# a named volume mounted there starts as a copy of it, ownership included.
COPY --chown=65532:65532 bin/image/data /data

ENV EDGEBASE_DATA_DIR=/data
VOLUME /data
# 8080: HTTP (REST, WebSocket, /metrics, /healthz, /readyz). 7000: Raft.
EXPOSE 8080 7000
USER 65532:65532
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["/edgebase", "healthcheck"]
ENTRYPOINT ["/edgebase"]
CMD ["serve"]
