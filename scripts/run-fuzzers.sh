#!/usr/bin/env bash
# Builds every tests/fuzz/*_fuzz.cc as a libFuzzer binary (clang,
# ASan + UBSan) and runs each from a seed corpus.
#
#   scripts/run-fuzzers.sh [BUILD_DIR] [RUNS] [TARGET...]
#
# BUILD_DIR defaults to build/fuzz, RUNS (inputs per fuzzer) to 20000;
# FUZZ_MAX_SECONDS (default 45) caps each fuzzer's run time so a slow target
# cannot stretch the smoke run (0: no cap). TARGETs (e.g. gguf_fuzz) limit
# the run to those fuzzers. A long run outside CI, a million inputs each:
#   FUZZ_MAX_SECONDS=0 nice -n 19 scripts/run-fuzzers.sh build/fuzz 1000000
# Seeds: the committed corpora in tests/fuzz/corpus/<target>/, plus files
# cut from the generated tiny test models ($INFERD_TEST_MODELS_DIR or
# BUILD_DIR/../test_models) and ../shared when present. Each fuzzer's
# working corpus (BUILD_DIR/<target>/corpus) keeps what earlier runs found.
# Sources shared by several fuzzers are compiled once (BUILD_DIR/obj).
# Exits non-zero when a fuzzer finds a crash (the reproducer is left in
# BUILD_DIR/<name>/).
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
out="$(mkdir -p "${1:-$root/build/fuzz}" && cd "${1:-$root/build/fuzz}" && pwd)"
runs="${2:-20000}"
only=("${@:3}")
shared="${INFERD_SHARED_DIR:-$root/../shared}"
models="${INFERD_TEST_MODELS_DIR:-$out/../test_models}"
python="${INFERD_PYTHON:-/usr/bin/python3}"
max_seconds="${FUZZ_MAX_SECONDS:-45}"
# The build tree (llguidance for structured_output_fuzz).
build_dir="${BUILD_DIR:-$out/..}"

cxx="${FUZZ_CXX:-}"
if [[ -z "$cxx" ]]; then
  for c in clang++-14 clang++; do
    command -v "$c" >/dev/null 2>&1 && { cxx="$c"; break; }
  done
fi
[[ -n "$cxx" ]] || { echo "run-fuzzers: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }

# Line tables are all a sanitizer report needs (file:line per frame) and
# compile ~20% faster than full debug info.
flags=(-std=c++17 -O1 -gline-tables-only -fno-omit-frame-pointer
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root")
# Debian's abseil is split into many small libraries; ask pkg-config for
# the ones the runtime uses (dependencies come along).
absl_libs=$(pkg-config --libs absl_status absl_statusor absl_strings \
  absl_str_format absl_hash absl_raw_hash_set absl_flat_hash_map \
  absl_synchronization absl_time absl_int128 absl_log_severity \
  absl_raw_logging_internal absl_throw_delegate absl_bad_optional_access \
  absl_bad_variant_access)

# Generated protobuf code for the request fuzzer (protoc into BUILD_DIR).
proto_gen="$out/proto_gen"
gen_protos() {
  mkdir -p "$proto_gen"
  local p
  for p in inference models; do
    if [[ ! -f "$proto_gen/inferd/v1/$p.pb.cc" ||
          "$root/protos/inferd/v1/$p.proto" -nt "$proto_gen/inferd/v1/$p.pb.cc" ]]; then
      protoc --proto_path="$root/protos" --cpp_out="$proto_gen" \
        "$root/protos/inferd/v1/$p.proto"
    fi
  done
}

# The loader's sources but the Hub downloader (libcurl; no fuzzer reaches
# the network).
loader_sources() {
  local f
  for f in "$root"/runtime/loader/*.cc; do
    [[ "$f" == */hf_download.cc ]] || echo "$f"
  done
}

