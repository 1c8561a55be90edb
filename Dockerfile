# The service image: the static binary alone, run as a non-root user. `make image`
# builds the binary first (CGO_ENABLED=0, time zone data embedded) and copies it and the
# host's CA bundle into the build context, so no base image needs to be pulled.
FROM scratch
COPY sensorapi /sensorapi
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
USER 65532:65532
EXPOSE 8080 1883
ENV SENSORAPI_ADDR=:8080
ENTRYPOINT ["/sensorapi"]
CMD ["serve"]
