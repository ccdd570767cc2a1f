#!/usr/bin/env bash
# Quantizes a GGUF file the way GGUF users get theirs: llama.cpp's own
# llama-quantize (built by llamaserver_setup.sh from the pinned
# llama-cpp-python sdist), one output per type, written beside the input as
# <input stem>-<type>.gguf (lower case). For benchmarks only: never used by
# inferd, its tests or CI.
#
#   bench/compare/make_quantized.sh build/bench-compare/tinyllama-shape-f16.gguf Q4_K_M Q6_K
#
# Types are llama-quantize's names (Q4_K_M, Q5_K_M, Q6_K, Q8_0, ...). An
# output that already exists is kept. Prints each output's path.
# ALLOW_REQUANTIZE=1 passes --allow-requantize (an input that is itself
# quantized, e.g. a Q8_0 file, when no F16 one is at hand).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ $# -ge 2 ]] || { echo "usage: $0 INPUT.gguf TYPE..." >&2; exit 2; }
input="$1"; shift
[[ -f "$input" ]] || { echo "make_quantized: no file $input" >&2; exit 1; }
server="$("$root/bench/compare/llamaserver_setup.sh" | tail -n 1)"
quantize="$(dirname "$server")/llama-quantize"
stem="${input%.gguf}"
stem="${stem%-f16}"
stem="${stem%-f32}"
for type in "$@"; do
  out="$stem-$(echo "$type" | tr '[:upper:]' '[:lower:]').gguf"
  if [[ ! -s "$out" ]]; then
    extra=()
    [[ "${ALLOW_REQUANTIZE:-0}" == 1 ]] && extra=(--allow-requantize)
    "$quantize" "${extra[@]}" "$input" "$out.tmp" "$type" "${THREADS:-2}" >&2
    mv "$out.tmp" "$out"
  fi
  echo "$out"
done
