// Renders helm/inferd with `helm template` and checks the result offline:
// every manifest against the Kubernetes OpenAPI schemas (npm kubernetes-models,
// ServiceMonitor via @kubernetes-models/prometheus-operator), the chart's own
// invariants (security context, probes, grace period, wiring of ports,
// selectors, secrets, the config.yaml ConfigMap behind `--config`), and,
// given an inferd binary, that every `--flag` in the server's args is one
// `inferd --help` lists and that the server's own parser accepts the
// rendered config.yaml (`inferd --config FILE --print-config`).
//
// node validate.mjs --npm-dir DIR --helm BIN --chart DIR [--values FILE]...
//   [--expect-kinds Kind,Kind,...]  exact multiset of rendered kinds
//   [--expect-probe grpc|tcp]       probe action of all three probes
//   [--expect-absent-keys a,b]      top-level keys config.yaml must not set
//   [--inferd BIN]                  check args against `BIN --help` and
//                                   config.yaml against `BIN --print-config`
//   [--expect-unknown-flags a,b]    the flag check must report exactly these
//   [--expect-config-error REGEX]   --print-config must fail with this message
//   [--expect-error]                rendering must fail with the message in
//                                   the values file's `# expect: REGEX` line
//   [--expect-config KEY=VALUE]     config.yaml has KEY with VALUE (YAML);
//   [--expect-config !KEY]          or has no KEY; KEY is a top-level key or
//                                   models[NAME].key (repeatable)
//   [--expect-hf-cache KIND]        the Hugging Face cache volume (HF_HUB_CACHE)
//                                   is an emptyDir|persistentVolumeClaim|
//                                   hostPath, or `none`: no HF_* at all
//   [--expect-env NAME=VALUE]       the inferd container's env has NAME with
//                                   this literal value (repeatable)
//   [--expect-secret-env NAME=SECRET/KEY]  ... NAME from that secretKeyRef
//   [--expect-absent-env A,B]       ... has none of these names
//   [--expect-startup-seconds N]    startupProbe periodSeconds*failureThreshold
//   [--expect-strategy TYPE]        the Deployment's strategy type
// Exits 0 when every check passes, 1 otherwise (each failure is printed).

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";

