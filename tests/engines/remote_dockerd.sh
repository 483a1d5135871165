#!/bin/bash
# A second Docker daemon for the remote-engine tests (issue 26), sharing no path with this host.
#
#   remote_dockerd.sh start DIR [USER]   start it; its socket is DIR/docker.sock (USER may use it)
#   remote_dockerd.sh stop DIR           stop it and remove DIR
#
# The daemon runs in its own mount and network namespaces; there, /tmp, /home, /root, /work and
# /run/user are empty tmpfs, so a bind mount of a host path (a project, a sandbox) finds nothing:
# whatever a session needs must be sent through the socket. Its data and exec roots are DIR/data
# and DIR/exec (seen inside as /srv/wsd), its cgroups under wsremote/, no bridge, no iptables.
# The sandbox image is loaded into it from the host's docker (docker save | docker load).
set -euo pipefail
cmd=$1 dir=$2 user=${3:-}
image=${WS_TEST_REMOTE_IMAGE:-workspace-sandbox:latest}

case $cmd in
start)
    mkdir -p "$dir"
    printf '{}\n' >"$dir/daemon.json"
    # setsid + nohup: the daemon outlives this script (and the test process's group).
    setsid nohup unshare --mount --net --propagation private -- bash -euc '
        dir=$1
        mkdir -p /srv/wsd 2>/dev/null || true
        mount --bind "$dir" /srv/wsd
        for hidden in /tmp /home /root /work /run/user; do
            [[ -d $hidden ]] && mount -t tmpfs -o mode=1777 wsremote-empty "$hidden"
        done
        ip link set lo up 2>/dev/null || true
        exec dockerd --data-root /srv/wsd/data --exec-root /srv/wsd/exec \
            -H unix:///srv/wsd/docker.sock --pidfile /srv/wsd/docker.pid \
            --config-file /srv/wsd/daemon.json --bridge none --iptables=false \
            --ip6tables=false --cgroup-parent wsremote --group root' \
        remote-dockerd "$dir" >"$dir/dockerd.log" 2>&1 </dev/null &
    for _ in $(seq 300); do
        DOCKER_HOST=unix://$dir/docker.sock docker version >/dev/null 2>&1 && break
        sleep 0.1
    done
    DOCKER_HOST=unix://$dir/docker.sock docker version >/dev/null || {
        tail -20 "$dir/dockerd.log" >&2; exit 1; }
    if [[ -n $user ]]; then chown "$user" "$dir" "$dir/docker.sock"; fi
    docker save "$image" | DOCKER_HOST=unix://$dir/docker.sock docker load -q >/dev/null
    ;;
stop)
    if [[ -r $dir/docker.pid ]]; then
        pid=$(<"$dir/docker.pid")
        DOCKER_HOST=unix://$dir/docker.sock docker rm -f $(DOCKER_HOST=unix://$dir/docker.sock \
            docker ps -aq) >/dev/null 2>&1 || true
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    # The daemon's overlay mounts were in its own namespace: gone with it.
    rm -rf "$dir"
    ;;
*) echo "usage: $0 start|stop DIR [USER]" >&2; exit 2 ;;
esac
