#!/usr/bin/env bash
# scripts/deps.sh WHAT...: installs the servers the tests and the demo run
# as throwaway processes, from Debian's packages, when they are missing.
# WHAT is any of: redis postgres mysql (Debian's mariadb-server) etcd zookeeper systemd chromium (the
# status page's screenshot test) promtool (Prometheus's rule checker, from
# Debian's prometheus package) dpkg (dpkg-deb, for the package test). The packages'
# own system services are kept from starting (policy-rc.d): leasecron's
# tests and demo start their own processes on loopback ports and kill them
# by PID. Needs root or sudo when something is missing; does nothing
# otherwise.
set -euo pipefail

log() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

pkgs=()
for what in "$@"; do
  case $what in
  redis)
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null || pkgs+=(redis-server redis-tools) ;;
  postgres)
    { d=$(pg_bin) && [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; } || pkgs+=(postgresql) ;;
  mysql)
    { command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ]; } && command -v mariadb-install-db >/dev/null || pkgs+=(mariadb-server mariadb-client) ;;
  etcd)
    command -v etcd >/dev/null && command -v etcdctl >/dev/null || pkgs+=(etcd-server etcd-client) ;;
  zookeeper)
    ls /usr/share/java/zookeeper*.jar >/dev/null 2>&1 && command -v java >/dev/null || pkgs+=(zookeeper) ;;
  systemd)
    command -v systemd-analyze >/dev/null || pkgs+=(systemd) ;;
  chromium)
    command -v chromium >/dev/null || pkgs+=(chromium) ;;
  promtool)
    command -v promtool >/dev/null || pkgs+=(prometheus) ;;
  dpkg)
    command -v dpkg-deb >/dev/null && command -v dpkg >/dev/null || pkgs+=(dpkg) ;;
  *)
    log "deps.sh: unknown dependency $what (want redis postgres mysql etcd zookeeper systemd chromium promtool dpkg)"; exit 2 ;;
  esac
done
[ ${#pkgs[@]} -eq 0 ] && exit 0

log "installing ${pkgs[*]} (apt-get); their system services are kept from starting"
SUDO=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { log "missing ${pkgs[*]}: install them (apt-get install ${pkgs[*]}) or run as root"; exit 1; }
  SUDO=sudo
fi
policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  # invoke-rc.d asks policy-rc.d; exit 101 = "do not start services".
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  policy=1
fi
rc=0
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null || rc=$?
if [ -n "$policy" ]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
if [ "$rc" != 0 ]; then log "apt-get install ${pkgs[*]} failed"; exit 1; fi
