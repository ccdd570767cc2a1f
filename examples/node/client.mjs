#!/usr/bin/env node
// inferd example client (Node.js, @grpc/grpc-js + @grpc/proto-loader).
//
// Calls a running inferd server three ways:
//   Generate    streams a completion, printing each text delta as it arrives;
//   Embed       the bidirectional stream (several requests in flight, answers
//               matched by `id`) and the unary EmbedBatch;
//   Rerank      scores documents against a query, best first.
// The .proto files are loaded at run time from protos/ (--protos DIR).
//
// Setup: `npm install` in this folder, or use the copies in
// tools/npm/node_modules of an inferd checkout (found automatically).
//   node examples/node/client.mjs --address 127.0.0.1:50051 \
//       --generate-model stories --embed-model minilm \
//       --rerank-model reranker-random
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '..', '..');

// Resolves a package from this folder first, then from the checkout's tools.
function load(name) {
  try {
    return createRequire(import.meta.url)(name);
  } catch (e) {
    const fallback = path.join(repoRoot, 'tools', 'npm', 'package.json');
    return createRequire(fallback)(name);
  }
}
const grpc = load('@grpc/grpc-js');
const protoLoader = load('@grpc/proto-loader');

const EMBED_TEXTS = [
  'inferd serves language models over gRPC.',
  'The quick brown fox jumps over the lazy dog.',
  'Embeddings map text to vectors.',
  'A cat sat on the mat.',
  'Rerankers score a query against documents.',
];

function parseArgs(argv) {
  const opts = {
    address: '127.0.0.1:50051',
    generateModel: 'stories',
    embedModel: 'minilm',
    rerankModel: 'reranker-random',
    prompt: 'Once upon a time',
    maxTokens: 40,
    temperature: 0,
    query: 'What does inferd do?',
    documents: [
      'inferd is a gRPC inference server for LLMs and embedders.',
      'Bananas are rich in potassium.',
      'The server streams generated tokens to the client.',
      'Paris is the capital of France.',
    ],
    protos: path.join(repoRoot, 'protos'),
    timeout: 120,
    json: '',
  };
  const names = {
    '--address': 'address', '--generate-model': 'generateModel',
    '--embed-model': 'embedModel', '--rerank-model': 'rerankModel',
    '--prompt': 'prompt', '--max-tokens': 'maxTokens',
    '--temperature': 'temperature', '--query': 'query',
    '--protos': 'protos', '--timeout': 'timeout', '--json': 'json',
  };
  for (let i = 0; i < argv.length; i++) {
    let [flag, value] = argv[i].split(/=(.*)/s, 2);
    if (flag === '--help' || flag === '-h') {
      console.log('usage: client.mjs [--address H:P] [--generate-model M] ' +
                  '[--embed-model M] [--rerank-model M] [--prompt TEXT] ' +
                  '[--max-tokens N] [--temperature T] [--query TEXT] ' +
                  '[--document TEXT]... [--protos DIR] [--timeout S] ' +
                  '[--json FILE]\n(an empty model name skips that call)');
      process.exit(0);
    }
    if (value === undefined) {
      if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
      value = argv[++i];
    }
    if (flag === '--document') {
      if (!opts.customDocs) { opts.documents = []; opts.customDocs = true; }
      opts.documents.push(value);
    } else if (names[flag]) {
      const key = names[flag];
      opts[key] = typeof opts[key] === 'number' ? Number(value) : value;
    } else {
      throw new Error(`unknown flag ${flag}`);
    }
  }
  return opts;
}

function deadline(opts) {
  return new Date(Date.now() + opts.timeout * 1000);
}

function norm(values) {
  return Math.sqrt(values.reduce((s, v) => s + v * v, 0));
}

function unary(client, method, request, opts) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: deadline(opts) },
                   (err, resp) => (err ? reject(err) : resolve(resp)));
  });
}

function generate(client, opts, report) {
  return new Promise((resolve, reject) => {
    console.log(`== Generate (${opts.generateModel}) ==`);
    process.stdout.write(opts.prompt);
    const call = client.Generate({
      model: opts.generateModel,
      prompt: opts.prompt,
      sampling: { max_tokens: opts.maxTokens, temperature: opts.temperature },
    }, { deadline: deadline(opts) });
    const text = [];
    const tokenIds = [];
    let messages = 0;
    let last = null;
    call.on('data', (resp) => {
      messages++;
      text.push(resp.text);
      tokenIds.push(...resp.token_ids);
      process.stdout.write(resp.text);  // each delta as it arrives
      last = resp;
    });
    call.on('error', reject);
    call.on('end', () => {
      process.stdout.write('\n');
      if (!last) return reject(new Error('Generate returned no message'));
      console.log(`[finish=${last.finish_reason} ` +
                  `prompt_tokens=${last.usage.prompt_tokens} ` +
                  `completion_tokens=${last.usage.completion_tokens} ` +
                  `messages=${messages}]`);
      report.generate = {
        model: opts.generateModel, text: text.join(''), token_ids: tokenIds,
        messages, finish_reason: last.finish_reason,
        prompt_tokens: last.usage.prompt_tokens,
        completion_tokens: last.usage.completion_tokens,
      };
      resolve();
    });
  });
}

