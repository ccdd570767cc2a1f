#!/usr/bin/env python3
"""Hostile input over gRPC (issue 17, item 4): every case of
docs/hostile-input.md is sent to one inferd serving stories260K (generate),
bert-embed (embed) and xlmr-reranker (rerank); each must be answered with its
documented status (and a message naming what is wrong), and afterwards the
server must be alive, with nothing in flight and the known greedy request
still giving its tokens.

Usage: hostile_input_test.py --inferd BIN --stubs DIR --shared DIR
           --test-models DIR [--streams N] [--slow-clients N]
"""
import argparse
import json
import os
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as lib  # noqa: E402

ARGS = None
GREEDY_PROMPT = "Once upon a time"
UINT32_MAX = 2**32 - 1
INT32_MIN = -2**31
MAX_MESSAGE = 1 << 20  # --max-receive-message-bytes of the server under test
# Patterns whose full DFA is huge (a state per count of characters read,
# each standing for every optional copy still ahead, and ~95 byte classes):
# the old automaton compiler refused them; llguidance builds states lazily.
ODD_BYTES = "".join(f"\\x{b:02x}" for b in range(0x21, 0x7F, 2))
REGEX_SLOW = f"([{ODD_BYTES}]?){{400}}"
REGEX_COSTLY = f"([{ODD_BYTES}]?){{60}}"


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def length_field(number, payload):
    """A length-delimited protobuf field (wire type 2) holding raw bytes."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


class HostileInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        (cls.grpc, cls.ipb, ipb_grpc, cls.mpb, mpb_grpc) = lib.import_stubs(
            ARGS.stubs)
        embed = os.path.join(ARGS.test_models, "bert-embed")
        rerank = os.path.join(ARGS.test_models, "xlmr-reranker")
        if not all(os.path.isfile(os.path.join(p, "config.json"))
                   for p in (embed, rerank)):
            raise unittest.SkipTest("generated test models missing")
        cls.server = lib.InferdProcess(
            ARGS.inferd,
            [("stories", lib.stories_dir()), ("embed", embed),
             ("rerank", rerank)],
            ["--metrics-listen", "127.0.0.1:0",
             "--max-receive-message-bytes", str(MAX_MESSAGE)],
            log_prefix="inferd-hostile-")
        cls.server.wait_ready(ARGS.stubs, ["stories", "embed", "rerank"])
        cls.channel = cls.grpc.insecure_channel(cls.server.address)
        cls.inf = ipb_grpc.InferenceStub(cls.channel)
        cls.models = mpb_grpc.ModelsStub(cls.channel)
        cls.known_tokens = cls.greedy()
        # Methods that send raw bytes (identity serializer): requests
        # protobuf's serializer would refuse to write.
        def unary(method, response):
            return cls.channel.unary_unary(
                method, request_serializer=lambda b: b,
                response_deserializer=response.FromString)
        inf = "/inferd.v1.Inference/"
        cls.raw_tokenize = unary(inf + "Tokenize", cls.ipb.TokenizeResponse)
        cls.raw_embed = unary(inf + "EmbedBatch", cls.ipb.EmbedResponse)
        cls.raw_rerank = unary(inf + "Rerank", cls.ipb.RerankResponse)
        cls.raw_classify = unary(inf + "Classify", cls.ipb.ClassifyResponse)
        cls.raw_detokenize = unary(inf + "Detokenize",
                                   cls.ipb.DetokenizeResponse)
        cls.raw_get_model = unary("/inferd.v1.Models/GetModel",
                                  cls.mpb.ModelInfo)
        cls.raw_list_models = unary("/inferd.v1.Models/ListModels",
                                    cls.mpb.ListModelsResponse)
        cls.raw_generate = cls.channel.unary_stream(
            inf + "Generate", request_serializer=lambda b: b,
            response_deserializer=cls.ipb.GenerateResponse.FromString)
        cls.raw_embed_stream = cls.channel.stream_stream(
            inf + "Embed", request_serializer=lambda b: b,
            response_deserializer=cls.ipb.EmbedResponse.FromString)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        code = cls.server.stop()
        assert code == 0, cls.server.output()

    @classmethod
    def greedy(cls, max_tokens=12):
        req = cls.ipb.GenerateRequest(model="stories", prompt=GREEDY_PROMPT)
        req.sampling.max_tokens = max_tokens
        req.sampling.temperature = 0.0
        req.sampling.ignore_eos = True
        ids = []
        for chunk in cls.inf.Generate(req, timeout=120):
            ids.extend(chunk.token_ids)
        return ids

    def gen(self, **sampling):
        req = self.ipb.GenerateRequest(model="stories", prompt="Hi")
        req.sampling.max_tokens = 2
        for k, v in sampling.items():
            if isinstance(v, list):
                getattr(req.sampling, k).extend(v)
            elif isinstance(v, dict):
                for kk, vv in v.items():
                    getattr(req.sampling, k)[kk] = vv
            else:
                setattr(req.sampling, k, v)
        return req

    def run_generate(self, req):
        return [c for c in self.inf.Generate(req, timeout=60)]

    def raw_embed_stream_of(self, *messages):
        """A bidi Embed stream sending these raw messages, read to its
        end."""
        return lambda: list(self.raw_embed_stream(iter(messages), timeout=60))

    def structured(self, json_schema=None, regex=None, choices=None,
                   grammar=None):
        """A Generate call constrained by a response_format."""
        req = self.gen()
        if json_schema is not None:
            req.response_format.json_schema = (
                json_schema if isinstance(json_schema, str)
                else json.dumps(json_schema))
        elif regex is not None:
            req.response_format.regex = regex
        elif grammar is not None:
            req.response_format.grammar = grammar
        else:
            req.response_format.choice.values.extend(choices)
        return lambda: self.run_generate(req)

    @staticmethod
    def nested_schema(levels):
        schema = {"type": "null"}
        for _ in range(levels):
            schema = {"type": "object", "properties": {"a": schema},
                      "required": ["a"]}
        return schema

    @staticmethod
    def ref_fan_schema(levels, fan):
        """$defs d0..d<levels>: each an anyOf of `fan` $refs to the next,
        the last a date-time string: fan^levels copies once inlined."""
        defs = {f"d{levels}": {"type": "string", "format": "date-time"}}
        for i in range(levels):
            defs[f"d{i}"] = {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * fan}
        return {"$defs": defs, "$ref": "#/$defs/d0"}

    def cases(self):
        """(name, call, expected code, words the message must contain);
        the rows of docs/hostile-input.md, in its order."""
        ipb = self.ipb
        S = self.grpc.StatusCode
        huge = "a " * ((MAX_MESSAGE - 1024) // 2)
        too_big = "a" * (MAX_MESSAGE + 1)
        return [
            ("empty prompt", lambda: self.run_generate(
                ipb.GenerateRequest(model="stories", prompt="")),
             S.OK, []),
            ("no input at all", lambda: self.run_generate(
                ipb.GenerateRequest(model="stories")),
             S.INVALID_ARGUMENT, ["prompt"]),
            ("empty model name (several served)", lambda: self.inf.Tokenize(
                ipb.TokenizeRequest(model="", text="x")),
             S.INVALID_ARGUMENT, ["model"]),
            ("unknown model", lambda: self.inf.Tokenize(
                ipb.TokenizeRequest(model="nope" * 1000, text="x")),
             S.NOT_FOUND, ["unknown model"]),
            ("empty text to embed", lambda: self.inf.EmbedBatch(
                ipb.EmbedRequest(model="embed", texts=[""])),
             S.OK, []),
            ("empty rerank query", lambda: self.inf.Rerank(
                ipb.RerankRequest(model="rerank", query="", documents=["d"])),
             S.INVALID_ARGUMENT, ["query"]),
            ("huge prompt (1 MB, past the context)", lambda: self.run_generate(
                ipb.GenerateRequest(model="stories", prompt=huge)),
             S.INVALID_ARGUMENT, ["tokens"]),
            ("huge text to tokenize (1 MB)", lambda: self.inf.Tokenize(
                ipb.TokenizeRequest(model="embed", text=huge)),
             S.OK, []),
            ("huge text to embed (1 MB), truncate=true",
             lambda: self.inf.EmbedBatch(ipb.EmbedRequest(
                 model="embed", texts=[huge], truncate=True)),
             S.OK, []),
            ("huge text to embed (1 MB)",
             lambda: self.inf.EmbedBatch(ipb.EmbedRequest(
                 model="embed", texts=[huge])),
             S.INVALID_ARGUMENT, ["tokens"]),
            ("oversize message", lambda: self.inf.Tokenize(
                ipb.TokenizeRequest(model="embed", text=too_big)),
             S.RESOURCE_EXHAUSTED, [str(MAX_MESSAGE)]),
            # Bytes protobuf rejects, for each kind of call (unary,
            # server-streaming Generate, bidi Embed) and every request type.
            ("Tokenize: invalid UTF-8 in text", lambda: self.raw_tokenize(
                length_field(1, b"embed") + length_field(2, b"ab\xff\xfe")),
             S.INVALID_ARGUMENT,
             ["text is not valid UTF-8 (byte 0xff at offset 2 of the "
              "string's 4 bytes)", "encode the text as UTF-8"]),
            ("EmbedBatch: invalid UTF-8 in texts[1]", lambda: self.raw_embed(
                length_field(1, b"embed") + length_field(3, b"ok") +
                length_field(3, b"\xc3\x28")),
             S.INVALID_ARGUMENT,
             ["texts[1] is not valid UTF-8 (byte 0x28 at offset 1 of the "
              "string's 2 bytes breaks the character that starts at "
              "offset 0)"]),
            ("Rerank: invalid UTF-8 in documents[0]", lambda: self.raw_rerank(
                length_field(1, b"rerank") + length_field(2, b"q") +
                length_field(3, b"doc \xed\xa0\x80")),
             S.INVALID_ARGUMENT,
             ["documents[0] is not valid UTF-8 (byte 0xa0 at offset 5"]),
            ("Classify: invalid UTF-8 in pairs[0].second",
             lambda: self.raw_classify(length_field(3, length_field(
                 1, b"a") + length_field(2, b"b\xf4\x90\x80\x80"))),
             S.INVALID_ARGUMENT,
             ["pairs[0].second is not valid UTF-8 (byte 0x90 at offset 2"]),
            ("Detokenize: invalid UTF-8 in model", lambda: self.raw_detokenize(
                length_field(1, b"stories\xff")),
             S.INVALID_ARGUMENT,
             ["model is not valid UTF-8 (byte 0xff at offset 7"]),
            ("GetModel: invalid UTF-8 in name", lambda: self.raw_get_model(
                length_field(1, b"\xc0\xaf")),
             S.INVALID_ARGUMENT,
             ["name is not valid UTF-8 (byte 0xc0 at offset 0"]),
            ("Generate: invalid UTF-8 in messages[1].content",
             lambda: list(self.raw_generate(
                 length_field(1, b"stories") +
                 length_field(8, length_field(1, b"user") +
                              length_field(2, b"hi")) +
                 length_field(8, length_field(1, b"user") +
                              length_field(2, b"hello\xff")),
                 timeout=60)),
             S.INVALID_ARGUMENT,
             ["messages[1].content is not valid UTF-8 (byte 0xff at offset "
              "5 of the string's 6 bytes)"]),
            ("Generate: invalid UTF-8 in sampling.stop[1]",
             lambda: list(self.raw_generate(
                 length_field(1, b"stories") + length_field(3, b"Hi") +
                 length_field(6, length_field(11, b"a") +
                              length_field(11, b"\xe2\x82")),
                 timeout=60)),
             S.INVALID_ARGUMENT,
             ["sampling.stop[1] is not valid UTF-8 (the string's 2 bytes "
              "end inside the character that starts at offset 0)"]),
            ("Embed stream: invalid UTF-8 in the 2nd message's texts[0]",
             self.raw_embed_stream_of(
                 self.ipb.EmbedRequest(model="embed", id="a",
                                       texts=["fine"]).SerializeToString(),
                 length_field(1, b"embed") + length_field(3, b"\xff")),
             S.INVALID_ARGUMENT,
             ["message 2 of the stream: texts[0] is not valid UTF-8 (byte "
              "0xff at offset 0"]),
            ("Tokenize: truncated message", lambda: self.raw_tokenize(
                length_field(1, b"embed")[:-2]),
             S.INVALID_ARGUMENT,
             ["not a valid inferd.v1.TokenizeRequest message: at byte 0, "
              "field 1 (model) claims 5 bytes but 3 are left (truncated?)"]),
            ("ListModels: invalid wire type", lambda: self.raw_list_models(
                b"\x0f"),
             S.INVALID_ARGUMENT,
             ["not a valid inferd.v1.ListModelsRequest message: at byte 0, "
              "field 1 has wire type 7"]),
            ("Embed stream: truncated 1st message", self.raw_embed_stream_of(
                length_field(3, b"abc")[:-1]),
             S.INVALID_ARGUMENT,
             ["message 1 of the stream: the request is not a valid "
              "inferd.v1.EmbedRequest message: at byte 0, field 3 (texts) "
              "claims 3 bytes but 2 are left"]),
            ("prompt token id past the vocabulary", lambda: self.run_generate(
                ipb.GenerateRequest(model="stories",
                                    prompt_token_ids=ipb.TokenIds(
                                        ids=[1, UINT32_MAX]))),
             S.INVALID_ARGUMENT, ["prompt_token_ids", str(UINT32_MAX)]),
            ("embed token id past the vocabulary", lambda: self.inf.EmbedBatch(
                ipb.EmbedRequest(model="embed", token_ids=[
                    ipb.TokenIds(ids=[101, 2**31])])),
             S.INVALID_ARGUMENT, ["token_ids"]),
            ("detokenize id past the vocabulary", lambda: self.inf.Detokenize(
                ipb.DetokenizeRequest(model="stories",
                                      token_ids=[1, UINT32_MAX])),
             S.INVALID_ARGUMENT, ["token"]),
            ("stop_token_ids past the vocabulary", lambda: self.run_generate(
                self.gen(stop_token_ids=[UINT32_MAX])),
             S.INVALID_ARGUMENT, ["stop_token_ids"]),
            ("logit_bias id past the vocabulary", lambda: self.run_generate(
                self.gen(logit_bias={UINT32_MAX: 1.0})),
             S.INVALID_ARGUMENT, ["logit_bias"]),
            ("max_tokens = UINT32_MAX", lambda: self.run_generate(
                self.gen(max_tokens=UINT32_MAX)),
             S.INVALID_ARGUMENT, ["max_tokens"]),
            ("min_tokens = UINT32_MAX", lambda: self.run_generate(
                self.gen(min_tokens=UINT32_MAX)),
             S.INVALID_ARGUMENT, ["min_tokens"]),
            ("logprobs = UINT32_MAX", lambda: self.run_generate(
                self.gen(logprobs=UINT32_MAX)),
             S.INVALID_ARGUMENT, ["logprobs"]),
            ("n = UINT32_MAX", lambda: self.run_generate(
                self.gen(n=UINT32_MAX)),
             S.INVALID_ARGUMENT, ["sampling.n", "at most 16"]),
            ("prompt_logprobs = UINT32_MAX", lambda: self.run_generate(
                self.gen(prompt_logprobs=UINT32_MAX)),
             S.INVALID_ARGUMENT, ["prompt_logprobs", "[0, 20]"]),
            ("top_k = INT32_MIN", lambda: self.run_generate(
                self.gen(top_k=INT32_MIN)),
             S.INVALID_ARGUMENT, ["top_k"]),
            ("temperature = NaN", lambda: self.run_generate(
                self.gen(temperature=float("nan"))),
             S.INVALID_ARGUMENT, ["temperature"]),
            ("top_p = infinity", lambda: self.run_generate(
                self.gen(top_p=float("inf"))),
             S.INVALID_ARGUMENT, ["top_p"]),
            ("seed = UINT64_MAX", lambda: self.run_generate(
                self.gen(seed=2**64 - 1)),
             S.OK, []),
            ("5000 stop strings", lambda: self.run_generate(
                self.gen(stop=[f"s{i}" for i in range(5000)])),
             S.INVALID_ARGUMENT, ["sampling.stop", "5000"]),
            ("one 100 kB stop string", lambda: self.run_generate(
                self.gen(stop=["x" * 100000])),
             S.INVALID_ARGUMENT, ["sampling.stop", "bytes"]),
            ("empty stop string", lambda: self.run_generate(
                self.gen(stop=[""])),
             S.INVALID_ARGUMENT, ["sampling.stop", "empty"]),
            ("5000 chat messages", lambda: self.run_generate(
                ipb.GenerateRequest(model="stories", messages=[
                    ipb.ChatMessage(role="user", content="x")] * 5000)),
             S.INVALID_ARGUMENT, ["messages"]),
            ("chat message without a role", lambda: self.run_generate(
                ipb.GenerateRequest(model="stories", messages=[
                    ipb.ChatMessage(role="", content="x")])),
             S.INVALID_ARGUMENT, ["role"]),
            ("10000 texts in one EmbedBatch", lambda: self.inf.EmbedBatch(
                ipb.EmbedRequest(model="embed", texts=["a"] * 10000)),
             S.INVALID_ARGUMENT, ["texts", "10000"]),
            ("embed dimensions past the model's", lambda: self.inf.EmbedBatch(
                ipb.EmbedRequest(model="embed", texts=["a"],
                                 dimensions=UINT32_MAX)),
             S.INVALID_ARGUMENT, ["dimensions"]),
            # Structured output is compiled by llguidance, lazily (its lexer
            # builds DFA states as generation reaches them) and within its
            # fuel limits: what the old automaton compiler had to refuse
            # now compiles in milliseconds and generates.
            ("json_schema nested 33 levels",
             self.structured(self.nested_schema(33)), S.OK, []),
            ("json_schema text nested 30000 levels",
             self.structured('{"const": ' + "[" * 30000 + "]" * 30000 + "}"),
             S.INVALID_ARGUMENT, ["response_format.json_schema",
                                  "recursion limit exceeded"]),
            ("json_schema over 64 kB",
             self.structured({"type": "string", "description": "x" * 70000}),
             S.INVALID_ARGUMENT, ["response_format.json_schema", "65536"]),
            ("json_schema that is not JSON",
             self.structured('{"type": "object", "properties": {'),
             S.INVALID_ARGUMENT, ["response_format.json_schema",
                                  "not valid JSON"]),
            ("json_schema with 2000 optional properties",
             self.structured({"type": "object", "properties": {
                 f"p{i:04d}": {"type": "null"} for i in range(2000)}}),
             S.OK, []),
            ("json_schema whose $refs fan out 8^10 times",
             self.structured(self.ref_fan_schema(10, 8)), S.OK, []),
            ("json_schema with an exploding pattern",
             self.structured({"type": "string",
                              "pattern": "(a|b)*a(a|b){24}"}), S.OK, []),
            ("json_schema with 100 costly patterns",
             self.structured({"type": "object", "properties": {
                 f"p{i:03d}": {"type": "string",
                               "pattern": REGEX_COSTLY}
                 for i in range(100)}}), S.OK, []),
            ("json_schema oneOf whose branches overlap",
             self.structured({"oneOf": [{"type": "integer"},
                                        {"type": "number", "minimum": 0}]}),
             S.INVALID_ARGUMENT, ["response_format.json_schema", "oneOf",
                                  "anyOf", "coerce_one_of"]),
            # The disjointness check is pairwise: 500 branches (within the
            # 64 KiB cap) are 124,750 pairs.
            ("json_schema oneOf of 500 tagged branches",
             self.structured({"oneOf": [
                 {"type": "object", "properties": {"kind": {"const": f"k{i}"}},
                  "required": ["kind"], "additionalProperties": False}
                 for i in range(500)]}), S.OK, []),
            ("regex with 2^25 DFA states",
             self.structured(regex="(a|b)*a(a|b){24}"), S.OK, []),
            ("regex with a million NFA states",
             self.structured(regex="(a{1000}){1000}"), S.OK, []),
            ("regex with 400 optional copies of a 47-byte class",
             self.structured(regex=REGEX_SLOW), S.OK, []),
            ("regex nested 300 groups deep",
             self.structured(regex="(" * 300 + "a" + ")" * 300),
             S.INVALID_ARGUMENT, ["response_format.regex", "invalid regex"]),
            ("Lark grammar with an undefined rule",
             self.structured(grammar="start: nothing_here\n"),
             S.INVALID_ARGUMENT, ["response_format.grammar", "nothing_here"]),
            ("2000 choices",
             self.structured(choices=[f"c{i}" for i in range(2000)]),
             S.INVALID_ARGUMENT, ["response_format.choice", "1024"]),
        ]

    def test_table_cases_answer_their_documented_status(self):
        for name, call, code, words in self.cases():
            with self.subTest(case=name):
                start = time.monotonic()
                try:
                    call()
                    got, details = self.grpc.StatusCode.OK, ""
                except self.grpc.RpcError as e:
                    got, details = e.code(), e.details() or ""
                # Seconds for the figures in docs/hostile-input.md, not a
                # pass condition.
                print(f"CASE {name}: {got.name} in "
                      f"{time.monotonic() - start:.2f}s {details[:160]!r}")
                self.assertEqual(got, code, f"{name}: {details}")
                for w in words:
                    self.assertIn(w, details, name)
        self.assert_healthy()

    def test_streams_opened_and_dropped(self):
        """ARGS.streams Generate streams started and cancelled at once, and
        as many bidi Embed streams opened and abandoned."""
        calls = []
        for i in range(ARGS.streams):
            req = self.ipb.GenerateRequest(model="stories",
                                           prompt=f"Story {i}")
            req.sampling.max_tokens = 64
            calls.append(self.inf.Generate(req, timeout=120))
            if i % 2 == 0:
                calls.append(self.inf.Embed(iter([self.ipb.EmbedRequest(
                    model="embed", texts=["x"])]), timeout=120))
        for c in calls:
            c.cancel()
        self.assert_healthy()

    def test_clients_that_stop_reading(self):
        """Streams whose client never reads a message: the server's
        flow-control window fills; other clients are still served."""
        channels = []
        calls = []
        for i in range(8):
            ch = self.grpc.insecure_channel(self.server.address)
            channels.append(ch)
            stub = lib.import_stubs(ARGS.stubs)[2].InferenceStub(ch)
            req = self.ipb.GenerateRequest(model="stories", prompt="Once")
            req.sampling.max_tokens = 400
            req.sampling.ignore_eos = True
            calls.append(stub.Generate(req, timeout=300))
        self.assertEqual(self.greedy(), self.known_tokens)
        for c in calls:
            c.cancel()
        for ch in channels:
            ch.close()
        self.assert_healthy()

    def test_slowloris_connections(self):
        """Connections that send half an HTTP/2 preface, or a preface and
        then one byte a while, or nothing: they hold a socket each, and the
        server keeps serving."""
        host, port = "127.0.0.1", self.server.port
        socks = []
        preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        settings = struct.pack(">I", 0)[1:] + b"\x04\x00" + b"\x00\x00\x00\x00"
        for i in range(ARGS.slow_clients):
            s = socket.create_connection((host, port), timeout=10)
            if i % 3 == 1:
                s.sendall(preface[:10])
            elif i % 3 == 2:
                s.sendall(preface + settings)
                # A HEADERS frame header promising 1000 bytes, then one.
                s.sendall(struct.pack(">I", 1000)[1:] + b"\x01\x04" +
                          struct.pack(">I", 1) + b"\x00")
            socks.append(s)
        self.assertEqual(self.greedy(), self.known_tokens)
        for s in socks:
            s.close()
        self.assert_healthy()

    def assert_healthy(self):
        """The server is alive, answers the known greedy request with its
        tokens, and has nothing in flight once the calls above drained."""
        self.assertIsNone(self.server.proc.poll(), self.server.output())
        self.assertEqual(self.greedy(), self.known_tokens)
        deadline = time.time() + 60
        while True:
            text = self.server.scrape()
            inflight = [l for l in text.splitlines()
                        if l.startswith(("inferd_rpc_in_flight",
                                         "inferd_num_requests_running",
                                         "inferd_num_requests_waiting"))]
            busy = [l for l in inflight if float(l.rsplit(" ", 1)[1]) != 0]
            if not busy:
                break
            self.assertLess(time.time(), deadline, "\n".join(busy))
            time.sleep(0.1)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    lib.add_common_args(p)
    p.add_argument("--streams", type=int, default=2000)
    p.add_argument("--slow-clients", type=int, default=300)
    ARGS, rest = p.parse_known_args()
    return lib.run_unittest([sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
