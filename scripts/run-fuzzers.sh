#!/usr/bin/env bash
# Builds every tests/fuzz/*_fuzz.cc as a libFuzzer binary (clang,
# ASan + UBSan) and runs each for a short smoke run from a seed corpus.
#
#   scripts/run-fuzzers.sh [BUILD_DIR] [RUNS]
#
# BUILD_DIR defaults to build/fuzz, RUNS (inputs per fuzzer) to 20000;
# FUZZ_MAX_SECONDS (default 45) caps each fuzzer's run time so a slow target
# cannot stretch the smoke run.
# Seeds come from the generated tiny test models ($INFERD_TEST_MODELS_DIR or
# BUILD_DIR/../test_models) and ../shared when present. Exits non-zero when a
# fuzzer finds a crash (the reproducer is left in BUILD_DIR/<name>/).
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
out="$(mkdir -p "${1:-$root/build/fuzz}" && cd "${1:-$root/build/fuzz}" && pwd)"
runs="${2:-20000}"
shared="${INFERD_SHARED_DIR:-$root/../shared}"
models="${INFERD_TEST_MODELS_DIR:-$out/../test_models}"
python="${INFERD_PYTHON:-/usr/bin/python3}"
max_seconds="${FUZZ_MAX_SECONDS:-45}"

cxx="${FUZZ_CXX:-}"
if [[ -z "$cxx" ]]; then
  for c in clang++-14 clang++; do
    command -v "$c" >/dev/null 2>&1 && { cxx="$c"; break; }
  done
fi
[[ -n "$cxx" ]] || { echo "run-fuzzers: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }

flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root")
# Debian's abseil is split into many small libraries; ask pkg-config for
# the ones the runtime uses (dependencies come along).
absl_libs=$(pkg-config --libs absl_status absl_statusor absl_strings \
  absl_str_format absl_hash absl_raw_hash_set absl_flat_hash_map \
  absl_synchronization absl_time absl_int128 absl_log_severity \
  absl_raw_logging_internal absl_throw_delegate absl_bad_optional_access \
  absl_bad_variant_access)

# Sources each fuzzer needs besides itself.
sources_for() {
  case "$1" in
    safetensors_fuzz|config_fuzz|gguf_fuzz)
      echo "$root"/runtime/loader/*.cc "$root/device/tensor.cc" \
           "$root/device/quant.cc" "$root/runtime/common/registry.cc" ;;
    tokenizer_fuzz)
      echo "$root"/runtime/tokenizer/*.cc "$root/device/tensor.cc" ;;
    *)
      echo "$root"/runtime/loader/*.cc "$root"/runtime/tokenizer/*.cc \
           "$root/device/tensor.cc" "$root/device/quant.cc" \
           "$root/runtime/common/registry.cc" ;;
  esac
}
extra_flags_for() {
  case "$1" in
    safetensors_fuzz|config_fuzz|gguf_fuzz) ;;
    *) pkg-config --cflags --libs oniguruma icu-uc icu-i18n ;;
  esac
}
max_len_for() {
  case "$1" in
    safetensors_fuzz|gguf_fuzz) echo 8192 ;;
    *) echo 16384 ;;
  esac
}

# --- seed corpora ----------------------------------------------------------
seed_dir() { local d="$out/$1/corpus"; mkdir -p "$d"; echo "$d"; }

seed_safetensors() {
  local d; d=$(seed_dir safetensors_fuzz)
  # Small valid files (every dtype) written with the generator's writer.
  "$python" - "$d" "$root/tools" <<'EOF' || echo "run-fuzzers: python seeds skipped"
import os, sys
sys.path.insert(0, sys.argv[2])
import numpy as np
import make_test_models as m
d = sys.argv[1]
a = np.arange(6, dtype=np.float32).reshape(2, 3)
m.write_safetensors(os.path.join(d, "valid_f32"), [("w", (2, 3), "f32"), ("b", (3,), "f32")],
                    lambda n: a if n == "w" else a[0])
m.write_safetensors(os.path.join(d, "valid_bf16"), [("x", (4,), "bf16"), ("i", (1, 2), "i64")],
                    lambda n: np.ones(4) if n == "x" else np.zeros((1, 2), np.int64))
EOF
  # Headers of real files (truncated: the tensors then point past the end).
  local f i=0
  for f in "$models"/*/model.safetensors "$shared"/models/*/model.safetensors; do
    [[ -f "$f" ]] || continue
    head -c 8192 "$f" > "$d/real_$i"; i=$((i + 1))
  done
}

seed_gguf() {
  local d; d=$(seed_dir gguf_fuzz)
  # A small valid file: scalar and array metadata, an F32 and a Q8_0 tensor.
  "$python" - "$d" <<'EOF' || echo "run-fuzzers: python seeds skipped"
import os, struct, sys
def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b
kv = [s("general.architecture") + struct.pack("<I", 8) + s("llama"),
      s("n") + struct.pack("<I", 4) + struct.pack("<I", 7),
      s("f") + struct.pack("<I", 6) + struct.pack("<f", 0.5),
      s("toks") + struct.pack("<IIQ", 9, 8, 2) + s("<s>") + s("a"),
      s("ids") + struct.pack("<IIQ", 9, 5, 3) + struct.pack("<iii", 1, -2, 3)]
ts = [s("w") + struct.pack("<I", 2) + struct.pack("<QQ", 4, 2) + struct.pack("<IQ", 0, 0),
      s("q") + struct.pack("<I", 1) + struct.pack("<Q", 32) + struct.pack("<IQ", 8, 32)]
out = struct.pack("<IIQQ", 0x46554747, 3, len(ts), len(kv)) + b"".join(kv) + b"".join(ts)
out += b"\0" * (-len(out) % 32)
out += bytes(range(32)) + bytes(34)
open(os.path.join(sys.argv[1], "valid_small"), "wb").write(out)
EOF
  # The head of real GGUF files (the tensors then point past the end).
  local f i=0
  for f in "$root"/build/models/*/*.gguf; do
    [[ -f "$f" ]] || continue
    head -c 8192 "$f" > "$d/real_$i"; i=$((i + 1))
  done
}

