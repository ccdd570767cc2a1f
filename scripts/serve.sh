#!/usr/bin/env bash
# Command 1: install deps, build Release, prepare the default models, and run
# inferd on 127.0.0.1:50051 in the foreground (Ctrl-C drains and stops it).
#
# Default models: ../shared/models/stories260K when present (a real tiny
# Llama), plus generated demo models (random weights, real tokenizers when
# ../shared has them) for embedding, reranking and classification, so every
# RPC can be tried on a fresh machine. Extra flags are passed to inferd,
# e.g. scripts/serve.sh --model mine=/path/to/hf-model-dir
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
listen="${INFERD_LISTEN:-127.0.0.1:50051}"

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" >/dev/null

models_dir="$build/demo_models"
/usr/bin/python3 "$root/tools/make_test_models.py" --out "$models_dir" \
  --only bert-embed,xlmr-reranker,bert-classifier,qwen2-tiny >/dev/null

args=(--listen "$listen")
stories="$root/../shared/models/stories260K"
if [[ -f "$stories/config.json" ]]; then
  args+=(--model "stories=$stories")
  gen_model=stories
else
  gen_model=qwen2-tiny
fi
args+=(--model "qwen2-tiny=$models_dir/qwen2-tiny"
       --model "bert-embed=$models_dir/bert-embed"
       --model "xlmr-reranker=$models_dir/xlmr-reranker"
       --model "bert-classifier=$models_dir/bert-classifier")

buf="$root/tools/npm/node_modules/.bin/buf"
stubs="$build/python"
cat <<MSG
inferd starting on $listen. Try, from another terminal (docs/curl.md has
a line for every RPC):

  $buf curl --protocol grpc --http2-prior-knowledge --list-services http://$listen
  $buf curl --protocol grpc --http2-prior-knowledge --data '{}' http://$listen/inferd.v1.Models/ListModels
  $buf curl --protocol grpc --http2-prior-knowledge --data '{"model":"$gen_model","prompt":"Once upon a time","sampling":{"maxTokens":40,"temperature":0}}' http://$listen/inferd.v1.Inference/Generate
  $buf curl --protocol grpc --http2-prior-knowledge --data '{"model":"bert-embed","texts":["hello world"]}' http://$listen/inferd.v1.Inference/EmbedBatch
  $buf curl --protocol grpc --http2-prior-knowledge --data '{"model":"xlmr-reranker","query":"what is inferd?","documents":["a gRPC server","a fish"]}' http://$listen/inferd.v1.Inference/Rerank

  PYTHONPATH=$stubs /usr/bin/python3 -c 'import grpc; from inferd.v1 import inference_pb2 as pb, inference_pb2_grpc as rpc; s = rpc.InferenceStub(grpc.insecure_channel("$listen")); print("".join(r.text for r in s.Generate(pb.GenerateRequest(model="$gen_model", prompt="Once upon a time", sampling=pb.SamplingParams(max_tokens=40, temperature=0)))))'

MSG
exec "$build/service/inferd" "${args[@]}" "$@"
