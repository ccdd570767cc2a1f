// Renders helm/inferd with `helm template` and checks the result offline:
// every manifest against the Kubernetes OpenAPI schemas (npm kubernetes-models,
// ServiceMonitor via @kubernetes-models/prometheus-operator), the chart's own
// invariants (security context, probes, grace period, wiring of ports,
// selectors, secrets), and, given an inferd binary, that every `--flag` in
// the server's args is one `inferd --help` lists.
//
// node validate.mjs --npm-dir DIR --helm BIN --chart DIR [--values FILE]...
//   [--expect-kinds Kind,Kind,...]  exact multiset of rendered kinds
//   [--expect-probe grpc|tcp]       probe action of all three probes
//   [--inferd BIN]                  check args against `BIN --help`
//   [--expect-unknown-flags a,b]    the flag check must report exactly these
//   [--expect-error]                rendering must fail with the message in
//                                   the values file's `# expect: REGEX` line
// Exits 0 when every check passes, 1 otherwise (each failure is printed).

import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

function parseArgs(argv) {
  const opts = { values: [] };
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
      case "--expect-error": opts.expectError = true; break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  for (const k of ["npmDir", "helm", "chart"]) {
    if (!opts[k]) throw new Error(`--${k.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())} is required`);
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

function modelClass(apiVersion, kind) {
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

  const volumes = Object.fromEntries((pod.volumes ?? []).map((v) => [v.name, v]));
  const mounts = server.volumeMounts ?? [];
  const tmp = mounts.find((m) => m.mountPath === "/tmp");
  check(tmp && volumes[tmp.name]?.emptyDir, "/tmp is not an emptyDir");
  const models = mounts.find((m) => m.name === "models");
  check(models && models.readOnly === true, "models volume is not mounted read-only");
  const mv = volumes.models ?? {};
  check(!!(mv.persistentVolumeClaim || mv.hostPath || mv.emptyDir),
    "models volume is none of pvc / hostPath / emptyDir");
  if (mv.emptyDir) {
    const init = (pod.initContainers ?? []).find((c) =>
      (c.volumeMounts ?? []).some((m) => m.name === "models" && !m.readOnly));
    check(init, "models emptyDir has no initContainer that fills it");
  }

  // A file flag must point into a mounted volume of the right kind.
  const mountedFrom = (file) => {
    const m = mounts.find((mm) => file?.startsWith(mm.mountPath.replace(/\/?$/, "/")));
    return m ? volumes[m.name] : undefined;
  };
  for (const f of ["--tls-cert", "--tls-key", "--tls-client-ca", "--api-key-file"]) {
    if (args.includes(f)) {
      check(mountedFrom(argValue(args, f))?.secret, `${f} ${argValue(args, f)} is not in a mounted Secret`);
    }
  }
  check(!args.includes("--api-key"), "--api-key puts a secret in the pod spec; use --api-key-file");
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--model") {
      check(/^[A-Za-z0-9][A-Za-z0-9._-]*=\/.+/.test(args[i + 1] ?? ""),
        `--model ${args[i + 1]} is not NAME=/PATH`);
    }
  }
  check(args.includes("--model"), "no --model argument");

  const grpcPort = (server.ports ?? []).find((p) => p.name === "grpc")?.containerPort;
  check(argValue(args, "--listen") === `0.0.0.0:${grpcPort}`,
    `--listen ${argValue(args, "--listen")} does not listen on 0.0.0.0:<grpc port ${grpcPort}>`);
  const metricsPort = (server.ports ?? []).find((p) => p.name === "metrics")?.containerPort;
  if (metricsPort) {
    check(argValue(args, "--metrics-listen") === `0.0.0.0:${metricsPort}`,
      "--metrics-listen does not match the metrics port");
  } else {
    check(!args.includes("--metrics-listen"), "--metrics-listen without a metrics port");
  }

  for (const name of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    const p = server[name];
    if (!check(p, `${name} missing`)) continue;
    const kind = p.grpc ? "grpc" : p.tcpSocket ? "tcp" : "other";
    check(kind !== "other", `${name} is neither grpc nor tcpSocket`);
    // With TLS on, gRPC probes go to the plaintext health port, which must
    // be a container port and the --health-listen address.
    const healthPort = (server.ports ?? []).find((q) => q.name === "health")?.containerPort;
    const probePort = args.includes("--tls-cert") ? healthPort : grpcPort;
    if (p.grpc) check(p.grpc.port === probePort, `${name} probes port ${p.grpc.port}, not ${probePort}`);
    if (opts.expectProbe) check(kind === opts.expectProbe, `${name} is ${kind}, expected ${opts.expectProbe}`);
  }
  // With TLS on, kubelet's plaintext gRPC probe needs the plaintext health
  // port; a probe of the TLS port would always fail.
  if (args.includes("--tls-cert") && server.readinessProbe?.grpc) {
    const healthPort = (server.ports ?? []).find((q) => q.name === "health")?.containerPort;
    check(healthPort !== undefined, "TLS on, gRPC probes, but no health port");
    check(argValue(args, "--health-listen") === `0.0.0.0:${healthPort}`,
      "--health-listen does not match the health port");
    check(server.readinessProbe.grpc.port !== grpcPort,
      "gRPC probe against the TLS port cannot succeed");
  }
  const sp = server.startupProbe ?? {};
  check((sp.periodSeconds ?? 10) * (sp.failureThreshold ?? 3) >= 300,
    "startupProbe allows less than 5 minutes to load models");

  const drain = Number(argValue(args, "--drain-timeout"));
  check(Number.isFinite(drain), "--drain-timeout missing");
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

  // ---- Flags against `inferd --help` ---------------------------------------
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
  }
}

finish();
