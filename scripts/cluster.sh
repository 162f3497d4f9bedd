#!/usr/bin/env bash
# Local PostgreSQL clusters for the demo and the tests, run as `postgres`
# (initdb refuses root), each in its own directory and on its own port; of
# PostgreSQL 15, or 18 with PG_MILVUS_PG=18 (scripts/pg-env.sh).
#
#   cluster.sh start NAME [extra postgresql.conf lines...]   fresh initdb + start
#   cluster.sh stop NAME | stop-all
#   cluster.sh crash NAME      kill -9 the postmaster and every backend (a power cut
#                              for the server, not for the OS page cache)
#   cluster.sh restart NAME    start an existing cluster again (crash recovery)
#   cluster.sh standby NAME PRIMARY [pg_basebackup args...]
#                              a streaming replica of a running cluster (or of
#                              a standby: a cascade); by default -X stream
#   cluster.sh backup DIR PRIMARY [pg_basebackup args...]
#                              a base backup in tar form; by default -X fetch
#   cluster.sh restore NAME BACKUP ARCHIVE [recovery settings...]
#                              archive recovery of a tar base backup from a
#                              WAL archive (restore_command), promoted at its
#                              target (recovery_target_name = ..., or to the end)
#   cluster.sh promote NAME    a standby becomes a primary (pg_ctl promote)
#   cluster.sh rewind NAME SOURCE
#                              pg_rewind of a stopped former primary from the
#                              running SOURCE, then started as its standby
#   cluster.sh upgrade NAME OLD [pg_upgrade options...] [-- postgresql.conf lines...]
#                              pg_upgrade of OLD, a PostgreSQL 15 cluster (stopped
#                              first), into NAME, a new cluster of the version
#                              PG_MILVUS_PG names; started unless the options say
#                              --check. Options: --link, --copy (the default),
#                              --clone; --new-bindir DIR (another installation of
#                              the new version)
#   cluster.sh port NAME | host NAME | psql NAME [psql args]
#
# Clusters live under $PG_MILVUS_RUN (default /tmp/pg_milvus, for 18
# /tmp/pg_milvus-18). `start` always
# starts from an empty data directory, so a run never sees an old one's state.
set -euo pipefail

source "$(dirname "$0")/pg-env.sh"
RUN=$PG_MILVUS_RUN
BIN=$PG_BIN

# Servers get the caller's environment (RUST_BACKTRACE included: the
# extension keeps backtraces out of client messages whatever it says).
as_pg() { runuser -u postgres -- "$@"; }

free_port() {
  local p=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || [ -e "/tmp/.s.PGSQL.$p" ]; do
    p=$((p + 1))
  done
  echo "$p"
}

dir_of() { echo "$RUN/$1"; }

# A new cluster's postgresql.conf lines: loopback and its own socket
# directory ($1), pg_milvus preloaded, then the caller's lines.
configure() {
  local d=$1; shift
  {
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = '$d'"
    echo "shared_preload_libraries = 'pg_milvus'"
    echo "fsync = off"                 # test clusters: speed over power-loss safety
    echo "log_min_messages = warning"
    for line in "$@"; do echo "$line"; done
  } >>"$d/data/postgresql.conf"
}

# Starts the server of directory $1 and waits up to $2 seconds for it.
start_server() {
  as_pg "$BIN/pg_ctl" -D "$1/data" -l "$1/server.log" -w -t "$2" start >/dev/null ||
    { tail -30 "$1/server.log"; exit 1; }
}

# A new cluster's last steps: its port ($2, or the next free one), start
# it, print the port. A port free when chosen can be taken before the
# server binds it, by a client's outgoing connection (these ports lie in
# Linux's ephemeral range): then the next free one is tried.
launch() {
  local d=$1 port=$2
  for _ in 1 2 3 4 5; do
    echo "port = $port" >>"$d/data/postgresql.conf"
    echo "$port" >"$d/port"
    chown postgres:postgres "$d/port"
    if as_pg "$BIN/pg_ctl" -D "$d/data" -l "$d/server.log" -w -t 60 start >/dev/null; then
      echo "$port"
      return
    fi
    grep -q "Address already in use" "$d/server.log" || break
    port=$(free_port $((port + 1)))
  done
  tail -30 "$d/server.log"
  exit 1
}

