# intentd container image, FROM scratch: no registry is needed to build it.
# The static binary is built on the host first (make image does both):
#   CGO_ENABLED=0 go build -trimpath -o bin/image/intentd ./cmd/intentd
#   docker build -t intentd:local .
# The image holds the binary and an empty /data owned by the unprivileged
# user that runs it; no shell, no CA bundle (intentd dials only its peers,
# verified against --tls-ca when TLS is on).
FROM scratch
COPY bin/image/intentd /intentd
COPY --chown=65532:65532 deploy/image/data/ /data/
USER 65532:65532
ENV INTENTD_DATA_DIR=/data \
    INTENTD_HTTP_ADDR=0.0.0.0:8100 \
    INTENTD_RAFT_ADDR=0.0.0.0:8200 \
    INTENTD_GOSSIP_ADDR=0.0.0.0:8300 \
    INTENTD_LOG_FORMAT=json
VOLUME ["/data"]
EXPOSE 8100/tcp 8200/tcp 8300/tcp 8300/udp
HEALTHCHECK --interval=5s --timeout=4s --start-period=5s --retries=3 CMD ["/intentd", "healthcheck"]
ENTRYPOINT ["/intentd"]
