"""A fake intentd cluster for the unit tests: http.server nodes in threads
over one in-memory ledger with the states, answers and problem documents of
the real API (a small subset of its rules), a leader that moves, and rules
that inject answers, lost answers and dropped connections."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, unquote, urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

TYPE = "https://github.com/intentledger/intentd/blob/main/docs/problems.md#"


def problem(status: int, code: str, detail: str = "", intent: Optional[dict] = None,
            retry_after_ms: int = 0, **extra: Any) -> Tuple[int, dict, Dict[str, str]]:
    doc: Dict[str, Any] = {"type": TYPE + code, "title": code.replace("_", " "), "status": status, "code": code}
    if detail:
        doc["detail"] = detail
    if intent is not None:
        doc["intent"] = intent
    headers: Dict[str, str] = {}
    if retry_after_ms:
        doc["retry_after_ms"] = retry_after_ms
        headers["Retry-After"] = str(max(1, (retry_after_ms + 999) // 1000))
    doc.update(extra)
    return status, doc, headers


class Ledger:
    """The replicated state, as far as the tests need it."""

    def __init__(self) -> None:
        self.intents: Dict[str, Dict[str, Any]] = {}
        self.index = 10
        self.cond = threading.Condition()
        self.approval_tools = ("approve.",)
        self.default_lease_ms = 30000

    def _bump(self, it: Dict[str, Any]) -> None:
        self.index += 1
        it["version"] = self.index
        self.cond.notify_all()

    def _expire(self, it: Dict[str, Any]) -> None:
        if it["state"] == "declared" and time.monotonic() > it["_deadline"]:
            it["state"] = "in_doubt"
            self._bump(it)

    @staticmethod
    def view(it: Dict[str, Any]) -> Dict[str, Any]:
        return {k: v for k, v in it.items() if not k.startswith("_") and v is not None}

    def claim(self, body: Dict[str, Any]) -> Tuple[int, dict, Dict[str, str]]:
        key, tool, owner = body.get("key") or "", body.get("tool") or "", body.get("owner") or ""
        if not key:
            return problem(400, "bad_request", "key: is required", field="key")
        if not tool:
            return problem(400, "bad_request", "tool: is required", field="tool")
        payload = body.get("payload")
        fp = json.dumps({"tool": tool, "payload": payload}, sort_keys=True)
        lease_ms = int(body.get("lease_ms") or self.default_lease_ms)
        with self.cond:
            it = self.intents.get(key)
            if it is not None:
                self._expire(it)
            if it is not None and it["fingerprint"] != fp:
                it["divergent"] += 1
                return problem(422, "divergent", "fingerprints differ", self.view(it), fingerprint=it["fingerprint"],
                               request_fingerprint=fp)
            if it is None and tool.startswith(self.approval_tools):
                it = self.intents[key] = self._new(key, tool, payload, fp, "pending_approval")
                it["approvals_required"] = 1
                self._bump(it)
                return 202, {"status": "pending_approval", "intent": self.view(it)}, {}
            if it is None or it["state"] in ("failed", "approved"):
                if it is None:
                    it = self.intents[key] = self._new(key, tool, payload, fp, "declared")
                return self._grant(it, owner, lease_ms)
            st = it["state"]
            if st == "pending_approval":
                return 202, {"status": "pending_approval", "intent": self.view(it)}, {}
            if st == "rejected":
                return problem(403, "rejected", "rejected", self.view(it))
            if st == "declared":
                if it["owner"] == owner:
                    return 200, self._grant_answer(it), {}
                left = int((it["_deadline"] - time.monotonic()) * 1000)
                return problem(409, "in_flight", "owner %r holds the lease" % it["owner"], self.view(it),
                               retry_after_ms=max(left, 1))
            if st == "in_doubt":
                return problem(409, "in_doubt", "the lease passed", self.view(it))
            it["duplicates"] += 1
            return 200, {"status": "duplicate", "intent": self.view(it)}, {}

    def _new(self, key: str, tool: str, payload: Any, fp: str, state: str) -> Dict[str, Any]:
        return {"key": key, "namespace": "default", "tool": tool, "state": state, "owner": None,
                "fencing_token": 0, "generation": 0, "fingerprint": fp, "payload": payload, "duplicates": 0,
                "divergent": 0, "version": 0, "_deadline": 0.0, "lease_ms": None}

    def _grant(self, it: Dict[str, Any], owner: str, lease_ms: int) -> Tuple[int, dict, Dict[str, str]]:
        it.update(state="declared", owner=owner, generation=it["generation"] + 1, lease_ms=lease_ms,
                  _deadline=time.monotonic() + lease_ms / 1000.0)
        it.pop("result", None)
        self._bump(it)
        it["fencing_token"] = it["version"]
        return 201, self._grant_answer(it), {}

    def _grant_answer(self, it: Dict[str, Any]) -> Dict[str, Any]:
        return {"status": "granted", "fencing_token": it["fencing_token"],
                "execution_token": "gex_%s_%d" % (it["key"], it["fencing_token"]), "intent": self.view(it)}

    def _holder(self, key: str, body: Dict[str, Any]) -> Tuple[Optional[Dict[str, Any]], Optional[tuple]]:
        it = self.intents.get(key)
        if it is None:
            return None, problem(404, "not_found", "intent not found")
        self._expire(it)
        if it["owner"] != body.get("owner") or ("fencing_token" in body and
                                                it["fencing_token"] != body.get("fencing_token")):
            return None, problem(409, "fenced", "stale owner or token", self.view(it))
        return it, None

    def complete(self, key: str, body: Dict[str, Any]) -> Tuple[int, dict, Dict[str, str]]:
        with self.cond:
            it, p = self._holder(key, body)
            if p:
                return p
            assert it is not None
            if it["state"] in ("declared", "in_doubt"):
                it["state"] = body["outcome"]
                if "result" in body:
                    it["result"] = body["result"]
                self._bump(it)
            elif it["state"] not in (body["outcome"], "committed"):
                return problem(409, "invalid_state", "already " + it["state"], self.view(it))
            return 200, {"status": "ok", "intent": self.view(it)}, {}

    def renew(self, key: str, body: Dict[str, Any]) -> Tuple[int, dict, Dict[str, str]]:
        with self.cond:
            it, p = self._holder(key, body)
            if p:
                return p
            assert it is not None
            if it["state"] == "in_doubt":
                return problem(409, "in_doubt", "the lease passed", self.view(it))
            if it["state"] != "declared":
                return problem(409, "invalid_state", "not declared", self.view(it))
            it["_deadline"] = time.monotonic() + body["lease_ms"] / 1000.0
            self._bump(it)
            return 200, {"status": "ok", "intent": self.view(it)}, {}

    def commit(self, key: str, body: Dict[str, Any]) -> Tuple[int, dict, Dict[str, str]]:
        with self.cond:
            it, p = self._holder(key, body)
            if p:
                return p
            assert it is not None
            if it["state"] == "executed":
                it["state"] = "committed"
                self._bump(it)
            elif it["state"] != "committed":
                return problem(409, "invalid_state", "not executed", self.view(it))
            return 200, {"status": "ok", "intent": self.view(it)}, {}

    def decide(self, key: str, approve: bool, body: Dict[str, Any]) -> Tuple[int, dict, Dict[str, str]]:
        with self.cond:
            it = self.intents.get(key)
            if it is None:
                return problem(404, "not_found", "intent not found")
            if it["state"] != "pending_approval":
                return problem(409, "not_pending_approval", "decided", self.view(it))
            if body.get("fingerprint") and body["fingerprint"] != it["fingerprint"]:
                return problem(422, "divergent", "fingerprint", self.view(it))
            it["state"] = "approved" if approve else "rejected"
            self._bump(it)
            return 200, {"status": "ok", "intent": self.view(it)}, {}

    def get(self, key: str, wait: float, after: int) -> Tuple[int, dict, Dict[str, str]]:
        end = time.monotonic() + wait
        with self.cond:
            while True:
                it = self.intents.get(key)
                if it is not None:
                    self._expire(it)
                if it is not None and (wait <= 0 or it["version"] > after):
                    return 200, self.view(it), {}
                rem = end - time.monotonic()
                if rem <= 0:
                    if it is None:
                        return problem(404, "not_found", "intent not found")
                    return 200, self.view(it), {}
                self.cond.wait(min(rem, 0.05))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        # Named, so tests can tell the server's threads from the client's.
        threading.Thread(target=self.process_request_thread, args=(request, client_address),
                         name="fake-server-conn", daemon=True).start()


@dataclass
class Rule:
    """An injected answer for the next `times` requests matching method and
    path prefix. apply: the ledger performs the call first (the answer is
    lost). drop: the connection is closed without an answer."""
    method: str
    prefix: str
    status: int = 503
    doc: Optional[dict] = None
    headers: Dict[str, str] = field(default_factory=dict)
    times: int = 1
    apply: bool = False
    drop: bool = False
    delay: float = 0.0


class Node:
    def __init__(self, cluster: "Cluster", node_id: str) -> None:
        self.cluster = cluster
        self.id = node_id
        self.rules: List[Rule] = []
        self.requests: List[Tuple[str, str, Any, Dict[str, str], str]] = []
        self.peers: set = set()
        self.lock = threading.Lock()
        node = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            wbufsize = 1 << 16

            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                node.handle(self)

            def do_POST(self) -> None:
                node.handle(self)

            def do_PUT(self) -> None:
                node.handle(self)

            def do_DELETE(self) -> None:
                node.handle(self)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def inject(self, method: str, prefix: str, status: int = 503, code: str = "unavailable", times: int = 1,
               apply: bool = False, drop: bool = False, retry_after_ms: int = 0, doc: Optional[dict] = None,
               headers: Optional[Dict[str, str]] = None, delay: float = 0.0) -> Rule:
        if doc is None and not drop:
            _, doc, h = problem(status, code, "injected", retry_after_ms=retry_after_ms)
            headers = dict(h, **(headers or {}))
        r = Rule(method, prefix, status, doc, headers or {}, times, apply, drop, delay)
        with self.lock:
            self.rules.append(r)
        return r

    def calls(self, method: str = "", prefix: str = "") -> List[Tuple[str, str, Any, Dict[str, str], str]]:
        with self.lock:
            return [r for r in self.requests if (not method or r[0] == method) and r[1].startswith(prefix)]

    def _rule(self, method: str, path: str) -> Optional[Rule]:
        with self.lock:
            for r in self.rules:
                if r.times > 0 and r.method == method and path.startswith(r.prefix):
                    r.times -= 1
                    return r
        return None

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        u = urlsplit(h.path)
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n) if n else b""
        body = json.loads(raw) if raw else None
        with self.lock:
            self.requests.append((h.command, u.path, body, dict(h.headers), u.query))
            self.peers.add(h.client_address[1])
        rule = self._rule(h.command, u.path)
        if rule is not None and rule.delay:
            time.sleep(rule.delay)
        if rule is not None and rule.apply:
            self.route(h.command, u.path, parse_qs(u.query), body or {}, h.headers)
        if rule is not None and rule.drop:
            h.close_connection = True
            try:
                h.connection.shutdown(2)
            except OSError:
                pass
            return
        if rule is not None:
            status, doc, headers = rule.status, rule.doc, rule.headers
        else:
            status, doc, headers = self.route(h.command, u.path, parse_qs(u.query), body or {}, h.headers)
        self.send(h, status, doc, headers)

    def send(self, h: BaseHTTPRequestHandler, status: int, doc: Any, headers: Dict[str, str]) -> None:
        data = json.dumps(doc).encode() if doc is not None else b""
        h.send_response(status)
        h.send_header("Content-Type", "application/problem+json" if status >= 400 else "application/json")
        for k, v in headers.items():
            h.send_header(k, v)
        if self.cluster.chunked:
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            for i in range(0, len(data), 7):
                part = data[i:i + 7]
                h.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            h.wfile.write(b"0\r\n\r\n")
        else:
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)

    def route(self, method: str, path: str, q: Dict[str, List[str]], body: Dict[str, Any],
              headers: Any) -> Tuple[int, Any, Dict[str, str]]:
        c = self.cluster
        if c.api_key and headers.get("Authorization") != "Bearer " + c.api_key:
            return problem(401, "unauthenticated", "no key")
        if path == "/v1/cluster":
            return 200, c.status(self), {}
        if path in ("/healthz", "/readyz"):
            return 200, {"status": "ok"}, {}
        if method != "GET" and c.leader is not self:
            return problem(503, "not_leader", "not the leader", retry_after_ms=1)
        L = c.ledger
        if path == "/v1/intents" and method == "POST":
            return L.claim(body)
        if path == "/v1/intents" and method == "GET":
            with L.cond:
                its = [L.view(i) for k, i in sorted(L.intents.items())
                       if not q.get("state") or i["state"] == q["state"][0]]
            return 200, {"intents": its, "next_cursor": ""}, {}
        if path.startswith("/v1/intents/"):
            rest = path[len("/v1/intents/"):]
            parts = rest.split("/")
            key = unquote(parts[0])
            action = parts[1] if len(parts) > 1 else ""
            if method == "GET" and action == "":
                wait = 0.0
                if "wait" in q:
                    w = q["wait"][0]
                    wait = float(w[:-2]) / 1000 if w.endswith("ms") else float(w.rstrip("s"))
                return L.get(key, wait, int(q.get("after_version", ["0"])[0]))
            if method == "GET" and action == "audit":
                return 200, {"key": key, "namespace": "default", "events": [{"index": 1, "op": "claim"}]}, {}
            if action == "complete":
                return L.complete(key, body)
            if action == "renew":
                return L.renew(key, body)
            if action == "commit":
                return L.commit(key, body)
            if action in ("approve", "reject"):
                return L.decide(key, action == "approve", body)
            if action == "resolve":
                return 200, {"status": "ok", "intent": {"key": key, "state": body.get("outcome")}}, {}
        if path == "/v1/tokens/verify":
            # Every token of the fake is for tool payments.refund.
            if body.get("tool") not in (None, "", "payments.refund"):
                return problem(422, "token_wrong_tool",
                               'the token is for tool "payments.refund", not %s' % json.dumps(body["tool"]))
            return 200, {"status": "ok", "valid": True,
                         "claims": {"aud": "payments.refund", "key": "k", "fence": 3}}, {}
        if path.startswith("/v1/policies"):
            name = unquote(path[len("/v1/policies/"):]) if path.startswith("/v1/policies/") else ""
            if method == "PUT":
                pol = dict(body, name=name, version=L.index)
                c.policies[name] = pol
                return 200, {"status": "ok", "policy": pol}, {}
            if method == "DELETE":
                c.policies.pop(name, None)
                return 200, {"status": "ok"}, {}
            if name:
                if name not in c.policies:
                    return problem(404, "policy_not_found", "no policy")
                return 200, {"policy": c.policies[name]}, {}
            return 200, {"policies": list(c.policies.values())}, {}
        return problem(404, "no_route", path)


class Cluster:
    def __init__(self, n: int = 1, leader: int = 0, api_key: str = "") -> None:
        self.ledger = Ledger()
        self.api_key = api_key
        self.chunked = False
        self.policies: Dict[str, Any] = {"default": {"name": "default", "version": 1}}
        self.nodes = [Node(self, "n%d" % (i + 1)) for i in range(n)]
        self.leader: Optional[Node] = self.nodes[leader]

    @property
    def urls(self) -> List[str]:
        return [n.url for n in self.nodes]

    def status(self, node: Node) -> Dict[str, Any]:
        ld = self.leader
        return {"node_id": node.id, "state": "leader" if ld is node else "follower",
                "leader_id": ld.id if ld else "", "leader_http": "127.0.0.1:%d" % ld.port if ld else "",
                "term": 2, "ready": ld is not None,
                "nodes": [{"id": n.id, "raft_addr": "x", "http_addr": "127.0.0.1:%d" % n.port, "gossip": "alive",
                           "leader": n is ld} for n in self.nodes]}

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
