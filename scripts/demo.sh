#!/usr/bin/env bash
# make demo [BACKEND=redis|postgres|mysql|etcd|zookeeper]: two leasecron daemons
# (demo-a, demo-b) on jobs.example.yaml, in the foreground with their logs
# prefixed, and the throwaway servers of the chosen backend:
#   redis      3 redis-server nodes, 127.0.0.1:7001-7003, no persistence
#   postgres   1 PostgreSQL cluster, 127.0.0.1:7201 (initdb into .demo/)
#   mysql      1 MariaDB server, 127.0.0.1:7501 (mariadb-install-db into .demo/)
#   etcd       a 3-member etcd cluster, clients on 127.0.0.1:7301-7303
#   zookeeper  a 3-server ZooKeeper ensemble, clients on 127.0.0.1:7401-7403
# For a backend other than redis the daemons run on .demo/jobs.yaml: the
# example file with its redis: section replaced by that backend's section,
# nothing else changed. Ctrl-C stops the daemons (gracefully), then the
# servers this script started, and removes .demo/. A second Ctrl-C during
# that stops everything at once.
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=.demo
BACKEND=${BACKEND:-redis}
CONFIG=jobs.example.yaml
PORTS=(7001 7002 7003)
PG_PORT=7201
MY_PORT=7501
ETCD_PORTS=(7301 7302 7303) ETCD_PEERS=(7311 7312 7313)
ZK_PORTS=(7401 7402 7403) ZK_QUORUM=(7411 7412 7413) ZK_ELECT=(7421 7422 7423)
DAEMONS=(demo-a demo-b)
METRICS=(127.0.0.1:7101 127.0.0.1:7102)

log() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }
die() { log "$*"; exit 1; }

case $BACKEND in
redis | postgres | mysql | etcd | zookeeper) ;;
*) die "BACKEND=$BACKEND: want redis, postgres, mysql, etcd or zookeeper" ;;
esac

# --- servers ---------------------------------------------------------------
./scripts/deps.sh "$BACKEND"

# --- processes we start -----------------------------------------------------
# Every process is started in its own session (setsid), so a Ctrl-C in the
# terminal reaches only this script, which then stops them in order. PIDs
# are kept in $DEMO/pids; only processes whose command line still matches
# are ever signalled.

ours() { # ours PID PATTERN: is PID alive and running PATTERN?
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -q -- "$2"
}

