# intent-proxy container image, FROM scratch: no registry is needed to build
# it. The static binary is built on the host first (make image-proxy does
# both, from the repository root):
#   CGO_ENABLED=0 go build -trimpath -o bin/image/intent-proxy ./cmd/intent-proxy
#   docker build -f deploy/image/intent-proxy.Dockerfile -t intent-proxy:local .
# Configure it with INTENT_PROXY_* variables (docs/proxy.md): at least
# INTENT_PROXY_UPSTREAM and INTENT_PROXY_LEDGER; INTENT_PROXY_API_KEY for a
# cluster with API keys. No shell, no CA bundle: plain-HTTP upstreams and
# ledgers only unless you add one.
FROM scratch
COPY bin/image/intent-proxy /intent-proxy
USER 65532:65532
ENV INTENT_PROXY_LISTEN=0.0.0.0:8480 \
    INTENT_PROXY_LOG_FORMAT=json
EXPOSE 8480/tcp
ENTRYPOINT ["/intent-proxy"]