seed_config() {
  local d; d=$(seed_dir config_fuzz)
  local f i=0
  add() { { printf "\\$(printf '%03o' "$1")"; cat "$2"; } > "$d/seed_${1}_$i"; i=$((i + 1)); }
  for f in "$models"/*/config.json "$shared"/models/*/config.json; do
    [[ -f "$f" ]] && add 0 "$f"
  done
  for f in "$models"/*/tokenizer_config.json "$shared"/tokenizers/*/tokenizer_config.json; do
    [[ -f "$f" ]] && add 1 "$f"
  done
  for f in "$models"/*/modules.json; do [[ -f "$f" ]] && add 2 "$f"; done
  for f in "$models"/*/1_Pooling/config.json; do [[ -f "$f" ]] && add 3 "$f"; done
  for f in "$models"/*/config_sentence_transformers.json; do [[ -f "$f" ]] && add 4 "$f"; done
  for f in "$models"/*/sentence_bert_config.json; do [[ -f "$f" ]] && add 5 "$f"; done
  printf '0{}' > "$d/empty_object"
}

seed_tokenizer() {
  local d; d=$(seed_dir tokenizer_fuzz)
  local f i=0
  for f in "$shared"/tokenizers/cases/*.inp; do
    [[ -f "$f" ]] || continue
    head -c 4096 "$f" > "$d/text_$i"; i=$((i + 1))
  done
  printf 'Hello world! 12345 \xe2\x96\x81 caf\xc3\xa9 \xf0\x9f\x98\x80' > "$d/mixed"
}

# --- build and run -----------------------------------------------------------
status=0
shopt -s nullglob
for src in "$root"/tests/fuzz/*_fuzz.cc; do
  name=$(basename "$src" .cc)
  mkdir -p "$out/$name"
  bin="$out/$name/$name"
  read -r -a srcs <<< "$(sources_for "$name")"
  missing=0
  for s in "${srcs[@]}"; do [[ -f "$s" ]] || missing=1; done
  if ((missing)); then
    echo "run-fuzzers: $name: sources not all present yet, skipping"
    continue
  fi
  newer=0
  if [[ ! -x "$bin" ]]; then
    newer=1
  else
    while IFS= read -r f; do
      [[ "$f" -nt "$bin" ]] && { newer=1; break; }
    done < <(printf '%s\n' "$src" "${srcs[@]}" "$root/device/tensor.h" \
               "$root"/runtime/common/*.h "$(dirname "${srcs[0]}")"/*.h)
  fi
  if ((newer)); then
    echo "run-fuzzers: building $name"
    read -r -a extra <<< "$(extra_flags_for "$name")"
    if ! "$cxx" "${flags[@]}" "$src" "${srcs[@]}" "${extra[@]+"${extra[@]}"}" \
        $absl_libs -lpthread -o "$bin.tmp"; then
      echo "run-fuzzers: $name failed to build" >&2
      status=1
      continue
    fi
    mv "$bin.tmp" "$bin"
  fi
  case "$name" in
    safetensors_fuzz) seed_safetensors ;;
    gguf_fuzz) seed_gguf ;;
    config_fuzz) seed_config ;;
    tokenizer_fuzz) seed_tokenizer ;;
    *) seed_dir "$name" >/dev/null ;;
  esac
  echo "run-fuzzers: running $name for $runs inputs (at most ${max_seconds}s)"
  if ! (cd "$out/$name" && "$bin" -runs="$runs" -max_len="$(max_len_for "$name")" \
          -max_total_time="$max_seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
          corpus > run.log 2>&1); then
    echo "run-fuzzers: $name FAILED; log and reproducer in $out/$name" >&2
    tail -n 40 "$out/$name/run.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|Done" "$out/$name/run.log" | tail -n 2
  fi
done
if [[ ! -f "$root/tests/fuzz/tokenizer_fuzz.cc" ]]; then
  echo "run-fuzzers: tests/fuzz/tokenizer_fuzz.cc not present yet, skipped"
fi
exit $status