stop() {
  local d; d=$(dir_of "$1")
  if [ -f "$d/data/postmaster.pid" ]; then
    as_pg "$BIN/pg_ctl" -D "$d/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
      as_pg "$BIN/pg_ctl" -D "$d/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
}

case "${1:-}" in
  start)
    name=${2:?cluster name}; shift 2
    d=$(dir_of "$name")
    stop "$name"
    install -d -o postgres -g postgres -m 0755 "$RUN"
    rm -rf "$d"
    install -d -o postgres -g postgres -m 0700 "$d"
    as_pg "$BIN/initdb" -D "$d/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$d/initdb.log" 2>&1 ||
      { cat "$d/initdb.log"; exit 1; }
    base=54900
    [ "$name" = demo ] || base=$((54910 + $(cksum <<<"$name" | cut -c1-2)))
    port=$(free_port "$base")
    configure "$d" "$@"
    launch "$d" "$port"
    ;;
  standby)
    # A streaming replica of a running cluster: pg_basebackup, then its own
    # port and socket directory; hot_standby is on by default.
    name=${2:?standby name}; primary=${3:?primary cluster name}
    d=$(dir_of "$name"); p=$(dir_of "$primary")
    stop "$name"
    rm -rf "$d"
    install -d -o postgres -g postgres -m 0700 "$d"
    shift 3
    (($#)) || set -- -X stream
    as_pg "$BIN/pg_basebackup" -h "$p" -p "$(cat "$p/port")" -U postgres -D "$d/data" -R -c fast "$@" \
      >"$d/basebackup.log" 2>&1 || { cat "$d/basebackup.log"; exit 1; }
    port=$(free_port $(( $(cat "$p/port") + 1 )))
    # A cascade's primary_conninfo names its upstream, as pg_basebackup -R
    # wrote it; archiving is the primary's alone.
    echo "unix_socket_directories = '$d'" >>"$d/data/postgresql.conf"
    echo "archive_mode = off" >>"$d/data/postgresql.conf"
    launch "$d" "$port"
    ;;
  backup)
    dir=${2:?backup directory}; p=$(dir_of "${3:?primary cluster name}")
    shift 3
    (($#)) || set -- -X fetch
    rm -rf "$dir"
    install -d -o postgres -g postgres -m 0700 "$dir"
    as_pg "$BIN/pg_basebackup" -h "$p" -p "$(cat "$p/port")" -U postgres -D "$dir" -Ft -c fast "$@" \
      >"$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
    ;;
  restore)
    name=${2:?cluster name}; backup=${3:?backup directory}; archive=${4:?WAL archive directory}
    shift 4
    d=$(dir_of "$name")
    stop "$name"
    rm -rf "$d"
    install -d -o postgres -g postgres -m 0700 "$d" "$d/data"
    as_pg tar -xf "$backup/base.tar" -C "$d/data"
    # -X stream puts the backup's WAL in a tar of its own.
    [ ! -f "$backup/pg_wal.tar" ] || as_pg tar -xf "$backup/pg_wal.tar" -C "$d/data/pg_wal"
    {
      echo "unix_socket_directories = '$d'"
      echo "archive_mode = off"
      echo "restore_command = 'cp $archive/%f %p'"
      echo "recovery_target_action = promote"
      for line in "$@"; do echo "$line"; done
    } >>"$d/data/postgresql.conf"
    as_pg touch "$d/data/recovery.signal"
    launch "$d" "$(free_port 55500)"
    ;;
  upgrade)
    name=${2:?new cluster name}; old_name=${3:?old cluster name}
    shift 3
    # The old cluster is one of 15's (scripts/pg-env.sh).
    read -r old_bin old_run < <(PG_MILVUS_PG=15 PG_MILVUS_RUN='' bash -c \
      'source "$0"; echo "$PG_BIN $PG_MILVUS_RUN"' "$(dirname "$0")/pg-env.sh")
    o=$old_run/$old_name; d=$(dir_of "$name")
    options=(); new_bin=$BIN; check=false
    while (($#)) && [ "$1" != -- ]; do
      case "$1" in
        --new-bindir) new_bin=$2; shift ;;
        --check) check=true; options+=("$1") ;;
        *) options+=("$1") ;;
      esac
      shift
    done
    [ "${1:-}" != -- ] || shift
    [ ! -f "$o/data/postmaster.pid" ] ||
      as_pg "$old_bin/pg_ctl" -D "$o/data" -m fast -w -t 60 stop >/dev/null
    stop "$name"
    install -d -o postgres -g postgres -m 0755 "$RUN"
    rm -rf "$d"
    install -d -o postgres -g postgres -m 0700 "$d"
    # pg_upgrade wants both clusters' checksum settings alike; 18's initdb
    # turns them on by default.
    checksums=--no-data-checksums
    as_pg "$old_bin/pg_controldata" "$o/data" | grep -q 'checksum version: *[1-9]' && checksums=--data-checksums
    as_pg "$new_bin/initdb" -D "$d/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 $checksums \
      >"$d/initdb.log" 2>&1 || { cat "$d/initdb.log"; exit 1; }
    configure "$d" "$@"
    # pg_upgrade writes its reports into the current directory and talks
    # to both servers through a socket there, on two free ports.
    old_port=$(free_port 50432); new_port=$(free_port $((old_port + 1)))
    if ! (cd "$d" && as_pg "$new_bin/pg_upgrade" -b "$old_bin" -B "$new_bin" -d "$o/data" -D "$d/data" \
          -p "$old_port" -P "$new_port" -s "$d" "${options[@]}" >"$d/pg_upgrade.log" 2>&1); then
      # Its report names the log of the failing step: show that step's errors.
      cat "$d/pg_upgrade.log"
      grep -hiE "error|fatal" "$d"/data/pg_upgrade_output.d/*/log/*.log 2>/dev/null | tail -5
      exit 1
    fi
    if $check; then cat "$d/pg_upgrade.log"; exit 0; fi
    launch "$d" "$(free_port 55600)"
    ;;
  stop) stop "${2:?cluster name}" ;;
  promote) as_pg "$BIN/pg_ctl" -D "$(dir_of "${2:?cluster name}")/data" -w promote >/dev/null ;;
  rewind)
    d=$(dir_of "${2:?cluster name}"); s=$(dir_of "${3:?source cluster name}")
    stop "$2"
    as_pg "$BIN/pg_rewind" --target-pgdata="$d/data" \
      --source-server="host=$s port=$(cat "$s/port") user=postgres dbname=postgres" >"$d/rewind.log" 2>&1 ||
      { cat "$d/rewind.log"; exit 1; }
    # pg_rewind copied the source's configuration: this server's own port
    # and socket again, and its primary the source.
    {
      echo "port = $(cat "$d/port")"
      echo "unix_socket_directories = '$d'"
    } >>"$d/data/postgresql.conf"
    echo "primary_conninfo = 'host=$s port=$(cat "$s/port") user=postgres'" >>"$d/data/postgresql.auto.conf"
    as_pg touch "$d/data/standby.signal"
    start_server "$d" 120
    ;;
  crash)
    d=$(dir_of "${2:?cluster name}")
    pid=$(head -1 "$d/data/postmaster.pid")
    children=$(pgrep -P "$pid" || true)
    kill -9 "$pid" $children 2>/dev/null || true
    # Wait until every process of the cluster is gone, so shared memory is free.
    for _ in $(seq 100); do
      kill -0 "$pid" $children 2>/dev/null || break
      sleep 0.1
    done
    ;;
  restart) start_server "$(dir_of "${2:?cluster name}")" 120 ;;
  stop-all)
    [ -d "$RUN" ] || exit 0
    for d in "$RUN"/*/; do [ -d "$d" ] && stop "$(basename "$d")"; done
    ;;
  port) cat "$(dir_of "${2:?cluster name}")/port" ;;
  host) dir_of "${2:?cluster name}" ;;
  psql)
    name=${2:?cluster name}; shift 2
    exec psql -X -h "$(dir_of "$name")" -p "$(cat "$(dir_of "$name")/port")" -U postgres "$@"
    ;;
  *) sed -n '2,33p' "$0"; exit 2 ;;
esac
