# The example upstream of docker-compose.proxy.yml (examples/charge-api), a
# FROM scratch image built from a host-built static binary (make image-proxy):
#   CGO_ENABLED=0 go build -trimpath -o bin/image/charge-api ./examples/charge-api
#   docker build -f deploy/image/charge-api.Dockerfile -t charge-api:local .
FROM scratch
COPY bin/image/charge-api /charge-api
USER 65532:65532
ENV CHARGE_API_LISTEN=0.0.0.0:9000
EXPOSE 9000/tcp
ENTRYPOINT ["/charge-api"]