function parseArgs(argv) {
  const opts = { values: [], expectConfig: [], expectEnv: [], expectSecretEnv: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case "--npm-dir": opts.npmDir = next(); break;
      case "--helm": opts.helm = next(); break;
      case "--chart": opts.chart = next(); break;
      case "--values": opts.values.push(next()); break;
      case "--expect-kinds": opts.expectKinds = next().split(",").filter(Boolean); break;
      case "--expect-probe": opts.expectProbe = next(); break;
      case "--inferd": opts.inferd = next(); break;
      case "--expect-unknown-flags": opts.expectUnknown = next().split(",").filter(Boolean); break;
      case "--expect-config-error": opts.expectConfigError = next(); break;
      case "--expect-absent-keys": opts.expectAbsent = next().split(",").filter(Boolean); break;
      case "--expect-error": opts.expectError = true; break;
      case "--expect-config": opts.expectConfig.push(next()); break;
      case "--expect-hf-cache": opts.expectHfCache = next(); break;
      case "--expect-env": opts.expectEnv.push(next()); break;
      case "--expect-secret-env": opts.expectSecretEnv.push(next()); break;
      case "--expect-absent-env": opts.expectAbsentEnv = next().split(",").filter(Boolean); break;
      case "--expect-startup-seconds": opts.expectStartupSeconds = Number(next()); break;
      case "--expect-strategy": opts.expectStrategy = next(); break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  for (const k of ["npmDir", "helm", "chart"]) {
    if (!opts[k]) throw new Error(`--${k.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())} is required`);
  }
  if ((opts.expectUnknown || opts.expectConfigError) && !opts.inferd) {
    throw new Error("--expect-unknown-flags and --expect-config-error need --inferd");
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const require = createRequire(path.join(path.resolve(opts.npmDir), "package.json"));
const YAML = require("yaml");

const failures = [];
let checks = 0;
function check(cond, msg) {
  checks++;
  if (!cond) failures.push(msg);
  return cond;
}
function finish() {
  for (const f of failures) console.error(`FAIL: ${f}`);
  console.log(`${checks - failures.length} passed, ${failures.length} failed`);
  process.exit(failures.length ? 1 : 0);
}

const helmArgs = ["template", "inferd-test", opts.chart, "--namespace", "inference"];
for (const v of opts.values) helmArgs.push("--values", v);
const render = spawnSync(opts.helm, helmArgs, { encoding: "utf8" });
if (render.error) {
  console.error(`cannot run ${opts.helm}: ${render.error.message}`);
  process.exit(1);
}

if (opts.expectError) {
  // The bad values file names the error it must cause.
  const file = opts.values[opts.values.length - 1];
  const m = /^#\s*expect:\s*(.+)$/m.exec(readFileSync(file, "utf8"));
  if (!m) {
    console.error(`${file} has no '# expect: REGEX' line`);
    process.exit(1);
  }
  check(render.status !== 0, `helm template accepted ${file}; it must fail`);
  check(new RegExp(m[1]).test(render.stderr),
    `helm template error does not match /${m[1]}/:\n${render.stderr}`);
  finish();
}

if (!check(render.status === 0, `helm template failed:\n${render.stderr}`)) finish();

const docs = YAML.parseAllDocuments(render.stdout)
  .map((d) => {
    if (d.errors.length) failures.push(`YAML error: ${d.errors[0].message}`);
    return d.toJS();
  })
  .filter((o) => o && typeof o === "object");
check(docs.length > 0, "helm template rendered nothing");

// ---- Kubernetes schemas -------------------------------------------------

// Custom resources whose CRD the chart tests carry (tests/helm/crds): the
// version's openAPIV3Schema, checked with Ajv (the x-kubernetes-*
// extensions and formats are not JSON Schema; CEL rules are checked by
// `celRules` below).
const crdDir = path.join(path.dirname(new URL(import.meta.url).pathname), "crds");
const crdFiles = {
  "inference.networking.k8s.io/v1/InferencePool":
    "inference.networking.k8s.io_inferencepools.yaml",
};
const celRules = {
  // The CRD's x-kubernetes-validations, written out.
  "inference.networking.k8s.io/v1/InferencePool": (obj) => {
    const errs = [];
    const ref = obj.spec?.endpointPickerRef ?? {};
    if ((ref.kind ?? "Service") === "Service" && !ref.port) {
      errs.push("endpointPickerRef: port is required when kind is 'Service'");
    }
    const ports = (obj.spec?.targetPorts ?? []).map((p) => p.number);
    if (new Set(ports).size !== ports.length) {
      errs.push("targetPorts: port number must be unique");
    }
    return errs;
  },
};
function crdValidator(apiVersion, kind) {
  const file = crdFiles[`${apiVersion}/${kind}`];
  if (!file) return null;
  const crd = YAML.parse(readFileSync(path.join(crdDir, file), "utf8"));
  const version = apiVersion.split("/")[1];
  const v = crd.spec.versions.find((x) => x.name === version);
  if (!v) throw new Error(`${file} has no version ${version}`);
  const Ajv = require("ajv");
  const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
  const validate = ajv.compile(v.schema.openAPIV3Schema);
  const cel = celRules[`${apiVersion}/${kind}`] ?? (() => []);
  return {
    validate() {
      const errs = [];
      if (!validate(this.obj)) {
        errs.push(...validate.errors.map((e) => `${e.instancePath} ${e.message}`));
      }
      errs.push(...cel(this.obj));
      if (errs.length) throw new Error(errs.join("; "));
    },
  };
}

function modelClass(apiVersion, kind) {
  const crd = crdValidator(apiVersion, kind);
  if (crd) {
    return function CrdObject(obj) {
      return Object.assign(Object.create(crd), { obj });
    };
  }
  if (apiVersion === "monitoring.coreos.com/v1") {
    return require(`@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}`)[kind];
  }
  // "v1" is the core group; "apps/v1" -> kubernetes-models/apps/v1/<Kind>.
  const dir = apiVersion.includes("/") ? apiVersion : `v1`;
  return require(`kubernetes-models/${dir}/${kind}`)[kind];
}

for (const obj of docs) {
  const id = `${obj.kind}/${obj.metadata?.name}`;
  let Cls;
  try {
    Cls = modelClass(obj.apiVersion, obj.kind);
  } catch (e) {
    check(false, `${id}: no schema for ${obj.apiVersion} ${obj.kind}`);
    continue;
  }
  try {
    new Cls(obj).validate();
    check(true, "");
  } catch (e) {
    check(false, `${id} (${obj.apiVersion}) is invalid: ${e.message}`);
  }
  // Kubernetes recommended labels on everything the chart creates.
  const labels = obj.metadata?.labels ?? {};
  for (const l of ["app.kubernetes.io/name", "app.kubernetes.io/instance",
    "app.kubernetes.io/version", "app.kubernetes.io/managed-by"]) {
    check(typeof labels[l] === "string" && labels[l] !== "", `${id}: label ${l} missing`);
  }
}

const byKind = (k) => docs.filter((d) => d.kind === k);
if (opts.expectKinds) {
  const got = docs.map((d) => d.kind).sort().join(",");
  const want = [...opts.expectKinds].sort().join(",");
  check(got === want, `rendered kinds ${got}, expected ${want}`);
}

// ---- Deployment invariants ----------------------------------------------

const deployments = byKind("Deployment");
check(deployments.length === 1, `expected one Deployment, got ${deployments.length}`);
const dep = deployments[0];
const pod = dep?.spec?.template?.spec ?? {};
const podLabels = dep?.spec?.template?.metadata?.labels ?? {};
const server = (pod.containers ?? []).find((c) => c.name === "inferd");
check(server, "Deployment has no container named inferd");

const selects = (selector) =>
  selector && Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([k, v]) => podLabels[k] === v);
check(selects(dep?.spec?.selector?.matchLabels), "Deployment selector does not match its pod labels");

function argValue(args, flag) {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

// ---- config.yaml (`inferd --config`) -------------------------------------

// The keys inferd's config file accepts, with the kind of value each takes:
// the server flags without their dashes, and per model name, path and the
// model options.
const isInt = (v) => Number.isInteger(v);
const isNum = (v) => typeof v === "number" && Number.isFinite(v);
const isBool = (v) => typeof v === "boolean";
const isStr = (v) => typeof v === "string" && v !== "";
const oneOf = (...xs) => (v) => xs.includes(v);
const isMemory = (v) => (isNum(v) && v > 0 && v <= 1) ||
  (typeof v === "string" && /^(0?\.[0-9]+|1(\.0+)?|[0-9]+(\.[0-9]+)?(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB))$/.test(v));
const isDtype = oneOf("auto", "float32", "bfloat16", "q8_0", "q4_0", "q4_1", "int8");
// A Hugging Face Hub name as inferd parses one (runtime/loader/hf_cache.cc):
// org/repo, org/repo:QUANT or org/repo/path/file, then @REVISION.
const hubSeg = "[A-Za-z0-9_][A-Za-z0-9._-]{0,95}";
const hubName = new RegExp(`^${hubSeg}/${hubSeg}` +
  "(:[A-Za-z0-9_][A-Za-z0-9._-]*|(/[A-Za-z0-9_][A-Za-z0-9._-]*)+)?(@[A-Za-z0-9._/-]+)?$");
const isHubName = (v) => typeof v === "string" && hubName.test(v);
// A duration as inferd reads one: seconds, or a number with a unit (90s,
// 5m, 1h, 1d); 0 for "forever".
const isDuration = (v) => (isInt(v) && v >= 0) ||
  (typeof v === "string" && /^[0-9]+(\.[0-9]+)?(ms|s|m|h|d)?$/.test(v));
const engineKeys = {
  "threads": isInt,
  "tokenization-workers": (v) => isInt(v) || v === "auto",
  "max-batched-tokens": isInt,
  "max-prefill-tokens-while-decoding": isInt,
  "overlap-output": isBool,
  "max-seqs": isInt,
  "max-queue-requests": isInt,
  "max-queue-tokens": isInt,
  "max-input-tokens": isInt,
  "kv-cache-memory": isMemory,
  "block-size": isInt,
  "dtype": isDtype,
  "enable-prefix-caching": isBool,
  "speculative-draft-tokens": isInt,
};
const serverKeys = {
  ...engineKeys,
  "listen": isStr, "metrics-listen": isStr, "health-listen": isStr,
  "http-listen": isStr,
  "replicas-per-model": isInt,
  "max-inputs-per-request": isInt,
  "max-concurrent-streams": isInt,
  "max-receive-message-bytes": isInt,
  "log-format": oneOf("text", "json"),
  "log-level": oneOf("trace", "debug", "info", "warn", "error"),
  "drain-timeout": isNum,
  "tls-cert": isStr, "tls-key": isStr, "tls-client-ca": isStr,
  "api-key": isStr, "api-key-file": isStr,
  "reuse-port": isBool, "mmap-weights": isBool, "allow-partial-start": isBool,
  "max-connection-age": isNum, "max-connection-age-grace": isNum,
  "max_loaded_models": (v) => isInt(v) && v >= 0,
  "plugins": (v) => Array.isArray(v) && v.every((p) => isStr(p) && p.startsWith("/")),
  "models": Array.isArray,
};
const modelKeys = {
  ...engineKeys,
  "name": (v) => typeof v === "string" && /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(v),
  "path": (v) => isStr(v) && (v.startsWith("/") || isHubName(v)),
  "load": oneOf("startup", "on_demand"),
  "keep_alive": isDuration,
  "task": oneOf("generate", "embed", "rerank", "classify"),
  "pooling": (v) => typeof v === "string" && /^[a-z0-9_]+$/.test(v),
  "bidirectional": isBool,
  "replicas": isInt,
};

// Checks one config mapping against a key table; returns nothing.
function checkKeys(where, obj, table) {
  for (const [k, v] of Object.entries(obj)) {
    if (!check(k in table, `${where}: unknown key '${k}'`)) continue;
    check(table[k](v), `${where}: ${k}: ${JSON.stringify(v)} is not a valid value`);
  }
}

// Finds the file `--config` names in the Deployment's mounts, the ConfigMap
// key behind it, and parses it. Returns { text, config } or undefined.
function loadConfig(args, mounts, volumes) {
  const file = argValue(args, "--config");
  if (!check(file !== undefined, "args do not pass --config")) return undefined;
  check(args.filter((a) => a === "--config").length === 1, "--config is passed more than once");
  const mount = mounts.find((m) => file.startsWith(m.mountPath.replace(/\/?$/, "/")));
  const cmName = mount && volumes[mount.name]?.configMap?.name;
  if (!check(cmName, `--config ${file} is not in a mounted ConfigMap`)) return undefined;
  check(mount.readOnly === true, "the config volume is not mounted read-only");
  check(!mount.subPath, "the config volume is mounted with subPath");
  const rel = file.slice(mount.mountPath.replace(/\/?$/, "/").length);
  const items = volumes[mount.name].configMap.items;
  const key = items ? items.find((it) => it.path === rel)?.key : rel;
  const cm = byKind("ConfigMap").find((c) => c.metadata?.name === cmName);
  if (!check(cm, `the Deployment mounts ConfigMap ${cmName}, which the chart does not render`)) return undefined;
  const text = cm.data?.[key];
  if (!check(typeof text === "string", `ConfigMap ${cmName} has no key ${key} (--config ${file})`)) return undefined;
  const doc = YAML.parseDocument(text);
  if (!check(doc.errors.length === 0, `config.yaml is not valid YAML: ${doc.errors[0]?.message}`)) return undefined;
  const config = doc.toJS();
  if (!check(config && typeof config === "object" && !Array.isArray(config),
    "config.yaml is not a mapping")) return undefined;
  return { text, config };
}

function checkConfig(config) {
  checkKeys("config.yaml", config, serverKeys);
  check(!("api-key" in config), "config.yaml holds api-key, a secret in a ConfigMap; use --api-key-file");
  for (const k of opts.expectAbsent ?? []) {
    check(!(k in config), `config.yaml sets ${k}: ${JSON.stringify(config[k])}; it must be left to the server`);
  }
  const models = config.models ?? [];
  check(Array.isArray(models) && models.length > 0, "config.yaml has no models");
  const names = new Set();
  models.forEach((m, i) => {
    const where = `config.yaml models[${i}]`;
    if (!check(m && typeof m === "object" && !Array.isArray(m), `${where} is not a mapping`)) return;
    check("name" in m && "path" in m, `${where} lacks name or path`);
    checkKeys(where, m, modelKeys);
    check(!names.has(m.name), `${where}: the name ${m.name} is given twice`);
    names.add(m.name);
  });
}

// Values compared the way the server reads them: "0.5" and 0.5 agree,
// "4GiB" agrees with 4294967296, and durations in seconds ("90m", "5400s").
const kUnits = { B: 1, KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12,
  KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, TiB: 2 ** 40 };
function normalize(v) {
  if (typeof v === "string") {
    if (v === "true" || v === "false") return v === "true";
    if (/^-?[0-9]*\.?[0-9]+$/.test(v)) return Number(v);
    const m = /^([0-9]+(?:\.[0-9]+)?)(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)$/.exec(v);
    if (m) return Number(m[1]) * kUnits[m[2]];
    const d = /^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)$/.exec(v);
    if (d) return Number(d[1]) * { ms: 1e-3, s: 1, m: 60, h: 3600, d: 86400 }[d[2]];
    return v;
  }
  if (Array.isArray(v)) return JSON.stringify(v.map(normalize));
  return typeof v === "object" && v !== null ? JSON.stringify(v) : v;
}

// Runs the real server's parser on config.yaml: `BIN --config FILE
// --print-config` must exit 0 and print every setting back with the value
// the chart wrote (the effective configuration, in the same YAML shape; a
// model's option is printed only where it differs from the server-wide one).
function checkPrintConfig(text, config) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "inferd-chart-"));
  const file = path.join(dir, "config.yaml");
  writeFileSync(file, text);
  // INFERD_* variables would override the file.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("INFERD_")));
  const run = spawnSync(opts.inferd, ["--config", file, "--print-config"],
    { encoding: "utf8", timeout: 60000, env });
  rmSync(dir, { recursive: true, force: true });
  const cmd = `${opts.inferd} --config config.yaml --print-config`;
  if (run.error) {
    check(false, `cannot run ${cmd}: ${run.error.message}`);
    return;
  }
  const out = `${run.stdout}\n${run.stderr}`;
  if (opts.expectConfigError) {
    check(run.status !== 0, `${cmd} exited 0; it must fail`);
    check(new RegExp(opts.expectConfigError).test(out),
      `${cmd} output does not match /${opts.expectConfigError}/:\n${out.slice(0, 500)}`);
    return;
  }
  if (!check(run.status === 0, `${cmd} exited ${run.status}:\n${out.slice(0, 1000)}`)) return;
  let printed;
  try {
    printed = YAML.parse(run.stdout);
  } catch (e) {
    check(false, `${cmd} printed no YAML: ${e.message}`);
    return;
  }
  if (!check(printed && typeof printed === "object", `${cmd} printed no mapping`)) return;
  // `inherit` maps a key missing from a printed model to the server-wide key
  // it takes its value from, or to the default the server leaves unprinted.
  // inferd reads a top-level key's '_' as '-' (max_loaded_models is
  // max-loaded-models) and prints the flag's spelling.
  const modelDefaults = { load: "startup", keep_alive: 0 };
  const same = (where, want, got, inherit) => {
    for (const [k, v] of Object.entries(want)) {
      if (k === "models") continue;
      const dashed = k.replace(/_/g, "-");
      const pk = !(k in got) && got === printed && dashed in got ? dashed : k;
      const from = pk in got ? got : inherit?.(k);
      const g = from?.[k === "replicas" && from === printed ? "replicas-per-model" : pk];
      check(g !== undefined && normalize(g) === normalize(v),
        `${cmd}: ${where}${k} is ${JSON.stringify(g)}, config.yaml says ${JSON.stringify(v)}`);
    }
  };
  same("", config, printed);
  const got = Array.isArray(printed.models) ? printed.models : [];
  check(JSON.stringify(got.map((m) => m?.name)) === JSON.stringify(config.models.map((m) => m.name)),
    `${cmd}: models ${got.map((m) => m?.name).join(",")}, config.yaml has ${config.models.map((m) => m.name).join(",")}`);
  config.models.forEach((m) => {
    const pm = got.find((g) => g?.name === m.name);
    if (pm) {
      same(`model ${m.name} `, m, pm,
        (k) => (k in engineKeys || k === "replicas" ? printed
          : k in modelDefaults ? modelDefaults : undefined));
    }
  });
}