FORCE=
stop() { # stop PATTERN TIMEOUT_SECONDS PIDFILE...: SIGTERM, wait, SIGKILL
  local pattern=$1 timeout=$2 f pid alive i
  shift 2
  local pids=()
  for f in "$@"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if ours "$pid" "$pattern"; then
      kill -TERM "$pid" 2>/dev/null || true
      kill -CONT "$pid" 2>/dev/null || true # in case it was paused with SIGSTOP
      pids+=("$pid")
    fi
  done
  for ((i = 0; i < timeout * 10; i++)); do
    alive=
    for pid in "${pids[@]}"; do ours "$pid" "$pattern" && alive=1; done
    [ -z "$alive" ] && return 0
    [ -n "$FORCE" ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    if ours "$pid" "$pattern"; then
      log "killing $pid ($pattern) with SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

CLEANED=
cleanup() {
  [ -n "$CLEANED" ] && return
  CLEANED=1
  trap 'FORCE=1' INT TERM HUP
  [ -d "$DEMO/pids" ] || { rm -rf "$DEMO"; return; }
  log "stopping the daemons (running jobs get shutdown_grace; Ctrl-C again to kill them now)"
  stop "$DEMO/leasecron run" 40 "$DEMO"/pids/demo-*.pid
  log "stopping the $BACKEND servers"
  stop "redis-server" 10 "$DEMO"/pids/redis-*.pid
  stop "postgres" 10 "$DEMO"/pids/postgres.pid
  stop "mariadbd" 20 "$DEMO"/pids/mariadbd.pid
  stop "etcd" 10 "$DEMO"/pids/etcd-*.pid
  stop "QuorumPeerMain" 10 "$DEMO"/pids/zk-*.pid
  # The log prefixers end when the daemons' output closes.
  sleep 0.2
  rm -rf "$DEMO"
  log "demo stopped and cleaned up"
}

if [ -d "$DEMO" ]; then
  log "cleaning up after an earlier demo"
  cleanup
  CLEANED=
fi
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

free() { # free PORT...: fail unless every port is free
  for p in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      die "port $p is in use; the $BACKEND demo needs 127.0.0.1 ports $* free"
    fi
  done
}
mkdir -p "$DEMO/pids"

start_redis() {
  free "${PORTS[@]}"
  log "starting redis-server on ports ${PORTS[*]} (no persistence)"
  for p in "${PORTS[@]}"; do
    mkdir -p "$DEMO/redis-$p"
    setsid redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no \
      --dir "$DEMO/redis-$p" --logfile "$PWD/$DEMO/redis-$p.log" </dev/null &
    echo $! >"$DEMO/pids/redis-$p.pid"
  done
  for p in "${PORTS[@]}"; do
    for ((i = 0; i < 100; i++)); do
      [ "$(redis-cli -p "$p" ping 2>/dev/null)" = PONG ] && break
      sleep 0.1
    done
    [ "$(redis-cli -p "$p" ping 2>/dev/null)" = PONG ] || die "redis-server on port $p did not start; see $DEMO/redis-$p.log"
  done
  HINT="redis-cli -p ${PORTS[0]} shutdown nosave   # lose a node: 2 of 3 are still a quorum"
}

start_postgres() {
  free "$PG_PORT"
  local bin run=() pg="$PWD/$DEMO/pg"
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  mkdir -p "$pg"
  if [ "$(id -u)" = 0 ]; then
    # PostgreSQL refuses to run as root: run it as the package's user.
    chown postgres: "$pg"
    run=(setpriv --reuid=postgres --regid=postgres --init-groups)
  fi
  log "initdb into $DEMO/pg, starting postgres on 127.0.0.1:$PG_PORT"
  "${run[@]}" "$bin/initdb" -D "$pg/data" -U leasecron --auth=trust -E UTF8 >"$pg/initdb.log" 2>&1 ||
    die "initdb failed; see $DEMO/pg/initdb.log"
  setsid "${run[@]}" "$bin/postgres" -D "$pg/data" -p "$PG_PORT" -k "$pg" \
    -c listen_addresses=127.0.0.1 </dev/null >"$pg/postgres.log" 2>&1 &
  echo $! >"$DEMO/pids/postgres.pid"
  for ((i = 0; i < 100; i++)); do
    "$bin/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && break
    sleep 0.1
  done
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" || die "postgres did not start; see $DEMO/pg/postgres.log"
  # The example's redis: section, replaced by a postgres: one.
  with_section postgres "  url: \"postgres://leasecron@127.0.0.1:$PG_PORT/postgres?sslmode=disable\"" \
    "  table: leasecron_leases" "  timeout: 500ms"
  HINT="kill -STOP \$(cat $DEMO/pids/postgres.pid)   # pause the database: jobs are killed before their leases run out"
}

start_mysql() {
  free "$MY_PORT"
  local run=() my="$PWD/$DEMO/my" bin=mariadbd
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || bin=mysqld
  [ -x "/usr/sbin/$bin" ] && bin=/usr/sbin/$bin
  mkdir -p "$my/tmp"
  if [ "$(id -u)" = 0 ]; then
    # mysqld refuses to run as root: run it as the package's user.
    chown -R mysql: "$my"
    run=(setpriv --reuid=mysql --regid=mysql --init-groups)
  fi
  local opts=(--no-defaults --datadir="$my/data" --tmpdir="$my/tmp" --innodb-log-file-size=8M
    --innodb-buffer-pool-size=32M)
  log "mariadb-install-db into $DEMO/my, starting $bin on 127.0.0.1:$MY_PORT"
  "${run[@]}" mariadb-install-db "${opts[@]}" --auth-root-authentication-method=socket \
    --skip-test-db >"$my/install.log" 2>&1 || die "mariadb-install-db failed; see $DEMO/my/install.log"
  setsid "${run[@]}" "$bin" "${opts[@]}" --port="$MY_PORT" --bind-address=127.0.0.1 \
    --skip-networking=0 --socket="$my/mysqld.sock" --log-error="$my/mysqld.log" </dev/null >/dev/null 2>&1 &
  echo $! >"$DEMO/pids/mariadbd.pid"
  for ((i = 0; i < 300; i++)); do
    mariadb --no-defaults -S "$my/mysqld.sock" -u root -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.1
  done
  mariadb --no-defaults -S "$my/mysqld.sock" -u root -e "CREATE DATABASE leasecron CHARACTER SET utf8mb4;
    CREATE USER leasecron@'127.0.0.1'; GRANT ALL ON leasecron.* TO leasecron@'127.0.0.1'" ||
    die "$bin did not start; see $DEMO/my/mysqld.log"
  # The example's redis: section, replaced by a mysql: one.
  with_section mysql "  dsn: \"leasecron@tcp(127.0.0.1:$MY_PORT)/leasecron\"" \
    "  table: leasecron_leases" "  timeout: 500ms"
  HINT="kill -STOP \$(cat $DEMO/pids/mariadbd.pid)   # pause the database: jobs are killed before their leases run out"
}

# with_section NAME LINES...: the example config with its redis: section
# replaced by NAME: and the given indented lines, into $DEMO/jobs.yaml.
with_section() {
  local name=$1
  shift
  CONFIG=$DEMO/jobs.yaml
  printf '%s\n' "$@" >"$DEMO/section.yaml"
  awk -v name="$name" -v sec="$DEMO/section.yaml" '
    /^redis:/ { print name ":"; while ((getline l < sec) > 0) print l; skip = 1; next }
    skip && /^[^ #]/ { skip = 0 }
    !skip' jobs.example.yaml >"$CONFIG"
}

start_etcd() {
  free "${ETCD_PORTS[@]}" "${ETCD_PEERS[@]}"
  local i cluster="" eps=()
  for i in 0 1 2; do
    cluster+="${cluster:+,}demo$i=http://127.0.0.1:${ETCD_PEERS[$i]}"
  done
  log "starting a 3-member etcd cluster on ports ${ETCD_PORTS[*]}"
  for i in 0 1 2; do
    setsid etcd --name "demo$i" --data-dir "$DEMO/etcd-$i" \
      --listen-client-urls "http://127.0.0.1:${ETCD_PORTS[$i]}" --advertise-client-urls "http://127.0.0.1:${ETCD_PORTS[$i]}" \
      --listen-peer-urls "http://127.0.0.1:${ETCD_PEERS[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEERS[$i]}" \
      --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token leasecron-demo \
      </dev/null >"$DEMO/etcd-$i.log" 2>&1 &
    echo $! >"$DEMO/pids/etcd-$i.pid"
    eps+=("    - http://127.0.0.1:${ETCD_PORTS[$i]}")
  done
  for ((i = 0; i < 150; i++)); do
    ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:${ETCD_PORTS[0]}" endpoint health >/dev/null 2>&1 && break
    sleep 0.2
  done
  ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:${ETCD_PORTS[0]}" endpoint health >/dev/null 2>&1 ||
    die "etcd did not start; see $DEMO/etcd-0.log"
  with_section etcd "  endpoints:" "${eps[@]}" "  prefix: /leasecron/" "  timeout: 500ms"
  HINT="kill -STOP \$(cat $DEMO/pids/etcd-0.pid)   # pause a member: 2 of 3 keep the cluster going"
}

start_zookeeper() {
  free "${ZK_PORTS[@]}" "${ZK_QUORUM[@]}" "${ZK_ELECT[@]}"
  local i dir srv=()
  log "starting a 3-server ZooKeeper ensemble on ports ${ZK_PORTS[*]}"
  for i in 0 1 2; do
    dir="$PWD/$DEMO/zk-$i"
    mkdir -p "$dir/data"
    echo $((i + 1)) >"$dir/data/myid"
    {
      echo "tickTime=500"; echo "initLimit=20"; echo "syncLimit=10"
      echo "dataDir=$dir/data"; echo "clientPort=${ZK_PORTS[$i]}"; echo "clientPortAddress=127.0.0.1"
      echo "admin.enableServer=false"; echo "4lw.commands.whitelist=srvr,ruok"
      for j in 0 1 2; do echo "server.$((j + 1))=127.0.0.1:${ZK_QUORUM[$j]}:${ZK_ELECT[$j]}"; done
    } >"$dir/zoo.cfg"
    printf 'log4j.rootLogger=WARN, F\nlog4j.logger.org.apache.zookeeper.server.quorum.QuorumPeer=INFO\nlog4j.appender.F=org.apache.log4j.FileAppender\nlog4j.appender.F.File=%s/zookeeper.log\nlog4j.appender.F.layout=org.apache.log4j.PatternLayout\nlog4j.appender.F.layout.ConversionPattern=%%d %%p %%m%%n\n' "$dir" >"$dir/log4j.properties"
    setsid java -Xmx128m -XX:+UseSerialGC -cp "$dir:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar" \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" </dev/null >"$dir/out.log" 2>&1 &
    echo $! >"$DEMO/pids/zk-$i.pid"
    srv+=("    - 127.0.0.1:${ZK_PORTS[$i]}")
  done
  for ((i = 0; i < 300; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/${ZK_PORTS[0]}" && printf srvr >&3 && grep -q '^Mode' <&3) 2>/dev/null && break
    sleep 0.2
  done
  with_section zookeeper "  servers:" "${srv[@]}" "  root: /leasecron" "  timeout: 500ms"
  HINT="kill -STOP \$(cat $DEMO/pids/zk-0.pid)   # pause a server: 2 of 3 keep the ensemble going"
}

log "building $DEMO/leasecron"
go build -o "$DEMO/leasecron" ./cmd/leasecron
"start_$BACKEND"
"$DEMO/leasecron" check -c "$CONFIG"

colors=(36 35)
export INVENTORY_STORE="$PWD/$DEMO/inventory-store"
for i in "${!DAEMONS[@]}"; do
  d=${DAEMONS[$i]}
  prefix="[$d] "
  [ -t 1 ] && prefix=$'\033['"${colors[$i]}"'m['"$d"$']\033[0m '
  # sed ignores the signals meant for this script (SIG_IGN survives exec):
  # it runs until the daemon's output closes, so the daemon never writes
  # into a broken pipe while it shuts down.
  setsid "$DEMO/leasecron" run -c "$CONFIG" --id "$d" --metrics "${METRICS[$i]}" </dev/null \
    > >(trap '' INT TERM HUP; exec sed -u "s/^/$prefix/") 2>&1 &
  echo $! >"$DEMO/pids/$d.pid"
done

fresh="The nodes are new, so
   they do not vote for one lease TTL (10s): the first runs start after that."
[ "$BACKEND" = redis ] || fresh="The first runs start at their next tick."
log "2 daemons running on $CONFIG with the $BACKEND backend. $fresh
   Status page (read-only, refreshes itself): http://${METRICS[0]}/ and http://${METRICS[1]}/
   In another terminal:
     $DEMO/leasecron status -c $CONFIG
     $DEMO/leasecron trigger -c $CONFIG hello
     curl -s ${METRICS[0]}/healthz; curl -s ${METRICS[0]}/metrics | grep ^leasecron_
     kill -STOP \$(cat $DEMO/pids/demo-a.pid)   # pause demo-a; its jobs are killed before its leases expire
     $HINT
   Ctrl-C stops everything."

while :; do
  for d in "${DAEMONS[@]}"; do
    ours "$(cat "$DEMO/pids/$d.pid")" "$DEMO/leasecron run" || die "daemon $d exited"
  done
  sleep 1
done
