# FetchService as native gRPC (plaintext HTTP/2 on 8086) for the optional ECS Fargate service of
# template.yaml (GrpcServiceImageUri). Runtime image only: it packages the `fetch` bootstrap that
# `make lambda` built and measured and the DuckDB extensions `make layer` laid out, so the
# container runs the same binary and extensions as the FetchFunction Lambda. Nothing is
# downloaded when the container starts (the extensions are on disk, DuckDB never autoloads).
#
# Build context: LAMBDA_DIR (default .local/lambda), after `make lambda layer`:
#   docker build -f deploy/fetch.Dockerfile -t dq-fetch:<tag> .local/lambda
# (docs/deploy.md "FetchService: gRPC-web and native gRPC"). Amazon Linux 2023 is what
# provided.al2023 runs on: the glibc 2.34 / GLIBCXX_3.4.29 floor scripts/lambda-size.py checks
# holds here too.

FROM public.ecr.aws/amazonlinux/amazonlinux:2023-minimal AS unpack
RUN microdnf install -y unzip && microdnf clean all
COPY functions/fetch/bootstrap.zip /tmp/bootstrap.zip
RUN unzip -q /tmp/bootstrap.zip bootstrap -d /out && chmod 0755 /out/bootstrap

FROM public.ecr.aws/amazonlinux/amazonlinux:2023-minimal
# libstdc++: the bundled DuckDB links it dynamically; CA certificates: S3, Secrets Manager, JWKS.
RUN microdnf install -y libstdc++ ca-certificates && microdnf clean all
COPY --from=unpack /out/bootstrap /usr/local/bin/fetch
# The layer's tree: /opt/duckdb/extensions/v1.5.4/linux_amd64/*.duckdb_extension, as in Lambda.
COPY layer/duckdb /opt/duckdb
ENV HOME=/tmp \
    DUCKDB_EXTENSION_DIR=/opt/duckdb/extensions \
    DUCKDB_TEMP_DIRECTORY=/tmp/duckdb \
    HOST_GRPC=0.0.0.0 \
    PORT_GRPC=8086
USER 65534:65534
EXPOSE 8086
# Without AWS_LAMBDA_RUNTIME_API the binary serves gRPC and gRPC-web on HOST_GRPC:PORT_GRPC.
ENTRYPOINT ["/usr/local/bin/fetch"]