# Sources each fuzzer needs besides itself.
sources_for() {
  case "$1" in
    safetensors_fuzz|config_fuzz|gguf_fuzz)
      echo $(loader_sources) "$root/device/tensor.cc" \
           "$root/device/quant.cc" "$root/runtime/common/registry.cc" ;;
    tokenizer_fuzz)
      echo "$root"/runtime/tokenizer/*.cc "$root/device/tensor.cc" ;;
    chat_template_fuzz)
      echo "$root"/runtime/chat/*.cc "$root/runtime/common/registry.cc" ;;
    tool_parser_fuzz)
      echo "$root/runtime/chat/tool_parser.cc" \
           "$root/runtime/chat/pythonic_parser.cc" \
           "$root/runtime/common/registry.cc" ;;
    structured_output_fuzz)
      echo "$root/runtime/gen/structured_output.cc" ;;
    request_fuzz)
      echo "$root/service/grpc/convert.cc" "$root/service/request/validation.cc" \
           "$root/runtime/chat/generic_tools.cc" \
           "$root"/runtime/gen/sampling_params.cc \
           "$root"/runtime/gen/speculative.cc \
           "$proto_gen/inferd/v1/inference.pb.cc" \
           "$proto_gen/inferd/v1/models.pb.cc" ;;
    request_parse_fuzz)
      echo "$root/service/grpc/request_parse.cc" \
           "$proto_gen/inferd/v1/inference.pb.cc" \
           "$proto_gen/inferd/v1/models.pb.cc" ;;
    *)
      echo $(loader_sources) "$root"/runtime/tokenizer/*.cc \
           "$root/device/tensor.cc" "$root/device/quant.cc" \
           "$root/runtime/common/registry.cc" ;;
  esac
}
# Compile flags per fuzzer (its own source and the sources it needs).
cflags_for() {
  case "$1" in
    chat_template_fuzz) echo "-DINFERD_FUZZ_SOURCE_DIR=\"$root\"" ;;
    # (grpc++'s cflags are only -DNOMINMAX: the same flags let the two
    # share the generated protobuf objects.)
    request_fuzz|request_parse_fuzz)
      echo "-I$proto_gen $(pkg-config --cflags protobuf)" ;;
    safetensors_fuzz|config_fuzz|gguf_fuzz|tool_parser_fuzz) ;;
    # llguidance.h from the crate sources the build fetched (runtime/gen).
    structured_output_fuzz)
      local inc
      inc=$(ls -d "$build_dir"/cargo-home/registry/src/*/llguidance-1.9.1 2>/dev/null | head -n 1)
      echo "-I$inc" ;;
    *) pkg-config --cflags oniguruma icu-uc icu-i18n ;;
  esac
}
# Link flags per fuzzer.
libs_for() {
  case "$1" in
    request_fuzz) pkg-config --libs protobuf ;;
    request_parse_fuzz) pkg-config --libs protobuf grpc++ ;;
    safetensors_fuzz|config_fuzz|gguf_fuzz|chat_template_fuzz|tool_parser_fuzz) ;;
    # The llguidance static library the build made (runtime/gen/llg).
    structured_output_fuzz)
      echo "$build_dir/llg/release/libinferd_llg.a -lpthread -ldl -lm -lrt -lutil" ;;
    *) pkg-config --libs oniguruma icu-uc icu-i18n ;;
  esac
}
max_len_for() {
  case "$1" in
    safetensors_fuzz|gguf_fuzz) echo 8192 ;;
    *) echo 16384 ;;
  esac
}