// A top-level key of config.yaml, or models[NAME].key.
function configEntry(config, key) {
  const m = /^models\[([^\]]+)\]\.(.+)$/.exec(key);
  if (!m) return { found: key in config, value: config[key] };
  const model = (config.models ?? []).find((x) => x?.name === m[1]);
  if (!model) return { noModel: m[1] };
  return { found: m[2] in model, value: model[m[2]] };
}

// --expect-config KEY=VALUE and !KEY.
function checkExpectedConfig(config) {
  for (const e of opts.expectConfig) {
    const absent = e.startsWith("!");
    const eq = e.indexOf("=");
    const key = absent ? e.slice(1) : e.slice(0, eq);
    if (!absent && eq < 0) throw new Error(`--expect-config ${e}: KEY=VALUE or !KEY`);
    const got = configEntry(config, key);
    if (!check(!got.noModel, `config.yaml has no model ${got.noModel} (--expect-config ${e})`)) continue;
    if (absent) {
      check(!got.found, `config.yaml sets ${key}: ${JSON.stringify(got.value)}; it must not`);
      continue;
    }
    const raw = e.slice(eq + 1);
    const want = YAML.parse(raw);
    check(got.found && (normalize(got.value) === normalize(want) || String(got.value) === raw),
      `config.yaml ${key} is ${got.found ? JSON.stringify(got.value) : "absent"}, expected ${raw}`);
  }
}

