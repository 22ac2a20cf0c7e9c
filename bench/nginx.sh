#!/usr/bin/env bash
# nginx on loopback for benchmarks, in the foreground until Ctrl-C (or kill):
#   bench/nginx.sh [WORKERS] [PORT]      (defaults: 1 worker, port 8080)
# It serves a 612-byte page, like nginx's default page in the seed's ab run, with no access
# log so that logging does not cost the server time. Needs nginx: apt-get install -y nginx.
set -euo pipefail
workers=${1:-1}
port=${2:-8080}
dir=$(mktemp -d /tmp/soak-nginx.XXXXXX)
pid=""
# On Ctrl-C or kill, stop nginx too and remove its files: nothing is left running.
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid"; rm -rf "$dir"' EXIT
trap 'exit 0' TERM INT
chmod 755 "$dir"
mkdir -p "$dir/www" "$dir/tmp"
printf '%0611d\n' 0 | tr 0 x > "$dir/www/index.html"
user=""
if [ "$(id -u)" = 0 ]; then user="user root;"; fi
cat > "$dir/nginx.conf" <<CONF
daemon off;
worker_processes $workers;
pid $dir/nginx.pid;
error_log stderr warn;
$user
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 10000000;
    client_body_temp_path $dir/tmp;
    proxy_temp_path $dir/tmp;
    fastcgi_temp_path $dir/tmp;
    uwsgi_temp_path $dir/tmp;
    scgi_temp_path $dir/tmp;
    server {
        listen 127.0.0.1:$port;
        root $dir/www;
    }
}
CONF
echo "nginx with $workers worker(s) on http://127.0.0.1:$port/" >&2
nginx -c "$dir/nginx.conf" -p "$dir" &
pid=$!
wait "$pid"