# --- seed corpora ----------------------------------------------------------
# The working corpus of a fuzzer, with the committed seeds copied in.
seed_dir() {
  local d="$out/$1/corpus"
  mkdir -p "$d"
  if [[ -d "$root/tests/fuzz/corpus/$1" ]]; then
    cp -n "$root/tests/fuzz/corpus/$1"/* "$d"/ 2>/dev/null || true
  fi
  echo "$d"
}

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

seed_chat_template() {
  local d; d=$(seed_dir chat_template_fuzz)
  # Mode 0: the real templates as fuzzed sources.
  local f i=0
  for f in "$root"/tests/data/chat_templates/*.jinja; do
    { printf '\0'; cat "$f"; } > "$d/template_$i"; i=$((i + 1))
  done
}

seed_request_parse() {
  local d; d=$(seed_dir request_parse_fuzz)
  # request_fuzz's seeds: the same first byte picks the same message.
  cp -n "$root/tests/fuzz/corpus/request_fuzz"/* "$d"/ 2>/dev/null || true
}

# --- build and run ---------------------------------------------------------
# Every source is compiled once per set of flags into BUILD_DIR/obj (fuzzers
# share the loader's and tokenizer's sources), two at a time per core, and
# recompiled when it or any header of the tree is newer than its object.
obj_dir="$out/obj"
mkdir -p "$obj_dir"
shopt -s nullglob
targets=()
for src in "$root"/tests/fuzz/*_fuzz.cc; do
  name=$(basename "$src" .cc)
  if ((${#only[@]})); then
    keep=0
    for o in "${only[@]}"; do [[ "$o" == "$name" ]] && keep=1; done
    ((keep)) || continue
  fi
  targets+=("$name")
done
for name in "${targets[@]}"; do
  [[ "$name" == request_fuzz || "$name" == request_parse_fuzz ]] && gen_protos
done
# (proto_gen exists only once request_fuzz was built.)
newest_header=$( (find "$root/runtime" "$root/device" "$root/service" \
                   "$root/tests/fuzz" "$proto_gen" -name '*.h' \
                   -printf '%T@\n' 2>/dev/null || true) |
                sort -n | tail -n 1)
newest_header=${newest_header%.*}

# obj_for SRC FLAGS: the object path for SRC compiled with FLAGS.
obj_for() {
  local rel="${1#"$root"/}"
  rel="${rel#"$out"/}"
  echo "$obj_dir/${rel//\//_}.$(printf '%s' "$2" | md5sum | cut -c1-8).o"
}
needs_build() {
  local src="$1" obj="$2"
  [[ -f "$obj" && ! "$src" -nt "$obj" ]] || return 0
  (($(stat -c %Y "$obj") <= ${newest_header:-0}))
}

status=0
jobs_max=$(($(nproc) * 2))
declare -A queued=()
compile_failed="$obj_dir/.failed"
rm -f "$compile_failed"
for name in "${targets[@]}"; do
  read -r -a srcs <<< "$(sources_for "$name")"
  cf="$(cflags_for "$name")"
  for s in "$root/tests/fuzz/$name.cc" "${srcs[@]}"; do
    [[ -f "$s" ]] || continue
    if [[ "$s" == "$root/tests/fuzz/$name.cc" ]]; then
      san="-fsanitize=fuzzer,address,undefined"
    else
      san="-fsanitize=fuzzer-no-link,address,undefined"
    fi
    o=$(obj_for "$s" "$san $cf")
    [[ -n "${queued[$o]:-}" ]] && continue
    queued[$o]=1
    needs_build "$s" "$o" || continue
    while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
    read -r -a cfa <<< "$cf"
    ( "$cxx" "${flags[@]/-fsanitize=fuzzer,address,undefined/$san}" \
        "${cfa[@]+"${cfa[@]}"}" -c "$s" -o "$o.tmp" && mv "$o.tmp" "$o" ) ||
      echo "$s" >> "$compile_failed" &
  done
done
wait
if [[ -f "$compile_failed" ]]; then
  echo "run-fuzzers: failed to compile: $(tr '\n' ' ' < "$compile_failed")" >&2
  status=1
fi

for name in "${targets[@]}"; do
  src="$root/tests/fuzz/$name.cc"
  mkdir -p "$out/$name"
  bin="$out/$name/$name"
  read -r -a srcs <<< "$(sources_for "$name")"
  cf="$(cflags_for "$name")"
  objs=("$(obj_for "$src" "-fsanitize=fuzzer,address,undefined $cf")")
  missing=0
  for s in "${srcs[@]}"; do
    [[ -f "$s" ]] || missing=1
    objs+=("$(obj_for "$s" "-fsanitize=fuzzer-no-link,address,undefined $cf")")
  done
  if ((missing)); then
    echo "run-fuzzers: $name: sources not all present yet, skipping"
    continue
  fi
  relink=0
  [[ -x "$bin" ]] || relink=1
  for o in "${objs[@]}"; do
    [[ -f "$o" ]] || { relink=2; break; }
    [[ "$o" -nt "$bin" ]] && relink=1
  done
  if ((relink == 2)); then
    echo "run-fuzzers: $name failed to build" >&2
    status=1
    continue
  fi
  if ((relink)); then
    echo "run-fuzzers: linking $name"
    read -r -a libs <<< "$(libs_for "$name")"
    if ! "$cxx" -fsanitize=fuzzer,address,undefined "${objs[@]}" \
        "${libs[@]+"${libs[@]}"}" $absl_libs -lpthread -o "$bin.tmp"; then
      echo "run-fuzzers: $name failed to link" >&2
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
    chat_template_fuzz) seed_chat_template ;;
    request_parse_fuzz) seed_request_parse ;;
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
exit $status