// Hub-named models need a writable Hugging Face cache (HF_HUB_CACHE) on a
// volume, the root filesystem being read-only; the token comes from a
// Secret, never a literal; a chart-created cache claim that one node at a
// time can attach means one pod and the Recreate strategy.
function checkHub(config, mounts, volumes) {
  const env = server.env ?? [];
  const envs = new Map();
  for (const e of env) {
    check(!envs.has(e.name), `the inferd container sets ${e.name} twice`);
    envs.set(e.name, e);
  }
  const under = (p, dir) => p === dir.replace(/\/$/, "") || p.startsWith(dir.replace(/\/?$/, "/"));
  const hub = [];
  for (const m of config.models ?? []) {
    if (typeof m?.path !== "string") continue;
    if (!m.path.startsWith("/")) {
      hub.push(m.name);
      continue;
    }
    // A file path must lie in a volume mounted for models, not /tmp nor the
    // config or a Secret.
    const mt = mounts.find((mm) => under(m.path, mm.mountPath));
    const v = mt && volumes[mt.name];
    check(mt && mt.mountPath !== "/tmp" && v && !v.configMap && !v.secret,
      `model ${m.name}: ${m.path} is in no mounted model volume`);
  }

  const cacheEnv = envs.get("HF_HUB_CACHE");
  let cacheVolume;
  if (hub.length) {
    check(cacheEnv, `models ${hub.join(",")} are Hugging Face Hub names, but HF_HUB_CACHE is not set`);
  }
  if (cacheEnv) {
    check(typeof cacheEnv.value === "string" && cacheEnv.value.startsWith("/") && !cacheEnv.valueFrom,
      `HF_HUB_CACHE ${JSON.stringify(cacheEnv)} is not an absolute path`);
    const cm = mounts.find((mm) => mm.mountPath.replace(/\/$/, "") === String(cacheEnv.value).replace(/\/$/, ""));
    if (check(cm, `HF_HUB_CACHE ${cacheEnv.value} is not a volume mount (the root filesystem is read-only)`)) {
      check(cm.readOnly !== true, `the Hugging Face cache ${cm.mountPath} is mounted read-only`);
      check(!cm.subPath, `the Hugging Face cache ${cm.mountPath} is mounted with subPath`);
      cacheVolume = volumes[cm.name];
      check(cacheVolume && (cacheVolume.emptyDir || cacheVolume.persistentVolumeClaim || cacheVolume.hostPath),
        `the Hugging Face cache volume ${cm.name} is none of emptyDir / pvc / hostPath`);
      for (const o of mounts) {
        if (o === cm) continue;
        check(!under(o.mountPath, cm.mountPath) && !under(cm.mountPath, o.mountPath),
          `the Hugging Face cache ${cm.mountPath} overlaps the mount ${o.mountPath}`);
      }
    }
  }
  const hfVars = [...envs.keys()].filter((n) => n.startsWith("HF_"));
  if (!cacheEnv) {
    check(hfVars.length === 0, `${hfVars.join(",")} set without a Hugging Face cache (HF_HUB_CACHE)`);
  }
  for (const e of env) {
    if (/TOKEN/.test(e.name)) {
      check(e.value === undefined, `${e.name} holds a token as a literal value; use a secretKeyRef`);
    }
  }
  const token = envs.get("HF_TOKEN");
  if (token) {
    const ref = token.valueFrom?.secretKeyRef;
    if (check(ref?.name && ref?.key, "HF_TOKEN is not from a secretKeyRef")) {
      const sec = byKind("Secret").find((s) => s.metadata?.name === ref.name);
      if (sec) {
        check(sec.data?.[ref.key] !== undefined || sec.stringData?.[ref.key] !== undefined,
          `Secret ${ref.name} has no key ${ref.key} for HF_TOKEN`);
        check(dep.spec.template.metadata?.annotations?.["checksum/hf-token"],
          `HF_TOKEN comes from the chart's Secret ${ref.name}, but no checksum/hf-token rolls the pods when it changes`);
      }
    }
  }
  const offline = envs.get("HF_HUB_OFFLINE");
  if (offline) {
    check(offline.value === "1", `HF_HUB_OFFLINE is ${JSON.stringify(offline.value)}, not "1"`);
    check(!cacheVolume?.emptyDir, "HF_HUB_OFFLINE=1 with an emptyDir cache, which starts empty");
  }
  const endpoint = envs.get("HF_ENDPOINT");
  if (endpoint) {
    check(/^https?:\/\/\S+$/.test(endpoint.value ?? ""), `HF_ENDPOINT ${endpoint.value} is not an http(s) URL`);
  }

  // Every rendered Secret and claim is used by the pod.
  for (const s of byKind("Secret")) {
    const name = s.metadata?.name;
    check(Object.values(volumes).some((v) => v.secret?.secretName === name) ||
      env.some((e) => e.valueFrom?.secretKeyRef?.name === name),
    `Secret ${name} is rendered but the pod does not use it`);
  }
  for (const c of byKind("PersistentVolumeClaim")) {
    const name = c.metadata?.name;
    check(Object.values(volumes).some((v) => v.persistentVolumeClaim?.claimName === name),
      `PersistentVolumeClaim ${name} is rendered but the pod does not mount it`);
    const modes = c.spec?.accessModes ?? [];
    if (!modes.includes("ReadWriteMany") && !modes.includes("ReadOnlyMany")) {
      check(dep.spec?.strategy?.type === "Recreate",
        `PersistentVolumeClaim ${name} (${modes.join(",")}) attaches to one node, but the ` +
        `Deployment's strategy is ${dep.spec?.strategy?.type}: a surge pod elsewhere could not start`);
      check((dep.spec?.replicas ?? 1) <= 1 && byKind("HorizontalPodAutoscaler").length === 0,
        `PersistentVolumeClaim ${name} (${modes.join(",")}) is shared by several pods`);
    }
  }

  // The variant's expectations.
  if (opts.expectHfCache === "none") {
    check(!cacheEnv && hfVars.length === 0, `HF_* variables are set: ${hfVars.join(",")}`);
  } else if (opts.expectHfCache) {
    check(cacheVolume?.[opts.expectHfCache],
      `the Hugging Face cache volume is ${Object.keys(cacheVolume ?? {}).filter((k) => k !== "name").join(",") || "missing"}, expected ${opts.expectHfCache}`);
  }
  for (const e of opts.expectEnv) {
    const [name, ...rest] = e.split("=");
    const got = envs.get(name);
    check(got && got.value === rest.join("="), `env ${name} is ${JSON.stringify(got)}, expected ${rest.join("=")}`);
  }
  for (const e of opts.expectSecretEnv) {
    const [name, ref] = e.split("=");
    const [secret, key] = ref.split("/");
    const got = envs.get(name)?.valueFrom?.secretKeyRef;
    check(got?.name === secret && got?.key === key,
      `env ${name} is ${JSON.stringify(envs.get(name))}, expected secretKeyRef ${secret}/${key}`);
  }
  for (const name of opts.expectAbsentEnv ?? []) {
    check(!envs.has(name), `env ${name} is set: ${JSON.stringify(envs.get(name))}`);
  }
}

