# nginx for docker/compose.yml, from Debian's package on the same base image as
# the server (so it builds where no registry is reachable). The official nginx
# image works as well: mount nginx.conf at /etc/nginx/nginx.conf and
# nginx-proxy.conf at /etc/nginx/attention-proxy.conf.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-light \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
 && ln -sf /dev/stderr /var/log/nginx/error.log
COPY nginx.conf /etc/nginx/nginx.conf
COPY nginx-proxy.conf /etc/nginx/attention-proxy.conf
USER www-data
EXPOSE 8080
STOPSIGNAL SIGQUIT
ENTRYPOINT ["nginx", "-g", "daemon off;"]