function embedStream(client, opts) {
  return new Promise((resolve, reject) => {
    console.log(`== Embed, bidirectional stream (${opts.embedModel}) ==`);
    const requests = EMBED_TEXTS.map((t, i) => ({
      model: opts.embedModel, id: `text-${i}`, texts: [t] }));
    requests.push({ model: opts.embedModel, id: 'all', texts: EMBED_TEXTS });
    const sent = new Map(requests.map((r) => [r.id, r]));
    const answers = new Map();
    const call = client.Embed({ deadline: deadline(opts) });
    call.on('data', (resp) => {
      // Answers may come back in any order: match them by id.
      const req = sent.get(resp.id);
      if (!req) return reject(new Error(`answer with unknown id ${resp.id}`));
      if (answers.has(resp.id)) {
        return reject(new Error(`two answers for id ${resp.id}`));
      }
      if (resp.embeddings.length !== req.texts.length) {
        return reject(new Error(`id ${resp.id}: ${resp.embeddings.length} ` +
                                `embeddings for ${req.texts.length} texts`));
      }
      answers.set(resp.id, resp);
      const e = resp.embeddings[0];
      console.log(`  id=${resp.id.padEnd(7)} inputs=${resp.embeddings.length} ` +
                  `dims=${e.dims} norm=${norm(e.values).toFixed(4)} ` +
                  `first=[${e.values.slice(0, 4).map((v) => v.toFixed(4))}]`);
    });
    call.on('error', reject);
    call.on('end', () => {
      const missing = [...sent.keys()].filter((id) => !answers.has(id));
      if (missing.length) {
        return reject(new Error(`no answer for ids ${missing}`));
      }
      const out = {};
      for (const [id, resp] of answers) {
        out[id] = resp.embeddings.map((e) => e.values);
      }
      resolve(out);
    });
    for (const r of requests) call.write(r);
    call.end();
  });
}

async function embed(client, opts, report) {
  const stream = await embedStream(client, opts);
  console.log(`== EmbedBatch (${opts.embedModel}) ==`);
  const resp = await unary(client, 'EmbedBatch',
                           { model: opts.embedModel, texts: EMBED_TEXTS }, opts);
  resp.embeddings.forEach((e, i) => {
    console.log(`  dims=${e.dims} tokens=${e.tokens} ` +
                `norm=${norm(e.values).toFixed(4)} ${JSON.stringify(EMBED_TEXTS[i])}`);
  });
  console.log(`[total_tokens=${resp.usage.total_tokens}]`);
  report.embed = {
    model: opts.embedModel, texts: EMBED_TEXTS, stream,
    batch: resp.embeddings.map((e) => e.values),
    batch_dims: resp.embeddings.map((e) => e.dims),
  };
}

async function rerank(client, opts, report) {
  console.log(`== Rerank (${opts.rerankModel}) ==`);
  console.log(`  query: ${JSON.stringify(opts.query)}`);
  const resp = await unary(client, 'Rerank', {
    model: opts.rerankModel, query: opts.query, documents: opts.documents,
  }, opts);
  for (const r of resp.results) {
    console.log(`  ${r.score.toFixed(4)}  [${r.index}] ` +
                JSON.stringify(opts.documents[r.index]));
  }
  report.rerank = {
    model: opts.rerankModel, documents: opts.documents.length,
    results: resp.results.map((r) => ({ index: r.index, score: r.score })),
  };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const def = protoLoader.loadSync(
    ['inferd/v1/inference.proto', 'inferd/v1/models.proto'], {
      includeDirs: [opts.protos], keepCase: true, longs: Number,
      enums: String, defaults: true, oneofs: true,
    });
  const pkg = grpc.loadPackageDefinition(def).inferd.v1;
  const client = new pkg.Inference(opts.address,
                                   grpc.credentials.createInsecure());
  const report = { address: opts.address };
  try {
    if (opts.generateModel) await generate(client, opts, report);
    if (opts.embedModel) await embed(client, opts, report);
    if (opts.rerankModel) await rerank(client, opts, report);
  } catch (err) {
    const code = err.code !== undefined ? grpc.status[err.code] : 'ERROR';
    console.error(`error: ${code}: ${err.details || err.message}`);
    client.close();
    process.exit(1);
  }
  client.close();
  if (opts.json) writeFileSync(opts.json, JSON.stringify(report));
}

main();