if (server) {
  const args = server.args ?? [];
  const sc = server.securityContext ?? {};
  const psc = pod.securityContext ?? {};
  check(sc.runAsNonRoot === true || psc.runAsNonRoot === true, "runAsNonRoot is not true");
  check((sc.runAsUser ?? psc.runAsUser) === 10001, "runAsUser is not 10001");
  check(sc.readOnlyRootFilesystem === true, "readOnlyRootFilesystem is not true");
  check(sc.allowPrivilegeEscalation === false, "allowPrivilegeEscalation is not false");
  check((sc.capabilities?.drop ?? []).includes("ALL"), "capabilities do not drop ALL");
  check((sc.seccompProfile ?? psc.seccompProfile)?.type === "RuntimeDefault",
    "seccompProfile is not RuntimeDefault");
  check(!!server.resources?.requests?.cpu && !!server.resources?.requests?.memory &&
    !!server.resources?.limits?.memory, "cpu/memory requests and a memory limit are required");
  // inferd reads INFERD_* variables as settings; Kubernetes' service links
  // would add INFERD_<SERVICE>_PORT and the like for Services of the namespace.
  check(pod.enableServiceLinks === false, "enableServiceLinks is not false");

  const volumes = Object.fromEntries((pod.volumes ?? []).map((v) => [v.name, v]));
  const mounts = server.volumeMounts ?? [];
  const tmp = mounts.find((m) => m.mountPath === "/tmp");
  check(tmp && volumes[tmp.name]?.emptyDir, "/tmp is not an emptyDir");
  // The models volume (absent with modelStorage.type none, when every model
  // is a Hub name: checked against config.yaml below).
  const models = mounts.find((m) => m.name === "models");
  if (models) check(models.readOnly === true, "models volume is not mounted read-only");
  const mv = volumes.models ?? {};
  if (models) {
    check(!!(mv.persistentVolumeClaim || mv.hostPath || mv.emptyDir),
      "models volume is none of pvc / hostPath / emptyDir");
  }
  if (models && mv.emptyDir) {
    const init = (pod.initContainers ?? []).find((c) =>
      (c.volumeMounts ?? []).some((m) => m.name === "models" && !m.readOnly));
    check(init, "models emptyDir has no initContainer that fills it");
  }

  // The config file, and a change to it rolling the pods.
  const loaded = loadConfig(args, mounts, volumes);
  const config = loaded?.config ?? {};
  if (loaded) {
    checkConfig(config);
    checkExpectedConfig(config);
    const sum = dep.spec.template.metadata?.annotations?.["checksum/config"];
    check(sum === createHash("sha256").update(loaded.text).digest("hex"),
      `pod annotation checksum/config ${sum} is not the sha256 of config.yaml`);
  }
  // A setting as the server sees it: a flag in args, else the config key.
  const setting = (name) => argValue(args, `--${name}`) ?? config[name];

  // A file setting must point into a mounted volume of the right kind.
  const mountedFrom = (file) => {
    const m = mounts.find((mm) => file?.startsWith(mm.mountPath.replace(/\/?$/, "/")));
    return m ? volumes[m.name] : undefined;
  };
  for (const f of ["tls-cert", "tls-key", "tls-client-ca", "api-key-file"]) {
    if (setting(f) !== undefined) {
      check(mountedFrom(setting(f))?.secret, `${f} ${setting(f)} is not in a mounted Secret`);
    }
  }
  check(!args.includes("--api-key"), "--api-key puts a secret in the pod spec; use --api-key-file");
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--model") {
      check(/^[A-Za-z0-9][A-Za-z0-9._-]*=\/.+/.test(args[i + 1] ?? ""),
        `--model ${args[i + 1]} is not NAME=/PATH`);
    }
  }
  check(args.includes("--model") || (config.models ?? []).length > 0, "no model to serve");

  const grpcPort = (server.ports ?? []).find((p) => p.name === "grpc")?.containerPort;
  check(setting("listen") === `0.0.0.0:${grpcPort}`,
    `listen ${setting("listen")} does not listen on 0.0.0.0:<grpc port ${grpcPort}>`);
  const metricsPort = (server.ports ?? []).find((p) => p.name === "metrics")?.containerPort;
  if (metricsPort) {
    check(setting("metrics-listen") === `0.0.0.0:${metricsPort}`,
      "metrics-listen does not match the metrics port");
  } else {
    check(setting("metrics-listen") === undefined, "metrics-listen without a metrics port");
  }
  const httpPort = (server.ports ?? []).find((p) => p.name === "http")?.containerPort;
  if (httpPort) {
    check(setting("http-listen") === `0.0.0.0:${httpPort}`,
      "http-listen does not match the http port");
  } else {
    check(setting("http-listen") === undefined, "http-listen without an http port");
  }

  const tlsOn = setting("tls-cert") !== undefined;
  for (const name of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    const p = server[name];
    if (!check(p, `${name} missing`)) continue;
    const kind = p.grpc ? "grpc" : p.tcpSocket ? "tcp" : "other";
    check(kind !== "other", `${name} is neither grpc nor tcpSocket`);
    // With TLS on, gRPC probes go to the plaintext health port, which must
    // be a container port and the health-listen address.
    const healthPort = (server.ports ?? []).find((q) => q.name === "health")?.containerPort;
    const probePort = tlsOn ? healthPort : grpcPort;
    if (p.grpc) check(p.grpc.port === probePort, `${name} probes port ${p.grpc.port}, not ${probePort}`);
    if (opts.expectProbe) check(kind === opts.expectProbe, `${name} is ${kind}, expected ${opts.expectProbe}`);
  }
  // With TLS on, kubelet's plaintext gRPC probe needs the plaintext health
  // port; a probe of the TLS port would always fail.
  if (tlsOn && server.readinessProbe?.grpc) {
    const healthPort = (server.ports ?? []).find((q) => q.name === "health")?.containerPort;
    check(healthPort !== undefined, "TLS on, gRPC probes, but no health port");
    check(setting("health-listen") === `0.0.0.0:${healthPort}`,
      "health-listen does not match the health port");
    check(server.readinessProbe.grpc.port !== grpcPort,
      "gRPC probe against the TLS port cannot succeed");
  }
  const sp = server.startupProbe ?? {};
  const startupSeconds = (sp.periodSeconds ?? 10) * (sp.failureThreshold ?? 3);
  check(startupSeconds >= 300, "startupProbe allows less than 5 minutes to load models");
  if (opts.expectStartupSeconds !== undefined) {
    check(startupSeconds === opts.expectStartupSeconds,
      `startupProbe allows ${startupSeconds} s (${sp.periodSeconds} * ${sp.failureThreshold}), expected ${opts.expectStartupSeconds}`);
  }
  if (opts.expectStrategy) {
    check(dep.spec?.strategy?.type === opts.expectStrategy,
      `Deployment strategy ${dep.spec?.strategy?.type}, expected ${opts.expectStrategy}`);
  }

  // ---- Models by Hugging Face Hub name -------------------------------------
  checkHub(config, mounts, volumes);

  const drain = Number(setting("drain-timeout"));
  check(Number.isFinite(drain), "drain-timeout missing");
  const preStop = server.lifecycle?.preStop?.exec?.command;
  const preStopSleep = preStop?.[0] === "sleep" ? Number(preStop[1]) : 0;
  check(pod.terminationGracePeriodSeconds > drain + preStopSleep,
    `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} <= drain ${drain} + preStop ${preStopSleep}`);

  // ---- Services, monitoring, scaling --------------------------------------
  const services = byKind("Service");
  const main = services.find((s) => s.spec?.clusterIP !== "None");
  check(main, "no ClusterIP Service");
  for (const s of services) {
    check(selects(s.spec?.selector), `Service ${s.metadata.name} does not select the pods`);
    const gp = (s.spec?.ports ?? []).find((p) => p.name === "grpc");
    check(gp && gp.appProtocol === "grpc" && gp.targetPort === "grpc",
      `Service ${s.metadata.name} has no grpc port with appProtocol grpc`);
  }
  if (metricsPort) {
    check((main?.spec?.ports ?? []).some((p) => p.name === "metrics"), "Service lacks the metrics port");
  }
  if (httpPort) {
    check((main?.spec?.ports ?? []).some((p) => p.name === "http" && p.targetPort === "http"),
      "Service lacks the http port");
  }
  for (const sm of byKind("ServiceMonitor")) {
    check(selects(sm.spec?.selector?.matchLabels), "ServiceMonitor selector does not match");
    for (const ep of sm.spec?.endpoints ?? []) {
      check((main?.spec?.ports ?? []).some((p) => p.name === ep.port),
        `ServiceMonitor endpoint port ${ep.port} is not a Service port`);
    }
  }
  for (const hpa of byKind("HorizontalPodAutoscaler")) {
    check(hpa.spec?.scaleTargetRef?.kind === "Deployment" &&
      hpa.spec?.scaleTargetRef?.name === dep.metadata.name, "HPA does not target the Deployment");
    check(dep.spec.replicas === undefined, "Deployment sets replicas while an HPA scales it");
    check(hpa.spec.minReplicas <= hpa.spec.maxReplicas, "HPA minReplicas > maxReplicas");
  }
  for (const pdb of byKind("PodDisruptionBudget")) {
    check(selects(pdb.spec?.selector?.matchLabels), "PDB selector does not match the pods");
  }
  for (const t of pod.topologySpreadConstraints ?? []) {
    check(selects(t.labelSelector?.matchLabels), "topologySpreadConstraint labelSelector does not match");
  }

  // ---- Flags and config.yaml against the real server -----------------------
  if (opts.inferd) {
    // --help may exit non-zero (absl does); the text is what matters.
    const help = spawnSync(opts.inferd, ["--help"], { encoding: "utf8" });
    if (help.error) {
      check(false, `cannot run ${opts.inferd} --help: ${help.error.message}`);
    } else {
      const text = `${help.stdout}\n${help.stderr}`;
      const known = new Set([...text.matchAll(/--([a-z0-9][a-z0-9_-]*)/g)].map((m) => `--${m[1]}`));
      check(known.has("--listen") && known.has("--model"),
        `${opts.inferd} --help lists no --listen/--model flags:\n${text.slice(0, 500)}`);
      const unknown = [...new Set(args.filter((a) => a.startsWith("--") && !known.has(a.split("=")[0])))];
      if (opts.expectUnknown) {
        check(unknown.sort().join(",") === [...opts.expectUnknown].sort().join(","),
          `unknown flags ${unknown.join(",") || "(none)"}, expected ${opts.expectUnknown.join(",")}`);
      } else {
        check(unknown.length === 0, `flags inferd --help does not list: ${unknown.join(" ")}`);
      }
    }
    if (loaded) checkPrintConfig(loaded.text, config);
  }
}

finish();
