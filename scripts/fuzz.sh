#!/usr/bin/env bash
# Coverage-guided fuzzing of the core's parsers and decoders (fuzz/): each
# target for FUZZ_SECONDS (default 60), from the committed seeds
# (fuzz/seeds/), growing a working corpus in fuzz/corpus/. Needs a nightly
# toolchain (rustup); installs cargo-fuzz if missing. A crash leaves its
# input in fuzz/artifacts/ and fails the run: keep it as a regression test.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-60}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
cargo run -q --bin write-seeds
for target in vector_text vector_binary insert_binlog read_index delta_binlog index_file manifest; do
  mkdir -p "corpus/$target"
  cargo +nightly fuzz run -O "$target" "corpus/$target" "seeds/$target" -- -max_total_time="$seconds" 2>"corpus/$target.log" ||
    { tail -30 "corpus/$target.log"; exit 1; }
  echo "$target: $(grep -E '^Done' "corpus/$target.log")"
done
